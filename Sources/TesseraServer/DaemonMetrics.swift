import Tessera

/// Counters the daemon keeps from the manager's events, for `/metrics`.
public final class DaemonMetrics: Sendable {
    private struct Counts {
        var added = 0
        var removedByRPC = 0
        var completed = 0
        /// Tasks that ended failed or invalid, by the error's code.
        var failures: [String: Int] = [:]
        /// Errors that were retried, by code.
        var retried: [String: Int] = [:]
        /// Bytes done over every task, as the last progress told.
        var bytesByTask: [DownloadTaskID: Int64] = [:]
        /// Bytes of tasks that are gone (removed), so the total never goes down.
        var bytesOfGoneTasks: Int64 = 0
    }

    private let counts = Locked(Counts())

    /// Creates empty counters.
    public init() {}

    func record(_ event: DownloadEvent) {
        counts.withLock { counts in
            switch event {
            case .taskAdded(let info), .taskProgress(let info):
                counts.bytesByTask[info.id] = max(counts.bytesByTask[info.id] ?? 0, info.bytesDone)
            case .taskStateChanged(let info, _):
                counts.bytesByTask[info.id] = max(counts.bytesByTask[info.id] ?? 0, info.bytesDone)
                if info.state == .completed { counts.completed += 1 }
                if info.state == .failed || info.state == .invalid {
                    counts.failures[info.error?.code.description ?? "unknown", default: 0] += 1
                }
            case .taskError(_, let error, let willRetry):
                if willRetry { counts.retried[error.code.description, default: 0] += 1 }
            case .taskRemoved(let id):
                let bytes = counts.bytesByTask.removeValue(forKey: id) ?? 0
                let (sum, overflow) = counts.bytesOfGoneTasks.addingReportingOverflow(bytes)
                counts.bytesOfGoneTasks = overflow ? .max : sum
            case .groupUpdated, .groupRemoved, .notice, .taskMerge:
                break
            }
        }
    }

    func added(_ count: Int) { counts.withLock { $0.added += count } }
    func removedByRPC() { counts.withLock { $0.removedByRPC += 1 } }

    /// A copy of the counters.
    public struct Snapshot: Sendable {
        /// Tasks added over RPC.
        public var added: Int
        /// Tasks removed over RPC.
        public var removedByRPC: Int
        /// Tasks that completed while the daemon ran.
        public var completed: Int
        /// Tasks that failed, by error code.
        public var failures: [String: Int]
        /// Errors retried, by code.
        public var retried: [String: Int]
        /// Bytes the tasks have done (saturating).
        public var bytesDone: Int64
    }

    /// The counters now.
    public var snapshot: Snapshot {
        counts.withLock { counts in
            var bytes = counts.bytesOfGoneTasks
            for value in counts.bytesByTask.values {
                let (sum, overflow) = bytes.addingReportingOverflow(value)
                bytes = overflow ? .max : sum
            }
            return Snapshot(
                added: counts.added, removedByRPC: counts.removedByRPC, completed: counts.completed, failures: counts.failures,
                retried: counts.retried, bytesDone: bytes)
        }
    }
}
