import ATSTLS
import Foundation

/// What the core asks of the app-trust features (`--challenge`, `--af-policy`) while it runs. The core declares it
/// and `ATSAppTrust` implements it (`AppTrustServices`), so the proxy's core does not import that feature module.
///
/// Implementations are immutable and thread-safe: sessions on every loop call them.
public protocol AppTrustProvider: Sendable {
    /// Whether any `--af-policy` is set: when false, `pinning` is never asked (the leg skips gathering a chain).
    var evaluatesPinning: Bool { get }

    /// The challenge (if any) the next client connection to `host` gets, with the engine presenting it. Nil for a
    /// normal connection. Throws when the forged server cannot be made.
    func challenge(host: String) throws -> (kind: ChallengeKind, engine: TLSConnection)?

    /// The app's AFSecurityPolicy verdicts for `host`: on the chain the origin presented (`realChain`, leaf first)
    /// and on the chain the proxy presents to the app for that host. Nil when no policy names the host.
    func pinning(host: String, realChain: [Certificate], at time: Date) -> AppTrustRecord.Pinning?
}
