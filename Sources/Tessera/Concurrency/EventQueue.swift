/// Values from any thread to one consumer task, handed over in batches.
///
/// Producers ``post(_:)`` without waiting; the consumer ``take(isolation:)``s everything posted
/// since its last take, and suspends only when nothing is there. A burst of posts while the
/// consumer is busy costs it one wake-up, not one per value: the engine thread finishing a dozen
/// transfers in one turn of its loop, or a manager emitting the state changes of a dozen tasks,
/// reaches the consumer as one batch. (An `AsyncStream` hands values over one at a time, each
/// `next()` a round through a lock, a cancellation handler and a continuation, and wakes the
/// consumer once per value when it keeps up.)
///
/// The order of the values is the order of the posts; ``finish()`` lets the consumer take what
/// is left and then ends it. A consumer whose task is cancelled while it waits stops waiting.
final class EventQueue<Element: Sendable>: Sendable {
    private struct State {
        var items: [Element] = []
        var waiter: UnsafeContinuation<Void, Never>?
        var finished = false
    }

    private let state = Locked(State())

    /// The largest buffer a recycled batch gives back (larger ones are bursts: freed).
    static var keptCapacity: Int { 256 }

    init() {}

    /// Appends `element` and wakes the consumer if it waits; `false` (and nothing posted) once
    /// the queue is finished.
    @discardableResult
    func post(_ element: Element) -> Bool {
        let (accepted, waiter) = state.withLock { state -> (Bool, UnsafeContinuation<Void, Never>?) in
            guard !state.finished else { return (false, nil) }
            // (Room for a few at the first post: most queues, a run's events, get two or three.)
            if state.items.capacity == 0 { state.items.reserveCapacity(4) }
            state.items.append(element)
            defer { state.waiter = nil }
            return (true, state.waiter)
        }
        // (Held back to the end of the poster's turn when it batches its wake-ups.)
        if let waiter { WakeBatch.resume(waiter) }
        return accepted
    }

    /// Ends the queue: the consumer takes what was posted before, then gets `nil`; later posts
    /// are dropped.
    func finish() {
        let waiter = state.withLock { state -> UnsafeContinuation<Void, Never>? in
            state.finished = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// Whether ``finish()`` was called.
    var isFinished: Bool { state.withLock { $0.finished } }

    /// Everything posted since the last take, in order; waits while there is nothing. `nil` once
    /// the queue is finished and empty, or when the calling task is cancelled with nothing
    /// waiting for it. Runs in the caller's isolation (no executor hop).
    ///
    /// One consumer only: two tasks taking at once is a programming error.
    func take(isolation: isolated (any Actor)? = #isolation) async -> [Element]? {
        await take(recycling: [], isolation: isolation)
    }

    /// ``take(isolation:)``, handing back `spent`, a batch taken before whose elements are all
    /// used: its buffer takes the next posts, so batches of a steady size allocate nothing (a
    /// buffer larger than ``keptCapacity`` is let go).
    func take(recycling spent: consuming [Element], isolation: isolated (any Actor)? = #isolation) async -> [Element]? {
        var spare = spent
        spare.removeAll(keepingCapacity: spare.capacity <= Self.keptCapacity)
        while true {
            let taken = state.withLock { state -> Bool in
                guard !state.items.isEmpty else { return false }
                swap(&state.items, &spare)
                return true
            }
            if taken { return spare }
            if isFinished || Task.isCancelled { return nil }
            await withTaskCancellationHandler {
                await withUnsafeContinuation(isolation: isolation) { (continuation: UnsafeContinuation<Void, Never>) in
                    // Checked under the lock that the cancellation handler takes: a cancellation
                    // either came before (seen here) or finds the waiter below.
                    let resumeNow = state.withLock { state -> Bool in
                        if !state.items.isEmpty || state.finished || Task.isCancelled { return true }
                        precondition(state.waiter == nil, "EventQueue: two consumers take at once")
                        state.waiter = continuation
                        return false
                    }
                    if resumeNow { continuation.resume() }
                }
            } onCancel: {
                let waiter = state.withLock { state -> UnsafeContinuation<Void, Never>? in
                    defer { state.waiter = nil }
                    return state.waiter
                }
                waiter?.resume()
            }
        }
    }

    /// Takes the values one at a time: a batch is taken when the last one is used up, so the
    /// values of a batch cost no lock and no suspension each.
    struct Iterator {
        let queue: EventQueue
        private var batch: [Element] = []
        private var position = 0

        init(queue: EventQueue) {
            self.queue = queue
        }

        /// Whether values taken with the last batch are still to come (``next(isolation:)``
        /// then returns one without looking at the queue).
        var hasBuffered: Bool { position < batch.count }

        /// The next value; `nil` once the queue has ended (see ``EventQueue/take(isolation:)``).
        mutating func next(isolation: isolated (any Actor)? = #isolation) async -> Element? {
            if position == batch.count {
                let spent = batch
                batch = []
                guard let next = await queue.take(recycling: spent, isolation: isolation) else { return nil }
                batch = next
                position = 0
            }
            defer { position += 1 }
            return batch[position]
        }
    }

    /// An iterator over the values, one at a time.
    func makeIterator() -> Iterator { Iterator(queue: self) }
}
