import Synchronization

/// A counting semaphore for async code: at most `limit` holders; waiters are served in order,
/// and a cancelled waiter leaves the line at once.
final class AsyncSemaphore: Sendable {
    /// One call to ``acquire()``. Its fields are only touched under the semaphore's lock.
    private final class Waiter: @unchecked Sendable {
        var continuation: CheckedContinuation<Void, any Error>?
        var cancelled = false
    }

    private struct State {
        var available: Int
        let limit: Int
        var waiters: [Waiter] = []
    }

    private let state: Mutex<State>

    init(limit: Int) {
        state = Mutex(State(available: max(1, limit), limit: max(1, limit)))
    }

    /// The holders now.
    var inUse: Int { state.withLock { $0.limit - $0.available } }

    /// Waits for a permit; throws `CancellationError` if the task is cancelled first.
    func acquire() async throws {
        let waiter = Waiter()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                enum Outcome { case granted, cancelled, queued }
                let outcome = state.withLock { state -> Outcome in
                    if waiter.cancelled { return .cancelled }
                    if state.available > 0 {
                        state.available -= 1
                        return .granted
                    }
                    waiter.continuation = continuation
                    state.waiters.append(waiter)
                    return .queued
                }
                switch outcome {
                case .granted: continuation.resume()
                case .cancelled: continuation.resume(throwing: CancellationError())
                case .queued: break
                }
            }
        } onCancel: {
            let continuation = state.withLock { state -> CheckedContinuation<Void, any Error>? in
                waiter.cancelled = true
                guard let index = state.waiters.firstIndex(where: { $0 === waiter }) else { return nil }
                state.waiters.remove(at: index)
                defer { waiter.continuation = nil }
                return waiter.continuation
            }
            continuation?.resume(throwing: CancellationError())
        }
    }

    /// Returns a permit; the longest waiter gets it.
    func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, any Error>? in
            guard !state.waiters.isEmpty else {
                state.available = min(state.limit, state.available + 1)
                return nil
            }
            let waiter = state.waiters.removeFirst()
            defer { waiter.continuation = nil }
            return waiter.continuation
        }
        next?.resume()
    }
}
