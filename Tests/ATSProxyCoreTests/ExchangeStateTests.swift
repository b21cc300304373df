import Testing

@testable import ATSProxyCore

/// The exchange life cycle as a value: every legal path, the queries the session asks on the way, and the
/// transitions that trap (checked in a child process: a trap ends it with a failure status).
@Suite("ExchangeState")
struct ExchangeStateTests {
    static let fresh = ExchangeState.forwarding(request: .receiving, response: .awaitingResponse)

    @Test("a forwarded exchange: request and response halves move independently to complete, then it is recorded")
    func forwardedLifeCycle() {
        var state = Self.fresh
        #expect(state.isForwarding && !state.requestComplete && !state.responseBytesSeen && !state.responseStarted)
        let first = state.responseBytesArrived()
        let second = state.responseBytesArrived()
        #expect(first && !second)  // only the first bytes count as the first byte
        #expect(state.responseBytesSeen && !state.responseStarted)
        state.responseHeadSent()
        #expect(state.responseStarted && !state.responseComplete && !state.isComplete)
        state.requestTrailersForwarded()
        #expect(state.requestEndForwarded && !state.requestComplete)
        state.requestEnded()
        #expect(state.requestComplete && !state.isComplete)
        state.responseEnded()
        #expect(state == .forwarding(request: .complete, response: .complete) && state.isComplete)
        state.record()
        #expect(state.isRecorded && state.isComplete && !state.isForwarding)
    }

    @Test("the response may complete before the request (an early answer to a large upload)")
    func responseBeforeRequest() {
        var state = Self.fresh
        state.responseHeadSent()
        state.responseEnded()
        #expect(state.responseComplete && !state.isComplete)
        state.requestEnded()
        #expect(state.isComplete)
    }

    @Test("a local answer ends the response at once; the rest of the request body is read and dropped")
    func answeredLocally() {
        var state = Self.fresh
        _ = state.responseBytesArrived()
        state.answeredLocally()
        #expect(state == .answeredLocally(request: .receiving))
        #expect(state.responseStarted && state.responseComplete && !state.isComplete && !state.requestEndForwarded)
        state.requestEnded()
        #expect(state.isComplete)
    }

    @Test("a passthrough probe: the CONNECT is the whole request; the tunnel's 200 or a failure ends it")
    func probe() {
        var opened = ExchangeState.probing
        #expect(opened.requestComplete && !opened.responseStarted && !opened.isForwarding)
        opened.tunnelOpened()
        #expect(opened.isComplete)
        var failed = ExchangeState.probing
        failed.answeredLocally()
        #expect(failed == .answeredLocally(request: .complete) && failed.isComplete)
    }

    @Test("a 101 ends both halves; a resent request starts its response again from nothing")
    func upgradeAndResend() {
        var upgraded = Self.fresh
        upgraded.responseHeadSent()
        upgraded.upgraded()
        #expect(upgraded.isComplete)
        var resent = ExchangeState.forwarding(request: .complete, response: .awaitingResponse)
        resent.resent()
        #expect(resent == .forwarding(request: .complete, response: .awaitingResponse))
    }

    @Test("illegal transitions trap, naming the state", arguments: IllegalTransition.allCases)
    func illegalTransitionsTrap(_ transition: IllegalTransition) async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            [transition] in
            transition.run()
        }
        let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        #expect(message.contains("is not allowed in state"))
        #expect(message.contains(transition.expectedState))
    }
}

/// Transitions the state machine must refuse (each runs in its own child process).
enum IllegalTransition: String, CaseIterable, Codable, Sendable, CustomStringConvertible {
    case secondResponseHead
    case responseEndBeforeHead
    case localAnswerAfterOriginHead
    case secondRequestEnd
    case recordTwice
    case bytesForALocalAnswer
    case resendAfterResponseBytes
    case trailersTwice

    var description: String { rawValue }

    /// The state the trap message must name.
    var expectedState: String {
        switch self {
        case .secondResponseHead: "forwarding(receiving, streaming)"
        case .responseEndBeforeHead: "forwarding(receiving, awaitingResponse)"
        case .localAnswerAfterOriginHead: "forwarding(receiving, streaming)"
        case .secondRequestEnd: "forwarding(complete, awaitingResponse)"
        case .recordTwice: "recorded"
        case .bytesForALocalAnswer: "answeredLocally(receiving)"
        case .resendAfterResponseBytes: "forwarding(receiving, arriving)"
        case .trailersTwice: "forwarding(trailersForwarded, awaitingResponse)"
        }
    }

    func run() {
        var state = ExchangeStateTests.fresh
        switch self {
        case .secondResponseHead:
            state.responseHeadSent()
            state.responseHeadSent()
        case .responseEndBeforeHead:
            state.responseEnded()
        case .localAnswerAfterOriginHead:
            state.responseHeadSent()
            state.answeredLocally()
        case .secondRequestEnd:
            state.requestEnded()
            state.requestEnded()
        case .recordTwice:
            state.record()
            state.record()
        case .bytesForALocalAnswer:
            state.answeredLocally()
            _ = state.responseBytesArrived()
        case .resendAfterResponseBytes:
            _ = state.responseBytesArrived()
            state.resent()
        case .trailersTwice:
            state.requestTrailersForwarded()
            state.requestTrailersForwarded()
        }
    }
}
