import Foundation

/// A few threads of its own for file work that blocks: hashing, decrypting, copying, renaming,
/// free-space checks, journal commits. Swift's cooperative pool (one thread per core) and the
/// manager's actor never wait on a disk.
///
/// Jobs run in the order they are submitted, `threads` at a time. ``shutdown()`` lets the
/// queued jobs finish, then ends the threads.
final class BlockingExecutor: @unchecked Sendable {
    private struct State {
        var jobs = FIFO<@Sendable () -> Void>()
        var shuttingDown = false
        var running = 0
        /// Threads waiting for a job: a job wakes one only when there is one (a signal to
        /// nobody, and a second lock around the queue, cost every submission a system call).
        var idle = 0
        var exitWaiters: [CheckedContinuation<Void, Never>] = []
    }

    /// Guards `state` (its lock is the condition's).
    private let condition = NSCondition()
    private var state = State()
    let threads: Int

    /// Starts `threads` threads named `name`.
    init(threads: Int = 2, name: String = "tessera-io") {
        self.threads = max(1, threads)
        state.running = self.threads
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
        condition.lock()
        guard !state.shuttingDown else {
            condition.unlock()
            // After shutdown, jobs still run, on the caller's thread: none is ever lost.
            job()
            return
        }
        state.jobs.append(job)
        let wake = state.idle > 0
        condition.unlock()
        // (A thread that is not waiting takes the job when it looks next, under the lock.)
        if wake { condition.signal() }
    }

    /// Finishes the queued jobs, then ends the threads; returns once they have ended.
    func shutdown() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            condition.lock()
            state.shuttingDown = true
            let done = state.running == 0
            if !done { state.exitWaiters.append(continuation) }
            condition.unlock()
            condition.broadcast()
            if done { continuation.resume() }
        }
    }

    private func work() {
        while true {
            condition.lock()
            var job = state.jobs.popFirst()
            while job == nil, !state.shuttingDown {
                state.idle += 1
                condition.wait()
                state.idle -= 1
                job = state.jobs.popFirst()
            }
            if let job {
                condition.unlock()
                job()
                continue
            }
            state.running -= 1
            var waiters: [CheckedContinuation<Void, Never>] = []
            if state.running == 0 { swap(&waiters, &state.exitWaiters) }
            condition.unlock()
            for waiter in waiters { waiter.resume() }
            return
        }
    }
}
