import Foundation

/// What a live manifest says of itself: a manifest with ``DownloadManifest/live`` set is a
/// stream still being published (an HLS media playlist without `#EXT-X-ENDLIST`, a DASH MPD of
/// `type="dynamic"`), recorded by reloading it instead of downloaded once.
///
/// Its outputs' segments are what the window offered when it was resolved (for `tessera
/// resolve`); the recording asks the entity (a ``LiveStreamParser``) for fresh windows.
public struct LiveManifestInfo: Sendable, Codable, Hashable {
    /// The protocol's name for people (`HLS`, `DASH`).
    public var kind: String
    /// The target duration the manifest gave when it was resolved, in seconds.
    public var targetDuration: Double
    /// How many segments the window offered then.
    public var windowSegments: Int

    /// Creates the description.
    public init(kind: String, targetDuration: Double, windowSegments: Int) {
        self.kind = kind
        self.targetDuration = targetDuration
        self.windowSegments = windowSegments
    }
}

extension DownloadManifest {
    /// Whether the manifest is a live stream (``live`` is set).
    public var isLive: Bool { live != nil }
}

/// An entity whose manifest may be live: besides resolving it once, it can reload it as often
/// as the recording needs (see ``LiveSource``).
///
/// When ``DownloadParserProtocol/resolve(in:)`` returns a manifest with
/// ``DownloadManifest/live`` set, the manager records the stream instead of downloading the
/// manifest's segments: it asks ``liveSource(for:in:)`` for a source, reloads it on the schedule
/// the standard gives, and appends every new segment to its output in order.
public protocol LiveStreamParser: DownloadParserProtocol {
    /// A source that reloads `manifest` (a manifest this entity resolved, its outputs named by
    /// the manager: windows are given by output index).
    func liveSource(for manifest: DownloadManifest, in context: ResolveContext) throws(DownloadError) -> any LiveSource
}

/// Reloads a live manifest: each call fetches it again (or, for a DASH template whose MPD need
/// not be fetched yet, computes what the clock makes available) and returns the window of every
/// selected output.
public protocol LiveSource: Sendable {
    /// The windows now, by output index. `from` gives, per output, the key of the last segment
    /// dealt with, so a plugin that builds segments from a template need not build the ones
    /// before it (a window then starts after that key, or at the oldest segment still offered).
    /// `clock` is the recorder's: what it reads is when (a plugin that measures a server's clock
    /// against it reads it around the request).
    mutating func reload(from: [Int: LiveSegmentKey], clock: any LiveClock, in context: ResolveContext) async throws(DownloadError)
        -> [Int: LiveWindow]
}

/// How a live recording stands, in a task's snapshot (``DownloadTaskInfo/live``).
public struct LiveRecordingInfo: Sendable, Hashable, Codable {
    /// Media recorded, in seconds (the shortest of the outputs: what a merged file holds).
    public var recordedSeconds: Double = 0
    /// Segments recorded, over every output.
    public var segmentsRecorded = 0
    /// Segments the stream offers that are not recorded yet (the most of any output).
    public var segmentsBehindLiveEdge = 0
    /// Gaps found (the most of any output) and their media in seconds.
    public var gaps = 0
    /// See ``gaps``.
    public var gapSeconds: Double = 0
    /// Why the recording ended, once it has.
    public var ending: LiveEnding?

    /// An empty recording.
    public init() {}

    /// Creates a snapshot.
    public init(
        recordedSeconds: Double, segmentsRecorded: Int, segmentsBehindLiveEdge: Int, gaps: Int, gapSeconds: Double,
        ending: LiveEnding?
    ) {
        self.recordedSeconds = recordedSeconds
        self.segmentsRecorded = segmentsRecorded
        self.segmentsBehindLiveEdge = segmentsBehindLiveEdge
        self.gaps = gaps
        self.gapSeconds = gapSeconds
        self.ending = ending
    }

    /// Whether the stream is being recorded (not ended).
    public var isRecording: Bool { ending == nil }
}
