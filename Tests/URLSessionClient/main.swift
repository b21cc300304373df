import ATSProxyTesting
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A URLSession client for the end-to-end tests, run as the command of `ats-proxy exec`:
/// `ats-proxy-urlsession-client [--plain | --through ROUTE HOST PORT CA] URL…` fetches each URL and prints one
/// line per URL, `URL status CODE BYTES` or `URL error CODE stream DOMAIN:CODE failing URL rule TEXT`.
/// With `--plain` it uses a default session (no ATSProxyTesting) to show what the bare client sees; with
/// `--through` one session routed per session (`ATSProxyTesting.session(through:route:)`), run without exec.
/// Exits 0 when every line was printed.
@main
struct URLSessionClient {
    static func main() async {
        var arguments = Array(CommandLine.arguments.dropFirst())
        let plain = arguments.first == "--plain"
        if plain { arguments.removeFirst() }
        // `--through ROUTE HOST PORT CA`: one session routed per session (no exec, no proxy variables).
        var through: (ATSProxyRoute, ATSProxyEnvironment)?
        if arguments.first == "--through", arguments.count >= 5 {
            guard let route = ATSProxyRoute(rawValue: arguments[1]), let port = Int(arguments[3]),
                let proxy = ATSProxyEnvironment(host: arguments[2], port: port, caCertificatePath: arguments[4])
            else {
                print("setup error bad --through \(arguments[1...4])")
                exit(2)
            }
            through = (route, proxy)
            arguments.removeFirst(5)
        }
        let session: URLSession
        do {
            if let (route, proxy) = through {
                session = try ATSProxyTesting.session(through: proxy, route: route)
            } else {
                session = plain ? URLSession(configuration: .ephemeral) : try ATSProxyTesting.session()
            }
        } catch {
            print("setup error \(error)")
            exit(2)
        }
        for argument in arguments {
            guard let url = URL(string: argument) else {
                print("\(argument) bad-url")
                continue
            }
            do {
                let (data, response) = try await session.data(from: url)
                let status = (response as? HTTPURLResponse)?.statusCode ?? 0
                print("\(argument) status \(status) \(data.count)")
            } catch let error as URLError {
                let info = error.userInfo
                let domain = info[ATSDeviceError.streamErrorDomainKey].map { "\($0)" } ?? "-"
                let code = info[ATSDeviceError.streamErrorCodeKey].map { "\($0)" } ?? "-"
                let failing = error.failingURL?.absoluteString ?? "-"
                let rule = info[ATSDeviceError.ruleKey].map { "\($0)" } ?? "-"
                print(
                    "\(argument) error \(error.code.rawValue) stream \(domain):\(code) failing \(failing) rule \(rule) description \(error.localizedDescription)"
                )
            } catch {
                print("\(argument) other-error \(error)")
            }
        }
    }
}
