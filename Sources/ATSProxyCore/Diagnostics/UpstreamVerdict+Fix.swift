import ATSPolicy
import ATSTLS

extension UpstreamVerdict {
    /// The verdict with its `fix` filled in by ``SmallestFix`` (the code `diagnose` uses) under the
    /// policy `evaluator` applies, when it is blocked and has none yet. The proxy cannot hold the
    /// client while it tries more handshakes, so a refused handshake gets what is known and a
    /// pointer to `diagnose`.
    func withFix(url: String, evaluator: ATSEvaluator) -> UpstreamVerdict {
        guard isBlocked, fix == nil, let target = try? RequestTarget(parsing: url) else { return self }
        var copy = self
        let policy = PolicyContext(configuration: evaluator.configuration, options: evaluator.options)
        copy.fix = SmallestFix(policy: policy).text(for: self, target: target, retry: nil)
        return copy
    }
}
