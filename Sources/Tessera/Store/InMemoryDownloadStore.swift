
/// A ``DownloadStore`` in memory: the reference implementation, for tests and for managers
/// that need nothing to survive the process.
public final class InMemoryDownloadStore: DownloadStore {
    private struct State {
        var order: [DownloadTaskID] = []
        var tasks: [DownloadTaskID: StoredTask] = [:]
    }

    private let state = Locked(State())

    /// Creates an empty store.
    public init() {}

    public func loadAll() async throws -> [StoredTask] {
        state.withLock { state in state.order.compactMap { state.tasks[$0] } }
    }

    public func apply(_ changes: [StoreChange]) async throws {
        // Checked before anything changes, so a refused batch leaves the store as it was
        // (without copying every stored task for each batch).
        for case .insert(let task) in changes where task.entity.taskID != task.task.id {
            throw DownloadError(.storeFailure, "the task \(task.task.id) cannot be stored: its entity is \(task.entity.taskID)")
        }
        state.withLock { state in
            var removed: Set<DownloadTaskID> = []
            for change in changes {
                switch change {
                case .insert(let task):
                    if state.tasks[task.task.id] == nil {
                        // Removed earlier in this batch: it goes to the end, as a new task.
                        if removed.remove(task.task.id) != nil { state.order.removeAll { $0 == task.task.id } }
                        state.order.append(task.task.id)
                    }
                    state.tasks[task.task.id] = task
                case .update(let record):
                    state.tasks[record.id]?.task = record
                case .remove(let id):
                    if state.tasks.removeValue(forKey: id) != nil { removed.insert(id) }
                }
            }
            if !removed.isEmpty { state.order.removeAll { removed.contains($0) } }
        }
    }
}
