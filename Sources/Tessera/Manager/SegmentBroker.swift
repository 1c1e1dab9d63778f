import Synchronization

/// Lets tasks that need the same segment (the same cache key) share one transfer: the first
/// to ask produces it, the others wait and then link or copy the producer's file.
///
/// Waiting holds no segment slot, so producers can always make progress.
final class SegmentBroker: Sendable {
    enum Claim {
        /// Nobody fetches the key: fetch it, then ``publish(_:path:)`` or ``fail(_:)``.
        case produce
        /// Someone does: ``wait(for:)``, copy, then ``release(_:)``.
        case wait
    }

    private final class Entry: @unchecked Sendable {
        // Touched only under the broker's lock.
        var waiters: [(id: Int, continuation: CheckedContinuation<String?, Never>)] = []
        var readers = 0
        var published: String?
        var drained: CheckedContinuation<Void, Never>?
        var nextWaiter = 0
    }

    private let entries = Mutex<[String: Entry]>([:])

    func claim(_ key: String) -> Claim {
        entries.withLock { entries in
            if let entry = entries[key] {
                entry.readers += 1
                return .wait
            }
            entries[key] = Entry()
            return .produce
        }
    }

    /// The producer's file once published, or `nil` when the producer failed (or the waiter
    /// was cancelled): then fetch it yourself.
    func wait(for key: String) async -> String? {
        let id = entries.withLock { entries -> Int in
            guard let entry = entries[key] else { return -1 }
            entry.nextWaiter += 1
            return entry.nextWaiter
        }
        guard id >= 0 else { return nil }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<String?, Never>) in
                let immediate = entries.withLock { entries -> String?? in
                    guard let entry = entries[key] else { return .some(nil) }
                    if let path = entry.published { return .some(path) }
                    if Task.isCancelled { return .some(nil) }
                    entry.waiters.append((id, continuation))
                    return .none
                }
                if case .some(let path) = immediate { continuation.resume(returning: path) }
            }
        } onCancel: {
            let waiter = entries.withLock { entries -> CheckedContinuation<String?, Never>? in
                guard let entry = entries[key], let index = entry.waiters.firstIndex(where: { $0.id == id }) else {
                    return nil
                }
                return entry.waiters.remove(at: index).continuation
            }
            waiter?.resume(returning: nil)
        }
    }

    /// A waiter is done with the producer's file.
    func release(_ key: String) {
        let drained = entries.withLock { entries -> CheckedContinuation<Void, Never>? in
            guard let entry = entries[key] else { return nil }
            entry.readers -= 1
            guard entry.readers <= 0, entry.published != nil else { return nil }
            entries[key] = nil
            return entry.drained
        }
        drained?.resume()
    }

    /// The producer's file is ready; returns once every waiter has copied it.
    func publish(_ key: String, path: String) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let (waiters, done) = entries.withLock { entries -> ([CheckedContinuation<String?, Never>], Bool) in
                guard let entry = entries[key] else { return ([], true) }
                entry.published = path
                let waiters = entry.waiters.map(\.continuation)
                entry.waiters.removeAll()
                if entry.readers <= 0 {
                    entries[key] = nil
                    return (waiters, true)
                }
                entry.drained = continuation
                return (waiters, false)
            }
            for waiter in waiters { waiter.resume(returning: path) }
            if done { continuation.resume() }
        }
    }

    /// The producer gave up; waiters fetch for themselves.
    func fail(_ key: String) {
        let waiters = entries.withLock { entries -> [CheckedContinuation<String?, Never>] in
            guard let entry = entries.removeValue(forKey: key) else { return [] }
            return entry.waiters.map(\.continuation)
        }
        for waiter in waiters { waiter.resume(returning: nil) }
    }
}
