import ArgumentParser

/// `ats-proxy ca …`: create, show and export the proxy's certificate authority.
/// (Owned by the TLS layer work; filled in there.)
struct CACommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ca", abstract: "Manage the proxy's certificate authority.")
}
