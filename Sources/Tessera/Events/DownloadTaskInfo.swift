import Foundation

/// A snapshot of one task, as the manager's `check` methods (``DownloadTaskManager/checkAll()``
/// and the others) and events give it: values, never live objects.
public struct DownloadTaskInfo: Sendable, Equatable {
    /// The task's identity.
    public var id: DownloadTaskID
    /// The entity's title (or the manifest's, once resolved).
    public var title: String
    /// The group the task belongs to, if any.
    public var groupKey: String?
    /// The state.
    public var state: DownloadTaskState
    /// What the task does: produce outputs, or only fill the cache.
    public var mode: DownloadTaskMode
    /// Bytes of the selected outputs that are done.
    public var bytesDone: Int64
    /// Bytes of the selected outputs in all, once known.
    public var bytesTotal: Int64?
    /// Whether ``bytesTotal`` is an estimate: some segments' sizes are unknown until they
    /// arrive (HLS, DASH), so the total is extrapolated from the finished ones.
    public var bytesTotalIsEstimate = false
    /// Segments done and in all.
    public var segmentsDone: Int
    /// See ``segmentsDone``.
    public var segmentsTotal: Int
    /// Download speed, a moving average in bytes per second.
    public var bytesPerSecond: Double
    /// Time left at the current speed, when it can be told.
    public var eta: Duration?
    /// The outputs, once the manifest is known.
    public var outputs: [OutputInfo]
    /// The last error: the cause of `failed` or `invalid`, or the latest retried one.
    public var error: DownloadError?
    /// How often the parser was asked for a manifest.
    public var resolveCount: Int
    /// Scheduling weight: higher runs first.
    public var weight: Int
    /// Whether the outputs are alternatives of one another (``DownloadManifest/selectsAlternatives``:
    /// a format selector's `all`), each a file of its own that is never merged.
    public var outputsAreAlternatives = false

    /// For a live stream (``DownloadManifest/live``): how its recording stands. Its
    /// ``bytesTotal`` is `nil` (the stream grows) and its state `downloading` while it records:
    /// ``isRecording`` tells the two apart.
    public var live: LiveRecordingInfo? = nil

    /// Whether the task is recording a live stream now.
    public var isRecording: Bool { state.isRunning && live?.isRecording == true }

    /// Done over total, when the total is known.
    public var fractionDone: Double? {
        guard let bytesTotal, bytesTotal > 0 else { return bytesTotal == 0 ? 1 : nil }
        return min(1, Double(bytesDone) / Double(bytesTotal))
    }

    /// One output of a task.
    public struct OutputInfo: Sendable, Hashable {
        /// The output's name in the manifest (relative to the entity's directory).
        public var name: String
        /// The absolute path of the finished file (or directory, for separate files).
        public var path: String
        /// The expected size, when known.
        public var expectedSize: Int64?
        /// Whether the file is complete and verified.
        public var isComplete: Bool
        /// What the output holds, as the manifest describes it (see ``MediaInfo``): what a
        /// `MediaMerger` decides from.
        public var media: MediaInfo? = nil
    }
}

/// What a task is for.
public enum DownloadTaskMode: String, Sendable, Hashable, Codable {
    /// Produce the outputs (`start`).
    case download
    /// Only fetch segments into the cache (`startCache`); no output is written.
    case cacheOnly
}

extension DownloadTaskInfo {
    /// A snapshot of a task this process does not run (a fleet's task another worker holds or
    /// the queue keeps), from what its record says: no speed, no outputs, no ETA.
    package init(
        recordOf id: DownloadTaskID, title: String, groupKey: String?, state: DownloadTaskState, mode: DownloadTaskMode = .download,
        bytesDone: Int64, bytesTotal: Int64?, segmentsDone: Int, segmentsTotal: Int, error: DownloadError?, weight: Int = 0
    ) {
        self.init(
            id: id, title: title, groupKey: groupKey, state: state, mode: mode, bytesDone: bytesDone, bytesTotal: bytesTotal,
            segmentsDone: segmentsDone, segmentsTotal: segmentsTotal, bytesPerSecond: 0, eta: nil, outputs: [], error: error,
            resolveCount: 0, weight: weight)
    }
}
