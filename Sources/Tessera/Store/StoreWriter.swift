import Synchronization

/// Applies writes to a store in order from one background task. Segment progress is coalesced
/// (the latest record per segment wins) and written at most every `interval`; everything else
/// is written at once, after any progress recorded before it.
final class StoreWriter: Sendable {
    enum Write: Sendable {
        case insert(StoredTask)
        case update(TaskRecord)
        case segments([SegmentProgress])
        case resetSegments(DownloadTaskID)
        case remove(DownloadTaskID)
        case barrier(CheckedContinuation<Void, Never>)
    }

    private struct Key: Hashable {
        var task: DownloadTaskID
        var output: Int
        var segment: Int
    }

    private struct State {
        var queue: [Write] = []
        var progress: [Key: SegmentProgress] = [:]
        var progressOrder: [Key] = []
        var flushScheduled = false
    }

    /// The queue, shared with the background task (a `Mutex` cannot be copied into it).
    private final class Shared: Sendable {
        let state = Mutex(State())
    }

    private let shared = Shared()
    private let wakeUp: AsyncStream<Void>.Continuation
    private let interval: Duration

    init(store: any DownloadStore, interval: Duration = .milliseconds(200), onError: @escaping @Sendable (DownloadError) -> Void) {
        self.interval = interval
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        wakeUp = continuation
        let shared = self.shared
        Task.detached {
            for await _ in stream {
                while true {
                    let batch = shared.state.withLock { state -> [Write] in
                        defer { state.queue.removeAll() }
                        return state.queue
                    }
                    if batch.isEmpty { break }
                    await Self.apply(batch, to: store, onError: onError)
                }
            }
        }
    }

    deinit {
        wakeUp.finish()
    }

    private static func apply(_ batch: [Write], to store: any DownloadStore, onError: @Sendable (DownloadError) -> Void) async {
        for write in batch {
            do {
                switch write {
                case .insert(let task): try await store.insert(task)
                case .update(let task): try await store.update(task)
                case .segments(let progress): try await store.saveSegments(progress)
                case .resetSegments(let id): try await store.resetSegments(of: id)
                case .remove(let id): try await store.remove(id)
                case .barrier(let continuation): continuation.resume()
                }
            } catch let error as DownloadError {
                onError(error)
            } catch {
                onError(DownloadError(.storeFailure, "\(error)"))
            }
        }
    }

    /// Queues a write, after any progress recorded before it.
    func enqueue(_ write: Write) {
        let wasIdle = shared.state.withLock { state -> Bool in
            Self.movePendingProgress(&state)
            defer { state.queue.append(write) }
            return state.queue.isEmpty
        }
        // The background task drains the whole queue each time it wakes.
        if wasIdle { wakeUp.yield() }
    }

    /// Records segment progress; written with the next batch.
    func record(_ progress: SegmentProgress) {
        let schedule = shared.state.withLock { state -> Bool in
            let key = Key(task: progress.taskID, output: progress.outputIndex, segment: progress.segmentIndex)
            if state.progress.updateValue(progress, forKey: key) == nil { state.progressOrder.append(key) }
            defer { state.flushScheduled = true }
            return !state.flushScheduled
        }
        guard schedule else { return }
        let interval = self.interval
        Task { [weak self] in
            try? await Task.sleep(for: interval)
            self?.flushProgress()
        }
    }

    private func flushProgress() {
        shared.state.withLock { state in
            Self.movePendingProgress(&state)
            state.flushScheduled = false
        }
        wakeUp.yield()
    }

    private static func movePendingProgress(_ state: inout State) {
        guard !state.progressOrder.isEmpty else { return }
        state.queue.append(.segments(state.progressOrder.compactMap { state.progress[$0] }))
        state.progress.removeAll(keepingCapacity: true)
        state.progressOrder.removeAll(keepingCapacity: true)
    }

    /// Returns when everything queued or recorded before the call is written.
    func flush() async {
        await withCheckedContinuation { continuation in
            enqueue(.barrier(continuation))
        }
    }
}
