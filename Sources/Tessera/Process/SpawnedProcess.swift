import CTesseraSystem
import Foundation

/// A child process started with `posix_spawn`: the package's one way to run a program (ffmpeg
/// for merges; the CLI, helpers and tools in tests).
///
/// Not Foundation's `Process`: under AddressSanitizer its scan of `/proc/self/fd` reads past a
/// heap buffer, and it was the suspect of crashes when tests started processes beside others.
/// Here the child gets its three standard streams as asked and no other descriptor of the parent
/// (closed in the child, whatever their close-on-exec flag), its signals back to their defaults
/// and none blocked. There is no shell: arguments go as they are.
///
/// The owner reaps the child: ``waitUntilExit()`` (blocking; call it off the cooperative pool)
/// or ``exited(within:)``. Signals are not sent once the child is known to be reaped, when its
/// pid could be another process's.
package final class SpawnedProcess: @unchecked Sendable {
    /// Where a standard stream of the child goes or comes from.
    package enum Stream: Sendable {
        /// `/dev/null`.
        case null
        /// The parent's own.
        case inherit
        /// A descriptor of the parent (it stays open in the parent; close it after the launch).
        case descriptor(Int32)
    }

    /// How the child ended.
    package enum Termination: Sendable, Equatable {
        /// It exited with this status.
        case exited(Int32)
        /// A signal ended it.
        case signalled(Int32)

        /// The exit status, or 128 + the signal's number (as a shell reports it).
        package var status: Int32 {
            switch self {
            case .exited(let status): status
            case .signalled(let signal): 128 + signal
            }
        }
    }

    /// The child's process id.
    package let pid: pid_t
    /// Whether the child leads a process group of its own: signals go to the whole group.
    package let leadsProcessGroup: Bool
    private let ended = Locked<Termination?>(nil)

    /// Starts `executable` (a path; a bare name is looked up on `PATH`) with `arguments`.
    ///
    /// - Parameters:
    ///   - environment: The child's whole environment; `nil` for the parent's.
    ///   - directory: Its working directory; `nil` for the parent's.
    ///   - newProcessGroup: Starts it in a process group of its own (its pid), as a shell starts
    ///     a job: the signals a terminal sends its foreground group (Ctrl-C, SIGQUIT) do not reach
    ///     it, its owner stops it (``send(_:)`` signals the whole group, what it started too).
    /// - Throws: `POSIXError` when it cannot be started (no such file, not executable …).
    package init(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil, directory: String? = nil,
        input: Stream = .null, output: Stream = .inherit, error: Stream = .inherit, newProcessGroup: Bool = false
    ) throws {
        let path = executable.contains("/") ? executable : (Self.find(executable) ?? executable)
        let environment = environment ?? ProcessInfo.processInfo.environment
        let argv = ([path] + arguments).map { strdup($0) }
        let envp = environment.map { strdup("\($0.key)=\($0.value)") }
        defer { (argv + envp).forEach { free($0) } }
        func code(_ stream: Stream) -> Int32 {
            switch stream {
            case .null: -1
            case .inherit: -2
            case .descriptor(let descriptor): descriptor
            }
        }
        var pid: pid_t = 0
        let result = (argv + [nil]).withUnsafeBufferPointer { argvBuffer in
            (envp + [nil]).withUnsafeBufferPointer { envpBuffer in
                tessera_spawn(
                    path, argvBuffer.baseAddress, envpBuffer.baseAddress, code(input), code(output), code(error), directory,
                    newProcessGroup ? 1 : 0, &pid)
            }
        }
        guard result == 0 else { throw POSIXError(POSIXErrorCode(rawValue: result) ?? .EIO) }
        self.pid = pid
        leadsProcessGroup = newProcessGroup
    }

    /// The first executable file called `name` in a directory of `PATH`.
    package static func find(_ name: String, path: String? = ProcessInfo.processInfo.environment["PATH"]) -> String? {
        for directory in (path ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":") where !directory.isEmpty {
            let candidate = "\(directory)/\(name)"
            if access(candidate, X_OK) == 0 { return candidate }
        }
        return nil
    }

    /// A pipe whose ends are closed on exec: give the child one end with ``Stream/descriptor(_:)``
    /// (the spawn hands it over) and close that end in the parent after the launch.
    package static func pipe() throws -> (read: Int32, write: Int32) {
        var ends: [Int32] = [0, 0]
        guard tessera_pipe_cloexec(&ends) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        return (ends[0], ends[1])
    }

    /// Sends `signal` unless the child is already reaped (to its whole group when it leads one:
    /// while the leader is not reaped, the group's id is still its own).
    package func send(_ signal: Int32) {
        ended.withLock { ended in if ended == nil { _ = kill(leadsProcessGroup ? -pid : pid, signal) } }
    }

    /// SIGTERM.
    package func terminate() { send(SIGTERM) }

    /// SIGINT.
    package func interrupt() { send(SIGINT) }

    /// How it ended, if it has (reaping it when it just did); never blocks.
    package var termination: Termination? { reap(blocking: false) }

    /// Waits for the child to end, blocking the calling thread.
    @discardableResult
    package func waitUntilExit() -> Termination {
        while true {
            if let termination = reap(blocking: true) { return termination }
        }
    }

    /// Waits for the child to end on a thread of its own; the caller's task holds no thread of
    /// the cooperative pool meanwhile.
    package func ended() async -> Termination {
        if let termination { return termination }
        return await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: self.waitUntilExit()) }.start()
        }
    }

    /// Whether the child ended within `limit` (checked every 10 ms, without blocking a thread);
    /// a cancelled caller stops waiting at once (its cancellation is not the limit reached).
    package func exited(within limit: Duration) async -> Bool {
        let deadline = ContinuousClock.now + limit
        while termination == nil {
            guard ContinuousClock.now < deadline, (try? await Task.sleep(for: .milliseconds(10))) != nil else {
                return termination != nil
            }
        }
        return true
    }

    /// What ``capture(_:_:environment:mergingErrors:timeout:)`` collected.
    package struct Captured: Sendable {
        /// How the child ended; `nil` when it was terminated at the timeout.
        package var termination: Termination?
        /// Its standard output (with its standard error when they were merged).
        package var output: [UInt8]
        /// Its standard error, when not merged.
        package var errors: [UInt8]
    }

    /// Runs `executable` to its end with standard input from `/dev/null`, collecting what it
    /// writes (both pipes are read as they fill, so neither blocks the child). After `timeout`
    /// it is sent SIGTERM, then SIGKILL 2 s later, and ``Captured/termination`` is `nil`.
    /// Blocks the calling thread: call it from a thread of its own or a `BlockingExecutor`.
    package static func capture(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil, mergingErrors: Bool = false,
        timeout: Duration? = nil
    ) throws -> Captured {
        let output = try pipe()
        let errors = mergingErrors ? nil : try pipe()
        let process: SpawnedProcess
        do {
            defer {
                close(output.write)
                if let errors { close(errors.write) }
            }
            process = try SpawnedProcess(
                executable, arguments, environment: environment, input: .null, output: .descriptor(output.write),
                error: .descriptor(errors?.write ?? output.write))
        } catch {
            close(output.read)
            if let errors { close(errors.read) }
            throw error
        }
        var collected: [[UInt8]] = [[], []]
        var open = [output.read, errors?.read ?? -1]
        let deadline = timeout.map { ContinuousClock.now + $0 }
        var killAt: ContinuousClock.Instant?
        var killed = false
        var timedOut = false
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while open.contains(where: { $0 >= 0 }) {
            var descriptors = open.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            let wait = (killAt ?? deadline).map { max(0, Int32(($0 - .now) / .milliseconds(1))) } ?? -1
            let ready = poll(&descriptors, nfds_t(descriptors.count), wait)
            if ready < 0, errno == EINTR { continue }
            if ready == 0 {
                if killAt == nil {
                    timedOut = true
                    process.terminate()
                    killAt = .now + .seconds(2)
                } else if !killed {
                    process.send(SIGKILL)
                    killed = true
                    killAt = .now + .seconds(1)
                } else {
                    break  // Killed, and something it started still holds the pipes: stop reading.
                }
                continue
            }
            for index in descriptors.indices where descriptors[index].fd >= 0 && descriptors[index].revents != 0 {
                let count = buffer.withUnsafeMutableBytes { read(descriptors[index].fd, $0.baseAddress, $0.count) }
                if count < 0, errno == EINTR || errno == EAGAIN { continue }
                if count <= 0 {
                    close(descriptors[index].fd)
                    open[index] = -1
                } else {
                    collected[index].append(contentsOf: buffer[..<count])
                }
            }
        }
        for descriptor in open where descriptor >= 0 { close(descriptor) }
        let termination = process.waitUntilExit()
        return Captured(termination: timedOut ? nil : termination, output: collected[0], errors: collected[1])
    }

    /// Reaps the child under the lock, so that no signal goes to a pid reaped meanwhile. A
    /// blocking call first waits, without the lock and without reaping (`WNOWAIT`), until the
    /// child has ended: until it is reaped its pid stays its own.
    private func reap(blocking: Bool) -> Termination? {
        if blocking {
            var info = siginfo_t()
            while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) != 0, errno == EINTR {}
        }
        return ended.withLock { ended in
            if let ended { return ended }
            var status: Int32 = 0
            var reaped: pid_t
            repeat { reaped = waitpid(pid, &status, WNOHANG) } while reaped < 0 && errno == EINTR
            if reaped == pid {
                // WIFEXITED / WEXITSTATUS / WTERMSIG, which Swift does not import.
                let signal = status & 0x7F
                ended = signal == 0 ? .exited((status >> 8) & 0xFF) : .signalled(signal)
            } else if reaped < 0 {
                ended = .exited(-1)  // Not a child of ours any more (reaped elsewhere): nothing to wait for.
            }
            return ended
        }
    }
}
