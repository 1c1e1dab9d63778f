/// A token bucket for the engine's global rate limit. Used only on the engine thread.
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
