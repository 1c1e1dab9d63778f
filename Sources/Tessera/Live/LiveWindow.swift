import Foundation

/// Where a live segment sits in its stream: segments are recorded in the order of their keys.
///
/// An HLS segment's key is its media sequence number (``period`` 0); a DASH segment's is its
/// period's start in milliseconds and its `$Number$` (or, for `$Time$` addressing, its time in
/// the timescale). Keys only compare within one stream: a plugin gives every segment of one
/// output a key of the same kind, from one reload to the next.
public struct LiveSegmentKey: Hashable, Comparable, Sendable, Codable, CustomStringConvertible {
    /// The period the segment belongs to (DASH: the period's start in milliseconds; HLS: 0).
    public var period: Int64
    /// The segment's place in its period: a media sequence number, a `$Number$` or a time.
    public var position: Int64

    /// Creates a key.
    public init(period: Int64 = 0, position: Int64) {
        self.period = period
        self.position = position
    }

    public static func < (lhs: LiveSegmentKey, rhs: LiveSegmentKey) -> Bool {
        (lhs.period, lhs.position) < (rhs.period, rhs.position)
    }

    public var description: String { period == 0 ? "\(position)" : "\(period)/\(position)" }
}

/// One segment a live manifest offers now.
public struct LiveSegment: Sendable, Hashable {
    /// Its place in the stream.
    public var key: LiveSegmentKey
    /// Its media duration, in seconds (`#EXTINF`, or `S@d` / `@duration` over the timescale).
    public var duration: Double
    /// Its start on the presentation timeline, in seconds, when the manifest tells it (DASH);
    /// `nil` when it does not (HLS). Gaps are measured with it when both sides have it.
    public var start: Double?
    /// Where its bytes are (URLs, range, encryption).
    public var segment: DownloadSegment
    /// The initialisation section that must come before it in the file (`#EXT-X-MAP`, a DASH
    /// `Initialization`), if any; it is written again only when it changes.
    public var initSection: DownloadSegment?
    /// Whether a discontinuity (`#EXT-X-DISCONTINUITY`, a new DASH period) comes before it.
    public var isDiscontinuity: Bool
    /// Its discontinuity sequence number (`#EXT-X-DISCONTINUITY-SEQUENCE` plus the
    /// discontinuity tags up to it in the playlist, its own included), when the manifest
    /// numbers them.
    public var discontinuitySequence: Int64?
    /// The wall-clock time of its first sample (`#EXT-X-PROGRAM-DATE-TIME`), when given.
    public var programDateTime: Date?
    /// When it becomes available, on the recorder's clock (a DASH segment computed from a
    /// template before its time); `nil`: it is available now.
    public var availableAt: Date?

    /// Creates a segment.
    public init(
        key: LiveSegmentKey, duration: Double, start: Double? = nil, segment: DownloadSegment, initSection: DownloadSegment? = nil,
        isDiscontinuity: Bool = false, discontinuitySequence: Int64? = nil, programDateTime: Date? = nil, availableAt: Date? = nil
    ) {
        self.key = key
        self.duration = duration
        self.start = start
        self.segment = segment
        self.initSection = initSection
        self.isDiscontinuity = isDiscontinuity
        self.discontinuitySequence = discontinuitySequence
        self.programDateTime = programDateTime
        self.availableAt = availableAt
    }

    /// Whether it is available at `now`.
    public func isAvailable(at now: Date) -> Bool { availableAt.map { $0 <= now } ?? true }
}

/// What one reload of a live manifest shows of one output: the segments it offers now (the
/// sliding window), in the order of their keys, and what it says of the future.
public struct LiveWindow: Sendable, Hashable {
    /// The segments, ascending by key.
    public var segments: [LiveSegment]
    /// The longest segment duration the manifest announces, in seconds (HLS
    /// `#EXT-X-TARGETDURATION`; DASH the longest segment of the window): the unit of the reload
    /// rules and of the join point.
    public var targetDuration: Double
    /// Whether no segment will ever follow the last one listed (HLS `#EXT-X-ENDLIST`, an MPD
    /// that turned `static`, or a dynamic MPD whose announced end is reached).
    public var isComplete: Bool
    /// When to look again, when the manifest says (DASH: the next segment's availability or
    /// `minimumUpdatePeriod`); `nil`: the tracker applies RFC 8216 §6.3.4 (one target duration
    /// after a reload that changed, half of one after one that did not).
    public var suggestedReload: Date?
    /// Segments available after the last one listed (a window the plugin cut to size); they
    /// count as "behind the live edge".
    public var segmentsAfter: Int
    /// Where the live edge is now on the presentation timeline (seconds, as
    /// ``LiveSegment/start``), when the manifest places segments in time (DASH): a recording that
    /// joins there starts with the segment that holds that time less the join distance (as
    /// DASH players do), not with one counted back from the last segment out.
    public var liveEdge: Double?

    /// Creates a window.
    public init(
        segments: [LiveSegment], targetDuration: Double, isComplete: Bool = false, suggestedReload: Date? = nil,
        segmentsAfter: Int = 0
    ) {
        self.segments = segments
        self.targetDuration = targetDuration
        self.isComplete = isComplete
        self.suggestedReload = suggestedReload
        self.segmentsAfter = segmentsAfter
    }

    /// The same window with its live edge at `liveEdge`.
    public func withLiveEdge(_ liveEdge: Double?) -> LiveWindow {
        var window = self
        window.liveEdge = liveEdge
        return window
    }
}

/// Segments that left the window before they could be recorded (or that could not be fetched).
public struct LiveGap: Sendable, Hashable, Codable {
    /// The last segment dealt with before the gap, if any.
    public var after: LiveSegmentKey?
    /// The first segment after the gap, if known.
    public var before: LiveSegmentKey?
    /// How many segments are missing, when it can be told.
    public var segments: Int?
    /// How long the missing media is, in seconds (measured on the presentation timeline when the
    /// manifest has one, else counted in segments of the target duration).
    public var seconds: Double

    /// Creates a gap.
    public init(after: LiveSegmentKey?, before: LiveSegmentKey?, segments: Int?, seconds: Double) {
        self.after = after
        self.before = before
        self.segments = segments
        self.seconds = seconds
    }
}

/// Why a live recording ended.
public enum LiveEnding: String, Sendable, Hashable, Codable {
    /// The stream ended: `#EXT-X-ENDLIST`, an MPD that turned `static` or reached its announced
    /// end, and every segment up to the end was dealt with.
    case streamEnded
    /// The recorded media reached the duration asked for.
    case durationReached
    /// No new segment appeared for ``LiveRecordingPolicy/stallTimeout(targetDuration:)``.
    case stalled
    /// Ended on request (``DownloadTaskManager/endRecording(_:)``, Ctrl-C in `tessera get`).
    case stopped
}
