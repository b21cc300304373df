import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The app's networking code under test: it takes its URLSession from outside, so tests can hand it one
/// that goes through ats-proxy.
public struct FeedClient: Sendable {
    /// What the app shows for a load.
    public enum Outcome: Equatable, Sendable {
        case loaded(Int)
        /// ATS refused the load: the app falls back to its bundled feed.
        case blockedByATS
        case failed(Int)
    }

    let session: URLSession

    public init(session: URLSession) { self.session = session }

    /// Loads `url` and says what the app would do with the result.
    public func load(_ url: URL) async -> Outcome {
        do {
            let (data, _) = try await session.data(from: url)
            return .loaded(data.count)
        } catch let error as URLError where error.code == .appTransportSecurityRequiresSecureConnection {
            return .blockedByATS
        } catch let error as URLError {
            return .failed(error.code.rawValue)
        } catch {
            return .failed(0)
        }
    }
}
