import ArgumentParser

/// `ats-proxy diagnose URL`: the Linux equivalent of `nscurl --ats-diagnostics`.
/// (Owned by the TLS layer work; filled in there.)
struct DiagnoseCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "diagnose", abstract: "Run nscurl-style ATS diagnostics against a server.")
}
