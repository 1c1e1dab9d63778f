import Synchronization

/// Fans events out to every subscriber's stream.
final class EventHub: Sendable {
    private let subscribers = Mutex<[UInt64: AsyncStream<DownloadEvent>.Continuation]>([:])
    private let nextID = Atomic<UInt64>(0)

    /// Whether anyone listens (events are not built for nobody).
    var hasSubscribers: Bool { !subscribers.withLock { $0.isEmpty } }

    func subscribe() -> AsyncStream<DownloadEvent> {
        let id = nextID.wrappingAdd(1, ordering: .relaxed).newValue
        let (stream, continuation) = AsyncStream.makeStream(of: DownloadEvent.self, bufferingPolicy: .unbounded)
        continuation.onTermination = { [weak self] _ in
            _ = self?.subscribers.withLock { $0.removeValue(forKey: id) }
        }
        subscribers.withLock { $0[id] = continuation }
        return stream
    }

    func emit(_ event: DownloadEvent) {
        for continuation in subscribers.withLock({ Array($0.values) }) {
            continuation.yield(event)
        }
    }

    func finish() {
        let all = subscribers.withLock { subscribers -> [AsyncStream<DownloadEvent>.Continuation] in
            defer { subscribers.removeAll() }
            return Array(subscribers.values)
        }
        for continuation in all { continuation.finish() }
    }
}
