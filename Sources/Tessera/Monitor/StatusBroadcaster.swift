
/// Keeps a network status and fans changes out to subscribers; shared by the monitors.
final class StatusBroadcaster: Sendable {
    private struct State {
        var current: NetworkStatus
        var subscribers: [UInt64: AsyncStream<NetworkStatus>.Continuation] = [:]
        var nextID: UInt64 = 0
        var finished = false
    }

    private let state: Locked<State>

    init(_ status: NetworkStatus) {
        state = Locked(State(current: status))
    }

    var current: NetworkStatus { state.withLock { $0.current } }

    func subscribe() -> AsyncStream<NetworkStatus> {
        let (stream, continuation) = AsyncStream.makeStream(of: NetworkStatus.self, bufferingPolicy: .unbounded)
        let id = state.withLock { state -> UInt64? in
            guard !state.finished else { return nil }
            state.nextID += 1
            state.subscribers[state.nextID] = continuation
            return state.nextID
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
        }
        return stream
    }

    /// Records `status`; subscribers hear of it only when it differs from the last one.
    func publish(_ status: NetworkStatus) {
        let targets = state.withLock { state -> [AsyncStream<NetworkStatus>.Continuation] in
            guard !state.finished, status != state.current else { return [] }
            state.current = status
            return Array(state.subscribers.values)
        }
        for target in targets { target.yield(status) }
    }

    /// Ends every stream.
    func finish() {
        let targets = state.withLock { state -> [AsyncStream<NetworkStatus>.Continuation] in
            state.finished = true
            defer { state.subscribers.removeAll() }
            return Array(state.subscribers.values)
        }
        for target in targets { target.finish() }
    }
}
