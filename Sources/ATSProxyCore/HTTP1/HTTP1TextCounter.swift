#if DEBUG
    /// Debug builds only: counts the HTTP/1.1 heads written (`HTTP1Serializer`) and parsed (`HTTP1Parser`) while a
    /// test holds a counter in `HTTP1TextCounter.current`. Tests use it to prove that a path carries no HTTP/1.1
    /// text (an HTTP/2 client's request to an HTTP/2 origin) by counting rather than timing. The counter is a
    /// task-local, so tests running in parallel do not see each other's counts; release builds have no counter and
    /// no cost.
    package final class HTTP1TextCounter: @unchecked Sendable {
        /// Heads serialized while this counter was current.
        package private(set) var headsWritten = 0
        /// Heads parsed while this counter was current.
        package private(set) var headsParsed = 0

        /// A counter at zero; make it current with `HTTP1TextCounter.$current.withValue(counter) { … }`.
        package init() {}

        /// The counter of the running test, if any. Only touched from the test's own (synchronous) code.
        @TaskLocal package static var current: HTTP1TextCounter?

        /// Counts one serialized head.
        static func countWrite() { current?.headsWritten += 1 }
        /// Counts one parsed head.
        static func countParse() { current?.headsParsed += 1 }
    }
#endif
