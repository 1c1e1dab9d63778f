import Synchronization

/// A ``DownloadStore`` in memory: the reference implementation, for tests and for managers
/// that need nothing to survive the process.
public final class InMemoryDownloadStore: DownloadStore {
    private struct State {
        var order: [DownloadTaskID] = []
        var entities: [DownloadTaskID: EntityRecord] = [:]
        var tasks: [DownloadTaskID: TaskRecord] = [:]
        var segments: [DownloadTaskID: [SegmentKey: SegmentProgress]] = [:]
    }

    private struct SegmentKey: Hashable {
        var output: Int
        var segment: Int
    }

    private let state = Mutex(State())

    /// Creates an empty store.
    public init() {}

    public func loadAll() async throws -> [StoredTask] {
        state.withLock { state in
            state.order.compactMap { id in
                guard let entity = state.entities[id], let task = state.tasks[id] else { return nil }
                let segments = (state.segments[id] ?? [:]).values.sorted {
                    ($0.outputIndex, $0.segmentIndex) < ($1.outputIndex, $1.segmentIndex)
                }
                return StoredTask(entity: entity, task: task, segments: segments)
            }
        }
    }

    public func insert(_ task: StoredTask) async throws {
        state.withLock { state in
            let id = task.task.id
            if state.tasks[id] == nil { state.order.append(id) }
            state.entities[id] = task.entity
            state.tasks[id] = task.task
            for progress in task.segments {
                state.segments[id, default: [:]][SegmentKey(output: progress.outputIndex, segment: progress.segmentIndex)] = progress
            }
        }
    }

    public func update(_ task: TaskRecord) async throws {
        try state.withLock { state throws(DownloadError) in
            guard state.tasks.updateValue(task, forKey: task.id) != nil else {
                state.tasks[task.id] = nil
                throw DownloadError(.storeFailure, "the store has no task \(task.id) to update")
            }
        }
    }

    public func saveSegments(_ progress: [SegmentProgress]) async throws {
        state.withLock { state in
            for item in progress where state.tasks[item.taskID] != nil {
                state.segments[item.taskID, default: [:]][SegmentKey(output: item.outputIndex, segment: item.segmentIndex)] = item
            }
        }
    }

    public func resetSegments(of id: DownloadTaskID) async throws {
        state.withLock { _ = $0.segments.removeValue(forKey: id) }
    }

    public func remove(_ id: DownloadTaskID) async throws {
        state.withLock { state in
            state.entities[id] = nil
            state.tasks[id] = nil
            state.segments[id] = nil
            state.order.removeAll { $0 == id }
        }
    }
}
