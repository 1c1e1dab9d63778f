import Foundation

/// Whether and how a completed download's files become one playable file: the one home of that
/// decision, shared by the library (``DownloadTaskManager/Configuration/merging``), `tessera get`
/// and `tessera serve` (both take `--no-merge`, `--merge-output-format` and
/// `--audio-multistreams` for it).
///
/// yt-dlp's rules: a video and its audio become one file (the default selection, or an explicit
/// `video+audio`), the ordered parts of one video are joined; outputs selected as alternatives
/// of one another (a format selector's `all`, see ``DownloadManifest/selectsAlternatives``) are
/// each a file of their own; several audio tracks go in one file only with
/// ``audioMultistreams``.
public struct MergePolicy: Sendable, Hashable {
    /// The container of a merged file instead of the one the plan would choose.
    public var outputFormat: MergeOutputFormat?
    /// Every selected audio track into the merged file (yt-dlp's `--audio-multistreams`);
    /// otherwise the first, and the others stay files of their own.
    public var audioMultistreams: Bool
    /// The ffmpeg to run; `nil` looks it up on `PATH` when a merge is first needed.
    public var ffmpeg: String?

    /// Creates a policy.
    public init(outputFormat: MergeOutputFormat? = nil, audioMultistreams: Bool = false, ffmpeg: String? = nil) {
        self.outputFormat = outputFormat
        self.audioMultistreams = audioMultistreams
        self.ffmpeg = ffmpeg
    }

    /// The merger this policy runs.
    package var merger: MediaMerger {
        MediaMerger(outputFormat: outputFormat, audioMultistreams: audioMultistreams)
    }

    /// What to do with a task: a plan when it is a completed download whose outputs are a video
    /// and its audio or the parts of one video (see `MediaMerger/plan(for:title:)`), `nil`
    /// otherwise (its outputs are alternatives, not media, one file, or already merged).
    public func plan(for task: DownloadTaskInfo) -> MergePlan? {
        guard task.state == .completed, task.mode == .download, !task.outputsAreAlternatives else { return nil }
        let inputs = task.outputs.map { MergeInput(path: $0.path, media: $0.media) }
        return merger.plan(for: inputs, title: task.title)
    }
}

extension DownloadManifest {
    /// The metadata key of ``selectsAlternatives``.
    static let alternativesKey = "tessera.alternatives"

    /// Whether the selected outputs are alternatives of one another (a format selector's `all`:
    /// every variant of a stream) rather than the parts of one presentation: each is a file of
    /// its own, never merged with another (``MergePolicy``). Plugins set it when their format
    /// selector asks for everything.
    public var selectsAlternatives: Bool {
        get { metadata[Self.alternativesKey] == "true" }
        set { metadata[Self.alternativesKey] = newValue ? "true" : nil }
    }
}
