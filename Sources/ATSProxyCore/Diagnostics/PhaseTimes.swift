import Foundation

/// The instants at which an exchange's upstream phases ended, kept by the session as they happen
/// (`now` of the event that ended each phase) and turned into `RequestRecord.Timings` when the
/// record is made. A plain value; a phase that did not happen stays nil.
struct PhaseTimes {
    var connectStart: Date?
    var connected: Date?
    var secured: Date?
    var firstByte: Date?

    /// Milliseconds from `start` to each instant.
    func record(since start: Date) -> RequestRecord.Timings {
        func offset(_ date: Date?) -> Double? {
            date.map { (max(0, $0.timeIntervalSince(start)) * 10_000).rounded() / 10 }
        }
        return RequestRecord.Timings(
            connectStart: offset(connectStart), connected: offset(connected), secured: offset(secured),
            firstByte: offset(firstByte))
    }
}
