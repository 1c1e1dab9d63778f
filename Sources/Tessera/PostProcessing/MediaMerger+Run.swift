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
        let child = ChildProcess()
        let executor = BlockingExecutor(threads: 1, name: "tessera-merge")
        let produced: Result<(path: String, size: Int64), MergeError> = await withTaskCancellationHandler {
            await executor.run { Self.produce(plan, ffmpeg: ffmpeg, child: child) }
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
        await beforeRemovingInputs?(path, size)
        let removed = await executor.run { () -> [String] in
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
    static func produce(_ plan: MergePlan, ffmpeg: String, child: ChildProcess) -> Result<(path: String, size: Int64), MergeError> {
        if let size = mergedBefore(plan) { return .success((plan.output, size)) }
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
            return .success((destination, size))
        } catch {
            return .failure(error)
        }
    }

    /// The size of a file at the plan's output that this merge made before: not an input, not
    /// empty, and modified no earlier than every input (another video's file of the same name
    /// is older than these inputs, and gets a numbered neighbour instead).
    static func mergedBefore(_ plan: MergePlan) -> Int64? {
        guard !plan.inputs.contains(plan.output), let output = modification(plan.output), output.size > 0 else { return nil }
        for input in plan.inputs {
            guard let time = modification(input)?.time, time <= output.time else { return nil }
        }
        return output.size
    }

    private static func modification(_ path: String) -> (time: Int128, size: Int64)? {
        var information = stat()
        guard stat(path, &information) == 0, (information.st_mode & S_IFMT) == S_IFREG else { return nil }
        let time = Int128(information.st_mtim.tv_sec) * 1_000_000_000 + Int128(information.st_mtim.tv_nsec)
        return (time, Int64(information.st_size))
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
