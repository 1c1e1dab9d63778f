import Foundation

/// What a merge produced.
public struct MergeResult: Sendable, Hashable {
    /// The merged file.
    public var path: String
    /// Its size in bytes.
    public var size: Int64
    /// The inputs that were deleted once the merged file was in place.
    public var removedInputs: [String]
}

/// Why a merge did not happen. The inputs are kept in every case.
public enum MergeError: Error, Sendable, Equatable {
    /// ffmpeg exited with `status` (or was killed by a signal); `message` is the end of what it
    /// wrote on standard error (at most 4 KiB), as it wrote it: untrusted text.
    case ffmpegFailed(status: Int32, message: String)
    /// ffmpeg could not be started.
    case ffmpegNotStarted(String)
    /// ffmpeg succeeded but left no file, or an empty one.
    case emptyOutput
    /// A file step (the concat list, the rename) failed.
    case file(DownloadError)
    /// The task running the merge was cancelled (an interruption: Ctrl-C, a shutdown, the task
    /// removed): ffmpeg was stopped.
    case cancelled

    /// One sentence naming the cause.
    public var message: String {
        switch self {
        case .ffmpegFailed(let status, let message):
            let text = message.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
                .suffix(3).joined(separator: "; ")
            return "ffmpeg failed (exit status \(status))" + (text.isEmpty ? "" : ": " + text)
        case .ffmpegNotStarted(let why): return "ffmpeg could not be started: \(why)"
        case .emptyOutput: return "ffmpeg left no merged file"
        case .file(let error): return error.message
        case .cancelled: return "the merge was interrupted"
        }
    }
}

extension MediaMerger {
    /// Carries `plan` out with the `ffmpeg` executable at that path: ffmpeg writes
    /// ``MergePlan/temporaryOutput``; once it has exited with status 0 and left a file that is
    /// not empty, the file is renamed to ``MergePlan/output`` (or `name.1.ext`, … when another
    /// file of that name exists: nothing but an input is replaced); `beforeRemovingInputs` is
    /// called with the merged file and its size (to record it, say), and only then are the other
    /// inputs deleted. An output named as one of the inputs replaces it in one rename. On any
    /// failure the temporary file (and the concat list) go and the inputs stay.
    ///
    /// A merged file already at ``MergePlan/output``, not empty and written after every input,
    /// is taken as this merge done before (a process killed after the rename, before it deleted
    /// the inputs): ffmpeg does not run again, and no second, numbered copy is made.
    ///
    /// ffmpeg runs without a shell, its arguments an array, with standard input closed; the
    /// wait and every file step happen on a thread of their own, never on Swift's cooperative
    /// pool. ffmpeg runs in a process group of its own, so a terminal's Ctrl-C does not reach it:
    /// cancelling the calling task terminates it (``MergeError/cancelled``).
    public func run(
        _ plan: MergePlan, ffmpeg: String, beforeRemovingInputs: (@Sendable (_ path: String, _ size: Int64) async -> Void)? = nil
    ) async throws(MergeError) -> MergeResult {
        try await run(plan, ffmpeg: ffmpeg, fence: nil, beforeRemovingInputs: beforeRemovingInputs)
    }

    /// ``run(_:ffmpeg:beforeRemovingInputs:)`` under a `fence` (a fleet's lease, see
    /// ``MergeFence``): the temporary files are named by the fence's epoch, the merged file is
    /// moved into place only when the fence permits it (otherwise ``MergeError/cancelled``: this
    /// process no longer holds the task, and the one that does merges), the temporary files that
    /// earlier holders left go after the move, and the inputs are deleted only when the fence
    /// still permitted it once the merged file was in place.
    package func run(
        _ plan: MergePlan, ffmpeg: String, fence: MergeFence?,
        beforeRemovingInputs: (@Sendable (_ path: String, _ size: Int64) async -> Void)? = nil
    ) async throws(MergeError) -> MergeResult {
        var plan = plan
        plan.temporaryEpoch = fence?.epoch
        let child = ChildProcess()
        let executor = BlockingExecutor(threads: 1, name: "tessera-merge")
        let produced: Result<(path: String, size: Int64), MergeError> = await withTaskCancellationHandler { [plan] in
            await executor.run { Self.produce(plan, ffmpeg: ffmpeg, child: child, fence: fence) }
        } onCancel: {
            child.cancel()
        }
        let path: String, size: Int64
        switch produced {
        case .success(let merged): (path, size) = merged
        case .failure(let error):
            await executor.shutdown()
            throw error
        }
        CrashPoint.merged.reach()
        // Asked before the record: once a fleet's worker has recorded the merge the task is
        // completed and no longer held, and its inputs are still this merge's to delete. Lost
        // meanwhile: the next holder finds the merged file and finishes.
        if let fence, await !executor.run({ fence.permits() }) {
            await executor.shutdown()
            throw .cancelled
        }
        await beforeRemovingInputs?(path, size)
        let removed = await executor.run { [plan] () -> [String] in
            var removed: [String] = []
            for input in plan.inputs where input != path {
                FileOperations.remove(input)
                removed.append(input)
            }
            return removed
        }
        await executor.shutdown()
        return MergeResult(path: path, size: size, removedInputs: removed)
    }

