import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A `URLProtocol` that sends each request through the ats-proxy (on a transport session built by
/// `ATSProxyTesting`) and, when the proxy answers for the device with `X-ATS-Error`, fails the request with
/// the device's `URLError` instead of delivering the 403/502. Any other answer is delivered as is.
///
/// Installed by `URLSessionConfiguration.atsProxy(…)` through `protocolClasses`; app code needs no change.
/// Thread-safety: URLSession calls `startLoading` and `stopLoading` on one thread per request; the
/// running transport task is kept under a lock because its completion arrives on another.
public final class ATSProxyURLProtocol: URLProtocol {
    /// The session the requests travel on; set once by `ATSProxyTesting` before any request.
    nonisolated(unsafe) static var transport: URLSession?
    private static let transportLock = NSLock()

    private let lock = NSLock()
    private var transportTask: URLSessionDataTask?
    private var stopped = false

    /// Installs the transport session every instance uses.
    static func install(transport session: URLSession) {
        transportLock.lock()
        transport = session
        transportLock.unlock()
    }

    static func currentTransport() -> URLSession? {
        transportLock.lock()
        defer { transportLock.unlock() }
        return transport
    }

    public override class func canInit(with request: URLRequest) -> Bool {
        guard let scheme = request.url?.scheme?.lowercased() else { return false }
        return (scheme == "http" || scheme == "https") && currentTransport() != nil
    }

    public override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }

    public override func startLoading() {
        guard let transport = Self.currentTransport() else {
            client?.urlProtocol(self, didFailWithError: URLError(.unsupportedURL))
            return
        }
        let request = self.request
        let owner = Owner(self)
        // FoundationNetworking runs every session's work on one shared queue, and this method is called on
        // it: starting the transport task from here would wait for that queue. Start it from another one.
        DispatchQueue.global().async {
            let started = transport.dataTask(with: request) { data, response, error in
                owner.target?.finish(request: request, data: data, response: response, error: error)
            }
            guard let target = owner.target, target.keep(started) else { return }
            started.resume()
        }
    }

    public override func stopLoading() {
        lock.lock()
        let running = transportTask
        transportTask = nil
        stopped = true
        lock.unlock()
        if let running { DispatchQueue.global().async { running.cancel() } }
    }

    /// Keeps `task` as the running transport task; false when loading was already stopped.
    private func keep(_ task: URLSessionDataTask) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        guard !stopped else { return false }
        transportTask = task
        return true
    }

    /// A weak reference to the protocol instance that the transport's completion handler may carry across
    /// threads: URLProtocol is not Sendable, but its client may be called from any thread.
    private final class Owner: @unchecked Sendable {
        weak var target: ATSProxyURLProtocol?
        init(_ target: ATSProxyURLProtocol) { self.target = target }
    }

    /// Delivers the transport's outcome to the client: the device's error for an `X-ATS-Error` answer, the
    /// transport's error, or the response and its body.
    private func finish(request: URLRequest, data: Data?, response: URLResponse?, error: (any Error)?) {
        if let error {
            client?.urlProtocol(self, didFailWithError: error)
            return
        }
        if let http = response as? HTTPURLResponse,
            let deviceError = ATSDeviceError.urlError(for: http, url: http.url ?? request.url)
        {
            client?.urlProtocol(self, didFailWithError: deviceError)
            return
        }
        guard let response else {
            client?.urlProtocol(self, didFailWithError: URLError(.badServerResponse))
            return
        }
        client?.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
        if let data, !data.isEmpty { client?.urlProtocol(self, didLoad: data) }
        client?.urlProtocolDidFinishLoading(self)
    }
}
