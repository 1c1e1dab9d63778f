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
    /// The task running the merge was cancelled: ffmpeg was stopped.
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
        case .cancelled: return "the merge was cancelled"
        }
    }
}

extension MediaMerger {
    /// Carries `plan` out with the `ffmpeg` executable at that path: ffmpeg writes
    /// ``MergePlan/temporaryOutput``; once it has exited with status 0 and left a file that is
    /// not empty, the file is renamed to ``MergePlan/output`` (or `name.1.ext`, … when another
    /// file of that name exists: nothing but an input is replaced) and then, only then, the
    /// other inputs are deleted. An output named as one of the inputs replaces it in one rename.
    /// On any failure the temporary file (and the concat list) go and the inputs stay.
    ///
    /// ffmpeg runs without a shell, its arguments an array, with standard input closed; the
    /// wait and every file step happen on a thread of their own, never on Swift's cooperative
    /// pool. Cancelling the calling task terminates ffmpeg (``MergeError/cancelled``).
    public func run(_ plan: MergePlan, ffmpeg: String) async throws(MergeError) -> MergeResult {
        let child = ChildProcess()
        let executor = BlockingExecutor(threads: 1, name: "tessera-merge")
        let result: Result<MergeResult, MergeError> = await withTaskCancellationHandler {
            await executor.run { Self.carryOut(plan, ffmpeg: ffmpeg, child: child) }
        } onCancel: {
            child.cancel()
        }
        await executor.shutdown()
        return try result.get()
    }

    /// The blocking body of ``run(_:ffmpeg:)``.
    static func carryOut(_ plan: MergePlan, ffmpeg: String, child: ChildProcess) -> Result<MergeResult, MergeError> {
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
                        destination = SafePath.join(directory, DownloadTaskManager.numbered(lastComponent(plan.output) ?? "merged", number))
                        number += 1
                    }
                }
            } catch {
                throw .file(error)
            }
            var removed: [String] = []
            for input in plan.inputs where input != destination {
                FileOperations.remove(input)
                removed.append(input)
            }
            return .success(MergeResult(path: destination, size: size, removedInputs: removed))
        } catch {
            return .failure(error)
        }
    }
}

/// A child process that one owner starts, waits for (blocking its own thread) and may cancel
/// from another task: cancelled before it starts, it never starts; after, it is terminated.
final class ChildProcess: Sendable {
    private struct State {
        var cancelled = false
        var exited = false
        var pid: Int32?
    }

    private let state = Locked(State())

    /// The most of its standard error that is kept: the end.
    static let errorLimit = 4096

    /// How long a terminated child has to exit before it is killed.
    static let killDelay: DispatchTimeInterval = .seconds(2)

    /// Stops the child: SIGTERM, then SIGKILL if it has not exited after ``killDelay`` (ffmpeg
    /// blocked in an `open` does not act on SIGTERM).
    func cancel() {
        let pid = state.withLock { state -> Int32? in
            state.cancelled = true
            return state.exited ? nil : state.pid
        }
        guard let pid else { return }
        kill(pid, SIGTERM)
        DispatchQueue.global().asyncAfter(deadline: .now() + Self.killDelay) { [self] in
            // (Not once the owner has seen the child exit: its pid may be reused.)
            state.withLock { state in if !state.exited { kill(pid, SIGKILL) } }
        }
    }

    /// Runs `executable` with `arguments` to its end; throws unless it exits with status 0.
    /// Blocks the calling thread.
    func run(_ executable: String, arguments: [String]) throws(MergeError) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        let errors = Pipe()
        process.standardError = errors
        let started: Result<Void, MergeError> = state.withLock { state in
            guard !state.cancelled else { return .failure(.cancelled) }
            do {
                try process.run()
            } catch {
                return .failure(.ffmpegNotStarted(error.localizedDescription))
            }
            state.pid = process.processIdentifier
            return .success(())
        }
        try started.get()
        // Read to the end (ffmpeg's exit closes it), keeping the last few KiB.
        var tail = Data()
        let reader = errors.fileHandleForReading
        while true {
            let chunk = reader.availableData
            if chunk.isEmpty { break }
            tail.append(chunk)
            if tail.count > Self.errorLimit { tail = tail.suffix(Self.errorLimit) }
        }
        try? reader.close()
        process.waitUntilExit()
        // From here a late SIGKILL is not sent (the pid may be another process's soon).
        let cancelled = state.withLock { state in
            state.exited = true
            return state.cancelled
        }
        if cancelled { throw .cancelled }
        guard process.terminationReason == .exit, process.terminationStatus == 0 else {
            throw .ffmpegFailed(status: process.terminationStatus, message: String(decoding: tail, as: UTF8.self))
        }
    }
}
