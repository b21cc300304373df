import ATSProxyTesting
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A URLSession client for the end-to-end tests, run as the command of `ats-proxy exec`:
/// `ats-proxy-urlsession-client [--plain] URL…` fetches each URL and prints one line per URL,
/// `URL status CODE BYTES` or `URL error CODE stream DOMAIN:CODE failing URL rule TEXT`.
/// With `--plain` it uses a default session (no ATSProxyTesting) to show what the bare client sees.
/// Exits 0 when every line was printed.
@main
struct URLSessionClient {
    static func main() async {
        var arguments = Array(CommandLine.arguments.dropFirst())
        let plain = arguments.first == "--plain"
        if plain { arguments.removeFirst() }
        let session: URLSession
        do {
            session = plain ? URLSession(configuration: .ephemeral) : try ATSProxyTesting.session()
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
