/// One subscriber's events of a ``DownloadTaskManager``, in order, from the moment
/// ``DownloadTaskManager/events(_:)`` was called until the manager shuts down (or the subscriber
/// stops iterating and lets go of the stream).
///
/// Iterate it with `for await`; it ends after the manager's last event. Events that arrive while
/// the subscriber is busy are handed over together at its next step, so a subscriber that keeps
/// up with thousands of tasks wakes once per burst, not once per event. A subscriber that is
/// cancelled while it waits stops receiving.
///
/// One iteration per stream: iterate a stream from one task only (call
/// ``DownloadTaskManager/events(_:)`` again for another subscriber).
public struct DownloadEventStream: AsyncSequence, Sendable {
    public typealias Element = DownloadEvent
    public typealias Failure = Never

    let subscription: Subscription

    /// Iterates the events.
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(subscription: subscription)
    }

    /// The iterator: the events of the batch taken last, then the next batch.
    public struct AsyncIterator: AsyncIteratorProtocol {
        public typealias Element = DownloadEvent
        public typealias Failure = Never

        let subscription: Subscription
        private var events: EventQueue<DownloadEvent>.Iterator

        init(subscription: Subscription) {
            self.subscription = subscription
            events = subscription.queue.makeIterator()
        }

        /// The next event, or `nil` once the stream has ended (or the calling task was cancelled).
        public mutating func next(isolation actor: isolated (any Actor)?) async -> DownloadEvent? {
            guard let event = await events.next(isolation: actor) else {
                subscription.end()
                return nil
            }
            return event
        }

        /// The next event, or `nil` once the stream has ended.
        public mutating func next() async -> DownloadEvent? {
            await next(isolation: nil)
        }
    }

    /// A subscription to a hub: its queue, and what ends it (the last reference let go, or the
    /// stream's end).
    final class Subscription: Sendable {
        let queue: EventQueue<DownloadEvent>
        private let onEnd: Locked<(@Sendable () -> Void)?>

        init(queue: EventQueue<DownloadEvent> = EventQueue(), onEnd: @escaping @Sendable () -> Void) {
            self.queue = queue
            self.onEnd = Locked(onEnd)
        }

        /// The subscriber is gone (or the stream ended): the hub stops delivering to it.
        func end() {
            queue.finish()
            let action = onEnd.withLock { action -> (@Sendable () -> Void)? in
                defer { action = nil }
                return action
            }
            action?()
        }

        deinit {
            end()
        }
    }
}