    /// The blocking part of ``run(_:ffmpeg:beforeRemovingInputs:)``: the merged file in its place.
    static func produce(
        _ plan: MergePlan, ffmpeg: String, child: ChildProcess, fence: MergeFence? = nil
    ) -> Result<(path: String, size: Int64), MergeError> {
        if let size = mergedBefore(plan) {
            removeEarlierTemporaries(plan)
            return .success((plan.output, size))
        }
        let temporary = plan.temporaryOutput
        let list = plan.concatListPath
        defer {
            FileOperations.remove(temporary)
            if plan.method == .concatenate { FileOperations.remove(list) }
        }
        do throws(MergeError) {
            if plan.method == .concatenate {
                let cwd = FileManager.default.currentDirectoryPath
                let absolute = plan.inputs.map { $0.hasPrefix("/") ? $0 : SafePath.join(cwd, $0) }
                do throws(DownloadError) {
                    try FileOperations.createEmpty(list)
                    try FileOperations.write(Array(concatList(absolute).utf8), to: list, at: 0)
                } catch {
                    throw .file(error)
                }
            }
            try child.run(ffmpeg, arguments: plan.ffmpegArguments)
            guard let size = FileOperations.size(temporary), size > 0 else { throw .emptyOutput }
            CrashPoint.mergeWritten.reach()
            // Another process may hold the task now (a fleet's lease): its merge is the one that counts.
            if let fence, !fence.permits() { throw .cancelled }
            var destination = plan.output
            var number = 1
            do throws(DownloadError) {
                if plan.inputs.contains(destination) {
                    // The merged file takes the place of the input it was made from (one rename,
                    // atomic: there is never a moment without one or the other).
                    try FileOperations.rename(temporary, to: destination)
                } else {
                    while try !FileOperations.moveWithoutReplacing(temporary, to: destination) {
                        let directory = MediaMerger.directory(of: plan.output)
                        destination = SafePath.join(directory, OutputClaims.numbered(lastComponent(plan.output) ?? "merged", number))
                        number += 1
                    }
                }
            } catch {
                throw .file(error)
            }
            removeEarlierTemporaries(plan)
            return .success((destination, size))
        } catch {
            return .failure(error)
        }
    }

    /// The size of a file at the plan's output that this merge made before: not an input, not
    /// empty, and modified no earlier than every input still there (another video's file of the
    /// same name is older than these inputs, and gets a numbered neighbour instead; an input gone
    /// was deleted by the merge that made the file, which stopped before recording it).
    static func mergedBefore(_ plan: MergePlan) -> Int64? {
        guard !plan.inputs.contains(plan.output), let output = modification(plan.output), output.size > 0 else { return nil }
        var anyInput = false
        for input in plan.inputs {
            guard let time = modification(input)?.time else { continue }
            guard time <= output.time else { return nil }
            anyInput = true
        }
        // (Every input gone: only a merge under a fence, whose deletions follow its fenced move,
        // vouches for the file.)
        guard anyInput || plan.temporaryEpoch != nil else { return nil }
        return output.size
    }

    /// Deletes the temporary files of earlier epochs of the plan's merge (a holder killed while
    /// its ffmpeg ran left them; one frozen since has its open file deleted under it, harmlessly).
    static func removeEarlierTemporaries(_ plan: MergePlan) {
        guard let epoch = plan.temporaryEpoch else { return }
        let directory = MediaMerger.directory(of: plan.output)
        let prefix = plan.temporaryPrefix + ".e"
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory.isEmpty ? "." : directory) else { return }
        for name in names where name.hasPrefix(prefix) && (name.hasSuffix(".merging") || name.hasSuffix(".concat")) {
            let digits = name.dropFirst(prefix.count).prefix { $0.isNumber }
            guard let earlier = UInt64(digits), earlier < epoch else { continue }
            FileOperations.remove(SafePath.join(directory, name))
        }
    }

    private static func modification(_ path: String) -> (time: Int128, size: Int64)? {
        var information = stat()
        guard stat(path, &information) == 0, (information.st_mode & S_IFMT) == S_IFREG else { return nil }
        let time = Int128(information.st_mtim.tv_sec) * 1_000_000_000 + Int128(information.st_mtim.tv_nsec)
        return (time, Int64(information.st_size))
    }
}

