import Foundation
import Tessera

#if canImport(Glibc)
import Glibc
#endif

/// The fleet worker's ``TaskWriteFence``: a task's journal and files may be written only while
/// the worker holds the task (it claimed it, under an epoch, and has not let it go) and trusts
/// its lease (its boot-time clock is before ``FleetLeasePolicy/trustedUntil``). Journals are
/// named by the epoch, so a commit that a frozen worker makes after waking lands in a file its
/// successor copied from before it started and never reads again.
public final class FleetWriteFence: TaskWriteFence {
    private struct State {
        var trustedUntil: FleetInstant?
        var held: [DownloadTaskID: Int64] = [:]
    }

    private let state = Locked(State())
    /// The longest ``awaitWritePermission(for:)`` waits (about a lease: a renewal comes by then,
    /// or the task is dropped).
    let patience: Duration

    /// A fence that permits nothing yet.
    public init(patience: Duration) {
        self.patience = patience
    }

    public func permitsWrite(to id: DownloadTaskID) -> Bool {
        let now = FleetInstant.now()
        return state.withLock { state in
            guard state.held[id] != nil, let until = state.trustedUntil else { return false }
            return now < until
        }
    }

    public func awaitWritePermission(for id: DownloadTaskID) -> Bool {
        let deadline = FleetInstant.now().advanced(by: patience)
        while true {
            if permitsWrite(to: id) { return true }
            guard isHeld(id), FleetInstant.now() < deadline else { return false }
            // (A blocking executor's thread: a short nap until the next heartbeat renews the lease.)
            usleep(20_000)
        }
    }

    public func journalEpoch(of id: DownloadTaskID) -> UInt64? {
        state.withLock { $0.held[id].map { UInt64(clamping: $0) } }
    }

    /// Whether the task is held (trusted or not).
    public func isHeld(_ id: DownloadTaskID) -> Bool {
        state.withLock { $0.held[id] != nil }
    }

    /// The tasks held, with their epochs.
    public var held: [DownloadTaskID: Int64] {
        state.withLock { $0.held }
    }

    /// Sets the end of the trust (the policy's ``FleetLeasePolicy/trustedUntil``).
    func trust(until instant: FleetInstant?) {
        state.withLock { $0.trustedUntil = instant }
    }

    /// Holds `id` under `epoch`.
    func hold(_ id: DownloadTaskID, epoch: Int64) {
        state.withLock { $0.held[id] = epoch }
    }

    /// Lets `id` go; returns whether it was held.
    @discardableResult
    func release(_ id: DownloadTaskID) -> Bool {
        state.withLock { $0.held.removeValue(forKey: id) != nil }
    }

    /// Lets every task go; returns them.
    func releaseAll() -> [DownloadTaskID] {
        state.withLock { state in
            defer { state.held.removeAll() }
            return Array(state.held.keys)
        }
    }
}
