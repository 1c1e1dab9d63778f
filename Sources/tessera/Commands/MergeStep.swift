import ArgumentParser
import Foundation
import Tessera

/// `get`'s merging options.
struct MergeOptions: ParsableArguments {
    @Flag(name: .customLong("no-merge"), help: "Keep a video's tracks (DASH, HLS) or parts (playurl) as separate files instead of merging them with ffmpeg.")
    var noMerge = false

    @Option(
        name: .customLong("merge-output-format"),
        help: ArgumentHelp("The container of a merged file: mp4, mkv, webm or mov (default: mp4 when the codecs fit it, else mkv; parts keep their own).", valueName: "format"))
    var mergeOutputFormat: String?

    /// `--merge-output-format`, checked.
    var format: MergeOutputFormat? {
        mergeOutputFormat.flatMap { MergeOutputFormat(rawValue: $0.lowercased()) }
    }

    func validate() throws {
        if let mergeOutputFormat, format == nil {
            let names = MergeOutputFormat.allCases.map(\.rawValue).joined(separator: ", ")
            throw ValidationError("--merge-output-format takes one of \(names), not \"\(mergeOutputFormat)\"")
        }
    }
}

/// What merging did for one task.
struct MergeOutcome {
    var result: MergeResult?
    var failed: Bool
}

/// After a run: each completed task whose outputs are a video and its audio, or the ordered
/// parts of one video, becomes one file (``MediaMerger``). Without ffmpeg, one warning says how
/// to install it and the files stay as they are; a failed merge keeps them too, and says why.
struct MergeStep {
    var format: MergeOutputFormat?
    var display: Display
    var manager: DownloadTaskManager
    var environment: [String: String] = ProcessInfo.processInfo.environment

    func run(_ tasks: [DownloadTaskInfo]) async -> [DownloadTaskID: MergeOutcome] {
        let merger = MediaMerger(outputFormat: format)
        let plans = tasks.compactMap { info -> (DownloadTaskInfo, MergePlan)? in
            guard info.state == .completed, info.mode == .download else { return nil }
            let inputs = info.outputs.map { MergeInput(path: $0.path, media: $0.media) }
            return merger.plan(for: inputs, title: info.title).map { (info, $0) }
        }
        guard !plans.isEmpty else { return [:] }
        guard let ffmpeg = MediaMerger.findFFmpeg(environment: environment) else {
            if display.mode != .quiet {
                display.standardError(
                    "tessera: warning: ffmpeg was not found on PATH, so \(Display.count(plans.count, "download")) stay as separate files; install it (apt-get install ffmpeg) to get one file, or pass --no-merge")
            }
            return [:]
        }
        var outcomes: [DownloadTaskID: MergeOutcome] = [:]
        let interrupt = InterruptSignal.shared
        for (info, plan) in plans {
            if display.mode == .live || display.mode == .lines {
                display.permanent("Merging \(Display.count(plan.inputs.count, "file")) of \(info.title) into \(plan.output)")
            }
            do {
                // Ctrl-C cancels the merge: ffmpeg is stopped, the files stay.
                // The merged file stands for the task's outputs from now on, recorded before the
                // parts go: the same command again finds the task complete instead of fetching
                // the parts again.
                let manager = manager, id = info.id
                let merge: @Sendable () async throws -> MergeResult = {
                    try await merger.run(plan, ffmpeg: ffmpeg) { path, size in
                        try? await manager.recordReplacement(of: id, by: path, size: size)
                    }
                }
                guard let result = try await interrupt.unlessInterrupted(merge) else {
                    display.standardError("tessera: merging \(info.title) was interrupted; its files are kept")
                    outcomes[info.id] = MergeOutcome(result: nil, failed: true)
                    break
                }
                outcomes[info.id] = MergeOutcome(result: result, failed: false)
            } catch {
                let message = (error as? MergeError)?.message ?? describe(error)
                display.standardError("tessera: could not merge \(info.title): \(message); its files are kept")
                outcomes[info.id] = MergeOutcome(result: nil, failed: true)
            }
        }
        return outcomes
    }
}
