import Foundation

/// A few threads of its own for file work that blocks: hashing, decrypting, copying, renaming,
/// free-space checks, journal commits. Swift's cooperative pool (one thread per core) and the
/// manager's actor never wait on a disk.
///
/// Jobs run in the order they are submitted, `threads` at a time. ``shutdown()`` lets the
/// queued jobs finish, then ends the threads.
final class BlockingExecutor: Sendable {
    private struct State {
        var jobs = FIFO<@Sendable () -> Void>()
        var shuttingDown = false
        var running = 0
        var exitWaiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Locked(State())
    private let condition = NSCondition()
    let threads: Int

    /// Starts `threads` threads named `name`.
    init(threads: Int = 2, name: String = "tessera-io") {
        self.threads = max(1, threads)
        state.withLock { $0.running = self.threads }
        for index in 0..<self.threads {
            let thread = Thread { [self] in work() }
            thread.name = "\(name)-\(index)"
            thread.stackSize = 1 << 20
            thread.start()
        }
    }

    /// Runs `body` on one of the executor's threads and returns its result.
    func run<T: Sendable>(_ body: @escaping @Sendable () throws(DownloadError) -> T) async throws(DownloadError) -> T {
        let result: Result<T, DownloadError> = await withCheckedContinuation { continuation in
            submit {
                do throws(DownloadError) {
                    continuation.resume(returning: .success(try body()))
                } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
        }
        return try result.get()
    }

    /// Runs `body` on one of the executor's threads.
    func run<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            submit { continuation.resume(returning: body()) }
        }
    }

    /// Queues `job` without waiting for it.
    func submit(_ job: @escaping @Sendable () -> Void) {
        let accepted = state.withLock { state -> Bool in
            guard !state.shuttingDown else { return false }
            state.jobs.append(job)
            return true
        }
        guard accepted else {
            // After shutdown, jobs still run, on the caller's thread: none is ever lost.
            job()
            return
        }
        condition.lock()
        condition.signal()
        condition.unlock()
    }

    /// Finishes the queued jobs, then ends the threads; returns once they have ended.
    func shutdown() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = state.withLock { state -> Bool in
                state.shuttingDown = true
                if state.running == 0 { return true }
                state.exitWaiters.append(continuation)
                return false
            }
            condition.lock()
            condition.broadcast()
            condition.unlock()
            if done { continuation.resume() }
        }
    }

    private func work() {
        while true {
            condition.lock()
            var job: (@Sendable () -> Void)?
            var exiting = false
            while true {
                (job, exiting) = state.withLock { state in (state.jobs.popFirst(), state.shuttingDown) }
                if job != nil || exiting { break }
                condition.wait()
            }
            condition.unlock()
            if let job {
                job()
                continue
            }
            let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
                state.running -= 1
                guard state.running == 0 else { return [] }
                defer { state.exitWaiters.removeAll() }
                return state.exitWaiters
            }
            for waiter in waiters { waiter.resume() }
            return
        }
    }
}
