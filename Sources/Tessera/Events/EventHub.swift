import Synchronization

/// Fans events out to every subscriber's queue. Conditions that hold tasks back (a full disk,
/// no network) are also kept: a new subscriber hears of the ones that hold now first, so no
/// subscriber is left looking at `waiting` without a word.
final class EventHub: Sendable {
    private struct Subscriber {
        let queue: EventQueue<DownloadEvent>
        /// What it is told of (``DownloadEventFilter/mask``).
        let mask: UInt32
    }

    private struct State {
        var subscribers: [UInt64: Subscriber] = [:]
        var conditions: [DownloadNotice.Kind: DownloadNotice] = [:]
        var nextID: UInt64 = 0
        var finished = false
    }

    private let state = Locked(State())
    /// Whether anyone listens, readable without the lock (events are not built for nobody).
    private let subscriberCount = Atomic<Int>(0)
    /// What any subscriber is told of (the union of their masks), readable without the lock.
    private let wanted = Atomic<UInt32>(0)

    /// Whether anyone listens (events are not built for nobody).
    var hasSubscribers: Bool { subscriberCount.load(ordering: .relaxed) > 0 }

    /// Whether any subscriber is told of changes into a state of `kind` (a snapshot is built for
    /// nobody otherwise).
    func tellsChanges(into kind: DownloadTaskState.Kind) -> Bool {
        wanted.load(ordering: .relaxed) & DownloadEventFilter.bit(of: kind) != 0
    }

    /// Whether any subscriber is told of added tasks.
    var tellsAdditions: Bool { wanted.load(ordering: .relaxed) & DownloadEventFilter.additionsBit != 0 }

    /// Whether any subscriber is told of progress.
    var tellsProgress: Bool { wanted.load(ordering: .relaxed) & DownloadEventFilter.progressBit != 0 }

    func subscribe(_ filter: DownloadEventFilter = .all) -> DownloadEventStream {
        let queue = EventQueue<DownloadEvent>()
        let id = state.withLock { state -> UInt64? in
            guard !state.finished else { return nil }
            state.nextID += 1
            state.subscribers[state.nextID] = Subscriber(queue: queue, mask: filter.mask)
            publish(state)
            for notice in state.conditions.values.sorted(by: { $0.kind.rawValue < $1.kind.rawValue }) {
                queue.post(.notice(notice))
            }
            return state.nextID
        }
        guard let id else {
            queue.finish()
            return DownloadEventStream(subscription: DownloadEventStream.Subscription(queue: queue, onEnd: {}))
        }
        return DownloadEventStream(subscription: DownloadEventStream.Subscription(
            queue: queue, onEnd: { [weak self] in self?.unsubscribe(id) }))
    }

    private func unsubscribe(_ id: UInt64) {
        state.withLock { state in
            state.subscribers[id] = nil
            publish(state)
        }
    }

    /// Keeps the lock-free summary of the subscribers (their number, what they are told of).
    private func publish(_ state: State) {
        subscriberCount.store(state.subscribers.count, ordering: .relaxed)
        wanted.store(state.subscribers.values.reduce(0) { $0 | $1.mask }, ordering: .relaxed)
    }

    /// Emits a notice, and keeps or drops the condition it tells of.
    func emit(notice: DownloadNotice) {
        state.withLock { state in
            switch notice.kind {
            case .diskSpaceCritical: state.conditions[.diskSpaceCritical] = notice
            case .diskSpaceRecovered: state.conditions[.diskSpaceCritical] = nil
            case .networkLost: state.conditions[.networkLost] = notice
            case .networkRestored: state.conditions[.networkLost] = nil
            case .diskSpaceLow, .meteredNetwork, .storeFailure: break
            }
            // Under the lock: a subscriber added meanwhile gets the condition or this event, once.
            for subscriber in state.subscribers.values { subscriber.queue.post(.notice(notice)) }
        }
    }

    func emit(_ event: DownloadEvent) {
        let bit = DownloadEventFilter.bit(of: event)
        state.withLock { state in
            for subscriber in state.subscribers.values where bit == 0 || subscriber.mask & bit != 0 {
                subscriber.queue.post(event)
            }
        }
    }

    /// Ends every subscriber's stream (after the events already emitted); later subscribers get
    /// a stream that has ended.
    func finish() {
        let all = state.withLock { state -> [EventQueue<DownloadEvent>] in
            state.finished = true
            defer {
                state.subscribers.removeAll()
                publish(state)
            }
            return state.subscribers.values.map(\.queue)
        }
        for queue in all { queue.finish() }
    }
}
