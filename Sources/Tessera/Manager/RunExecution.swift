/// How a run executes, as its manager holds it: in a task of its own, or (a small plain file,
/// see ``TaskRun/startDirectly(host:)``) first as one transfer the engine runs, with a task only
/// once the run needs one. Either way the manager stops it with ``cancel()`` and waits for its end
/// with ``wait()``; the task, when there is one, is made here and owned here.
final class RunExecution: Sendable {
    private struct State {
        var task: Task<Void, Never>?
        /// The transfer a run without a task has running.
        var transfer: TransferHandle?
        var cancelled = false
        /// The run ended without a task.
        var ended = false
        var waiters: [CheckedContinuation<Task<Void, Never>?, Never>] = []
    }

    private let state = Locked(State())
    private let engine: CurlEngine

    /// An execution whose transfers run on `engine`; the run goes on in a task once
    /// ``continueInTask(_:)`` says so.
    init(engine: CurlEngine) {
        self.engine = engine
    }

    /// Stops the run: its task is cancelled; a transfer running without one is cancelled (its end
    /// hands the run to a task, cancelled from its start, that winds it down).
    func cancel() {
        let (task, transfer) = state.withLock { state -> (Task<Void, Never>?, TransferHandle?) in
            state.cancelled = true
            return (state.task, state.task == nil ? state.transfer : nil)
        }
        task?.cancel()
        if let transfer { engine.cancel(transfer) }
    }

    /// The run without a task started `transfer`; `false` (and the caller cancels it) when the run
    /// was stopped meanwhile.
    func started(_ transfer: TransferHandle) -> Bool {
        state.withLock { state in
            guard !state.cancelled else { return false }
            state.transfer = transfer
            return true
        }
    }

    /// The run goes on in a task of its own running `body` (cancelled at once when the run was
    /// stopped).
    func continueInTask(_ body: @escaping @Sendable () async -> Void) {
        let task = Task { await body() }
        let (waiters, cancelled) = state.withLock { state in
            state.task = task
            state.transfer = nil
            defer { state.waiters = [] }
            return (state.waiters, state.cancelled)
        }
        if cancelled { task.cancel() }
        for waiter in waiters { waiter.resume(returning: task) }
    }

    /// The run ended without a task.
    func ended() {
        let waiters = state.withLock { state in
            state.ended = true
            state.transfer = nil
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: nil) }
    }

    /// Returns once the run has ended (its task too, when it has one).
    func wait() async {
        let task: Task<Void, Never>? = await withCheckedContinuation { continuation in
            let now = state.withLock { state -> (Bool, Task<Void, Never>?) in
                if let task = state.task { return (true, task) }
                if state.ended { return (true, nil) }
                state.waiters.append(continuation)
                return (false, nil)
            }
            if now.0 { continuation.resume(returning: now.1) }
        }
        await task?.value
    }
}
