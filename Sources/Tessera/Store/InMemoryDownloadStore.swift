import Synchronization

/// A ``DownloadStore`` in memory: the reference implementation, for tests and for managers
/// that need nothing to survive the process.
public final class InMemoryDownloadStore: DownloadStore {
    private struct State {
        var order: [DownloadTaskID] = []
        var tasks: [DownloadTaskID: StoredTask] = [:]
    }

    private let state = Mutex(State())

    /// Creates an empty store.
    public init() {}

    public func loadAll() async throws -> [StoredTask] {
        state.withLock { state in state.order.compactMap { state.tasks[$0] } }
    }

    public func apply(_ changes: [StoreChange]) async throws {
        try state.withLock { state throws(DownloadError) in
            var next = state
            for change in changes {
                switch change {
                case .insert(let task):
                    guard task.entity.taskID == task.task.id else {
                        throw DownloadError(.storeFailure, "the task \(task.task.id) cannot be stored: its entity is \(task.entity.taskID)")
                    }
                    if next.tasks[task.task.id] == nil { next.order.append(task.task.id) }
                    next.tasks[task.task.id] = task
                case .update(let record):
                    next.tasks[record.id]?.task = record
                case .remove(let id):
                    if next.tasks.removeValue(forKey: id) != nil { next.order.removeAll { $0 == id } }
                }
            }
            state = next
        }
    }
}