/// What a merge asks before it touches a task's files under a shared root (a fleet's lease, see
/// ``TaskWriteFence``): the epoch that names its temporary files, and whether it may still move
/// the merged file into place and delete the inputs.
package struct MergeFence: Sendable {
    /// The holder's epoch, which names the temporary files (``MergePlan/temporaryEpoch``).
    package var epoch: UInt64?
    /// Whether the task's files may be written now. Blocks the calling thread (never the
    /// cooperative pool) while a short freeze waits for a renewed lease.
    package var permits: @Sendable () -> Bool

    /// A fence of one's own (a test's).
    package init(epoch: UInt64?, permits: @escaping @Sendable () -> Bool) {
        self.epoch = epoch
        self.permits = permits
    }

    /// Task `id`'s merge under `fence` (`nil` without one): the holding it has now; once the
    /// task is let go, or held again under another epoch, nothing more is permitted.
    init?(_ fence: (any TaskWriteFence)?, task id: DownloadTaskID) {
        guard let fence else { return nil }
        let epoch = fence.journalEpoch(of: id)
        self.init(epoch: epoch) { fence.awaitWritePermission(for: id) && fence.journalEpoch(of: id) == epoch }
    }
}

/// A child process that one owner starts, waits for (blocking its own thread) and may cancel
/// from another task: cancelled before it starts, it never starts; after, it is terminated.
final class ChildProcess: Sendable {
    private struct State {
        var cancelled = false
        var process: SpawnedProcess?
    }

    private let state = Locked(State())

    /// The most of its standard error that is kept: the end.
    static let errorLimit = 4096

    /// How long a terminated child has to exit before it is killed.
    static let killDelay: DispatchTimeInterval = .seconds(2)

    /// Stops the child (its process group): SIGTERM, then SIGKILL if it has not exited after
    /// ``killDelay`` (ffmpeg blocked in an `open` does not act on SIGTERM). No signal goes once
    /// it is reaped.
    func cancel() {
        let process = state.withLock { state -> SpawnedProcess? in
            state.cancelled = true
            return state.process
        }
        guard let process else { return }
        process.terminate()
        DispatchQueue.global().asyncAfter(deadline: .now() + Self.killDelay) {
            process.send(SIGKILL)
        }
    }

    /// Runs `executable` with `arguments` to its end; throws unless it exits with status 0.
    /// Blocks the calling thread.
    func run(_ executable: String, arguments: [String]) throws(MergeError) {
        let errors: (read: Int32, write: Int32)
        do {
            errors = try SpawnedProcess.pipe()
        } catch {
            throw .ffmpegNotStarted(error.localizedDescription)
        }
        let started: Result<SpawnedProcess, MergeError> = state.withLock { state in
            defer { close(errors.write) }
            guard !state.cancelled else { return .failure(.cancelled) }
            do {
                // In a process group of its own: a Ctrl-C at the terminal reaches the program
                // that started it, which stops it (``cancel()``) and knows it was interrupted;
                // ffmpeg on its own would die of it and look failed.
                let process = try SpawnedProcess(
                    executable, arguments, input: .null, output: .null, error: .descriptor(errors.write),
                    newProcessGroup: true)
                state.process = process
                return .success(process)
            } catch {
                return .failure(.ffmpegNotStarted(error.localizedDescription))
            }
        }
        let process: SpawnedProcess
        do {
            process = try started.get()
        } catch {
            close(errors.read)
            throw error
        }
        // Read to the end (ffmpeg's exit closes it), keeping the last few KiB.
        var tail: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(errors.read, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            tail.append(contentsOf: buffer[..<count])
            if tail.count > Self.errorLimit { tail.removeFirst(tail.count - Self.errorLimit) }
        }
        close(errors.read)
        let termination = process.waitUntilExit()
        if state.withLock({ $0.cancelled }) { throw .cancelled }
        guard termination == .exited(0) else {
            throw .ffmpegFailed(status: termination.status, message: String(decoding: tail, as: UTF8.self))
        }
    }
}
