import Synchronization

/// The manager's segment transfer slots, shared fairly between tasks.
///
/// At most `limit` transfers hold a slot. Tasks that are running ``join(_:)`` the semaphore; a
/// task may hold at most `limit - (running tasks - 1)` slots, so a task that starts while
/// another fills every slot with long pieces still gets one as soon as one frees, and one
/// that joins later gets one at the first release. A released slot goes to the waiter whose task
/// holds the fewest, the longest waiting first among equals. A cancelled waiter leaves the line
/// at once.
final class AsyncSemaphore: Sendable {
    /// One call to ``acquire(for:)``. Its fields are only touched under the semaphore's lock.
    private final class Waiter: @unchecked Sendable {
        let owner: DownloadTaskID
        var continuation: CheckedContinuation<Void, any Error>?
        var cancelled = false

        init(owner: DownloadTaskID) { self.owner = owner }
    }

    private struct State {
        let limit: Int
        var inUse = 0
        var peak = 0
        var held: [DownloadTaskID: Int] = [:]
        /// Tasks that joined, with how many times (a task joins once per run).
        var members: [DownloadTaskID: Int] = [:]
        var waiters: [Waiter] = []

        /// The most one task may hold now.
        var share: Int { max(1, limit - max(0, members.count - 1)) }

        func mayTake(_ owner: DownloadTaskID) -> Bool {
            inUse < limit && held[owner, default: 0] < share
        }

        mutating func take(_ owner: DownloadTaskID) {
            inUse += 1
            peak = max(peak, inUse)
            held[owner, default: 0] += 1
        }

        /// Removes and returns the waiters that may take a slot now, fairest first.
        mutating func grantable() -> [CheckedContinuation<Void, any Error>] {
            var granted: [CheckedContinuation<Void, any Error>] = []
            while inUse < limit {
                var best: Int?
                for (index, waiter) in waiters.enumerated() where mayTake(waiter.owner) {
                    if let current = best, held[waiters[current].owner, default: 0] <= held[waiter.owner, default: 0] { continue }
                    best = index
                }
                guard let index = best else { break }
                let waiter = waiters.remove(at: index)
                take(waiter.owner)
                if let continuation = waiter.continuation { granted.append(continuation) }
                waiter.continuation = nil
            }
            return granted
        }
    }

    private let state: Mutex<State>

    init(limit: Int) {
        state = Mutex(State(limit: max(1, limit)))
    }

    /// The holders now.
    var inUse: Int { state.withLock { $0.inUse } }

    /// The most holders there ever were at once.
    var peakInUse: Int { state.withLock { $0.peak } }

    /// The slots `owner` holds now.
    func held(by owner: DownloadTaskID) -> Int { state.withLock { $0.held[owner, default: 0] } }

    /// A task starts running: it counts for the fair share from now on.
    func join(_ owner: DownloadTaskID) {
        state.withLock { $0.members[owner, default: 0] += 1 }
    }

    /// A task's run ended: the others' share grows, and waiters it held back may go.
    func leave(_ owner: DownloadTaskID) {
        let granted = state.withLock { state -> [CheckedContinuation<Void, any Error>] in
            if let count = state.members[owner] { state.members[owner] = count > 1 ? count - 1 : nil }
            return state.grantable()
        }
        for continuation in granted { continuation.resume() }
    }

    /// Waits for a slot for `owner`; throws `CancellationError` if the task is cancelled first.
    func acquire(for owner: DownloadTaskID) async throws {
        let waiter = Waiter(owner: owner)
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                enum Outcome { case granted, cancelled, queued }
                let outcome = state.withLock { state -> Outcome in
                    if waiter.cancelled { return .cancelled }
                    // Nobody waiting who should go first: take it at once.
                    if state.mayTake(owner), !state.waiters.contains(where: { state.mayTake($0.owner) && state.held[$0.owner, default: 0] <= state.held[owner, default: 0] }) {
                        state.take(owner)
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

    /// Returns `owner`'s slot; the fairest waiter gets it.
    func release(for owner: DownloadTaskID) {
        let granted = state.withLock { state -> [CheckedContinuation<Void, any Error>] in
            state.inUse = max(0, state.inUse - 1)
            if let count = state.held[owner] { state.held[owner] = count > 1 ? count - 1 : nil }
            return state.grantable()
        }
        for continuation in granted { continuation.resume() }
    }
}
