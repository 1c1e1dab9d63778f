import Synchronization

/// Fans events out to every subscriber's stream. Conditions that hold tasks back (a full disk,
/// no network) are also kept: a new subscriber hears of the ones that hold now first, so no
/// subscriber is left looking at `waiting` without a word.
final class EventHub: Sendable {
    private let subscribers = Locked<[UInt64: AsyncStream<DownloadEvent>.Continuation]>([:])
    private let conditions = Locked<[DownloadNotice.Kind: DownloadNotice]>([:])
    private let nextID = Atomic<UInt64>(0)

    /// Whether anyone listens (events are not built for nobody).
    var hasSubscribers: Bool { !subscribers.withLock { $0.isEmpty } }

    func subscribe() -> AsyncStream<DownloadEvent> {
        let id = nextID.wrappingAdd(1, ordering: .relaxed).newValue
        let (stream, continuation) = AsyncStream.makeStream(of: DownloadEvent.self, bufferingPolicy: .unbounded)
        continuation.onTermination = { [weak self] _ in
            _ = self?.subscribers.withLock { $0.removeValue(forKey: id) }
        }
        let held = conditions.withLock { conditions in
            subscribers.withLock { $0[id] = continuation }
            return conditions.values.sorted { $0.kind.rawValue < $1.kind.rawValue }
        }
        for notice in held { continuation.yield(.notice(notice)) }
        return stream
    }

    /// Emits a notice, and keeps or drops the condition it tells of.
    func emit(notice: DownloadNotice) {
        conditions.withLock { conditions in
            switch notice.kind {
            case .diskSpaceCritical: conditions[.diskSpaceCritical] = notice
            case .diskSpaceRecovered: conditions[.diskSpaceCritical] = nil
            case .networkLost: conditions[.networkLost] = notice
            case .networkRestored: conditions[.networkLost] = nil
            case .diskSpaceLow, .meteredNetwork, .storeFailure: break
            }
            emit(.notice(notice))
        }
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
