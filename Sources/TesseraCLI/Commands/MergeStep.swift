import ArgumentParser
import Foundation
import Tessera

/// The merging options of `get`, `resume` and `serve`: the library's ``MergePolicy``, which the
/// manager applies as each task completes (the same for every front-end).
package struct MergeOptions: ParsableArguments {
    /// The defaults (argument-parser fills the options in).
    package init() {}

    @Flag(name: .customLong("no-merge"), help: "Keep a video's tracks (DASH, HLS) or parts (playurl) as separate files instead of merging them with ffmpeg.")
    var noMerge = false

    @Option(
        name: .customLong("merge-output-format"),
        help: ArgumentHelp("The container of a merged file: mp4, mkv, webm or mov (default: mp4 when the codecs fit it, else mkv; parts keep their own).", valueName: "format"))
    var mergeOutputFormat: String?

    @Flag(
        name: .customLong("audio-multistreams"),
        help: "Merge every selected audio track into the file (yt-dlp's option); by default the first one, the others stay files of their own.")
    var audioMultistreams = false

    /// `--merge-output-format`, checked.
    package var format: MergeOutputFormat? {
        mergeOutputFormat.flatMap { MergeOutputFormat(rawValue: $0.lowercased()) }
    }

    /// The policy these options ask for; `nil` with `--no-merge`.
    package var policy: MergePolicy? {
        noMerge ? nil : MergePolicy(outputFormat: format, audioMultistreams: audioMultistreams)
    }

    package func validate() throws {
        if let mergeOutputFormat, format == nil {
            let names = MergeOutputFormat.allCases.map(\.rawValue).joined(separator: ", ")
            throw ValidationError("--merge-output-format takes one of \(names), not \"\(mergeOutputFormat)\"")
        }
    }
}

/// What merging did for one task.
struct MergeOutcome: Sendable {
    var result: MergeResult?
    var failed: Bool
    var interrupted = false
}

/// What the merges of a run did, from the manager's ``DownloadEvent/taskMerge(_:_:)`` events:
/// each completed task whose outputs are a video and its audio, or the ordered parts of one
/// video, became one file, or kept its files (ffmpeg failed, was interrupted, or is missing),
/// and the user is told so: a failure on standard error with the option that skips merging, a
/// missing ffmpeg in one warning at the end.
final class MergeTracker: Sendable {
    private struct State {
        var outcomes: [DownloadTaskID: MergeOutcome] = [:]
        var skipped: Set<DownloadTaskID> = []
    }

    private let state = Locked(State())
    let display: Display

    init(display: Display) {
        self.display = display
    }

    /// Notes (and tells) a merge event; other events are ignored.
    func record(_ event: DownloadEvent) {
        guard case .taskMerge(let info, let status) = event else { return }
        let title = Terminal.clean(info.title)
        switch status {
        case .started(let plan):
            if display.mode == .live || display.mode == .lines {
                let name = Terminal.clean((plan.output as NSString).lastPathComponent)
                display.permanent("Merging \(Display.count(plan.inputs.count, "file")) of \(title) into \(name)")
            }
        case .merged(let result):
            state.withLock { $0.outcomes[info.id] = MergeOutcome(result: result, failed: false) }
        case .failed(let error) where error == .cancelled:
            display.standardError("tessera: merging \(title) was interrupted; its files are kept (the same command merges them)")
            state.withLock { $0.outcomes[info.id] = MergeOutcome(result: nil, failed: true, interrupted: true) }
        case .failed(let error):
            display.standardError(
                "tessera: could not merge \(title): \(Terminal.clean(error.message)); its files are kept (--no-merge skips merging)")
            state.withLock { $0.outcomes[info.id] = MergeOutcome(result: nil, failed: true) }
        case .skipped:
            state.withLock { _ = $0.skipped.insert(info.id) }
        }
    }

    /// Each task's outcome.
    var outcomes: [DownloadTaskID: MergeOutcome] { state.withLock { $0.outcomes } }

    /// Whether a merge failed (not interrupted).
    var anyFailed: Bool { state.withLock { $0.outcomes.values.contains { $0.failed && !$0.interrupted } } }

    /// Whether a merge was interrupted.
    var anyInterrupted: Bool { state.withLock { $0.outcomes.values.contains(where: \.interrupted) } }

    /// The one warning for the merges that ffmpeg's absence skipped.
    func warnAboutSkipped() {
        let count = state.withLock { $0.skipped.count }
        guard count > 0, display.mode != .quiet else { return }
        display.standardError(
            "tessera: warning: ffmpeg was not found on PATH, so \(Display.count(count, "download")) stay as separate files; install it (apt-get install ffmpeg) to get one file, or pass --no-merge")
    }
}
