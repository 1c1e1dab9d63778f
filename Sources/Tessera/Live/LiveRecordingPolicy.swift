import Foundation

/// How a manager records live streams (``DownloadTaskManager/Configuration/live``).
public struct LiveRecordingPolicy: Sendable {
    /// Where a new recording joins the stream.
    public enum Start: String, Sendable, Hashable {
        /// At the live edge: the latest segment that starts at least
        /// ``LiveRecordingPolicy/liveEdgeDistance`` target durations before the end of the
        /// window (RFC 8216 §6.3.3; streamlink's and players' default).
        case liveEdge
        /// At the oldest segment the window still offers (`--live-from-start`).
        case oldest
    }

    /// Where a new recording joins the stream.
    public var start: Start = .liveEdge
    /// How far from the end of the window a recording that joins at the live edge starts, in
    /// target durations.
    public var liveEdgeDistance: Double = 3
    /// The recording ends once this much media is recorded (`--live-duration`); `nil`: when the
    /// stream ends.
    public var maxDuration: Duration?
    /// How long a stream may publish no new segment (and reloads fail or show nothing new)
    /// before the recording takes it as ended; `nil`: ``stallTimeout(targetDuration:)``'s default.
    public var stallTimeout: Duration?
    /// The clock reloads, availability and stalls are measured on.
    public var clock: any LiveClock = SystemLiveClock()

    /// The defaults.
    public init() {}

    /// The stall timeout for a stream of `targetDuration`-second segments: ``stallTimeout`` when
    /// set, else six target durations and at least 30 seconds (a stream that misses a few
    /// segments is not over; streamlink waits 60 s for any reload).
    public func stallTimeout(targetDuration: Double) -> Double {
        if let stallTimeout { return max(0, stallTimeout.secondsValue) }
        return max(30, 6 * targetDuration)
    }
}
