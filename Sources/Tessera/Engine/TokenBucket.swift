import Synchronization

/// A token bucket: the engine's global rate limit (inside a ``RateBudget``) and a transfer's own.
///
/// A transfer may take a whole receive buffer when any token is left, which drives the bucket
/// into debt; the debt is repaid before anyone receives again, so the long-run rate holds
/// exactly while no chunk has to be split.
struct TokenBucket {
    /// Bytes per second.
    private(set) var rate: Double
    /// The most that can be saved up while nobody receives.
    private let capacity: Double
    private var tokens: Double
    private var lastRefill: UInt64

    init(bytesPerSecond: Int64, now: UInt64 = MonotonicClock.nanoseconds()) {
        rate = Double(max(bytesPerSecond, 1))
        capacity = max(rate / 20, 16 * 1024)
        tokens = capacity
        lastRefill = now
    }

    mutating func refill(now: UInt64 = MonotonicClock.nanoseconds()) {
        guard now > lastRefill else { return }
        tokens = min(capacity, tokens + Double(now - lastRefill) / 1e9 * rate)
        lastRefill = now
    }

    /// Whether a receiver may take bytes now.
    var hasTokens: Bool { tokens > 0 }

    mutating func consume(_ bytes: Int) {
        tokens -= Double(bytes)
    }

    /// Nanoseconds until ``hasTokens`` turns true.
    var nanosecondsUntilAvailable: UInt64 {
        tokens > 0 ? 0 : UInt64((-tokens + 1) / rate * 1e9)
    }
}

/// The global rate limit's bucket, shared by the engine's threads: each takes from it under its
/// lock, so the limit holds across all of them.
final class RateBudget: Sendable {
    private let bucket: Mutex<TokenBucket?>
    /// The limit as last set (0: none), readable without the lock.
    private let setting = Atomic<Int64>(0)

    init(bytesPerSecond: Int64?) {
        let rate = bytesPerSecond.flatMap { $0 > 0 ? $0 : nil }
        bucket = Mutex(rate.map { TokenBucket(bytesPerSecond: $0) })
        setting.store(rate ?? 0, ordering: .relaxed)
    }

    /// The limit in bytes per second, or `nil` for none.
    var limit: Int64? {
        let rate = setting.load(ordering: .relaxed)
        return rate > 0 ? rate : nil
    }

    /// Sets the limit (`nil` or below 1: none), with a full bucket.
    func set(_ bytesPerSecond: Int64?) {
        let rate = bytesPerSecond.flatMap { $0 > 0 ? $0 : nil }
        bucket.withLock { $0 = rate.map { TokenBucket(bytesPerSecond: $0) } }
        setting.store(rate ?? 0, ordering: .relaxed)
    }

    /// Takes `count` bytes when the bucket has tokens (or there is no limit) and `alsoAllowed`;
    /// whether it did.
    func take(_ count: Int, now: UInt64, alsoAllowed: Bool) -> Bool {
        bucket.withLock { bucket in
            guard bucket != nil else { return alsoAllowed }
            bucket!.refill(now: now)
            guard bucket!.hasTokens, alsoAllowed else { return false }
            bucket!.consume(count)
            return true
        }
    }

    /// Whether a receiver may take bytes now (always, without a limit).
    func hasTokens(now: UInt64) -> Bool {
        bucket.withLock { bucket in
            bucket?.refill(now: now)
            return bucket?.hasTokens ?? true
        }
    }

    /// Nanoseconds until ``hasTokens(now:)`` turns true (0 without a limit).
    var nanosecondsUntilAvailable: UInt64 {
        bucket.withLock { $0?.nanosecondsUntilAvailable ?? 0 }
    }
}
