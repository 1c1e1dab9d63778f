/// How a segment is retried: exponential backoff with jitter, `Retry-After` honoured, the
/// counter reset whenever an attempt made progress.
public struct RetryPolicy: Sendable, Hashable {
    /// Failed attempts allowed per segment before the task fails (progress resets the count).
    public var maxAttempts: Int = 5
    /// The first delay.
    public var baseDelay: Duration = .milliseconds(500)
    /// The longest delay backoff may reach.
    public var maxDelay: Duration = .seconds(30)
    /// The longest `Retry-After` honoured; a server asking for more fails the attempt sooner.
    public var maxRetryAfter: Duration = .seconds(300)
    /// How often the entity may be resolved again (stale URLs, expiry) before giving up.
    public var maxReResolves: Int = 3

    /// Creates the default policy.
    public init() {}

    /// Creates a policy.
    public init(maxAttempts: Int, baseDelay: Duration, maxDelay: Duration, maxReResolves: Int = 3) {
        self.maxAttempts = maxAttempts
        self.baseDelay = baseDelay
        self.maxDelay = maxDelay
        self.maxReResolves = maxReResolves
    }

    /// The delay before attempt `attempt + 1` after `attempt` failures (1-based): the
    /// exponential delay `base × 2^(attempt-1)` capped at ``maxDelay``, of which a random half
    /// is kept ("equal jitter"), so retries from many segments spread out. A `Retry-After`
    /// longer than that wins, up to ``maxRetryAfter``.
    public func delay(afterFailure attempt: Int, retryAfter: Duration?, using random: inout some RandomNumberGenerator) -> Duration {
        let exponent = min(max(attempt - 1, 0), 30)
        let base = Double(baseDelay.nanosecondsValue), cap = Double(maxDelay.nanosecondsValue)
        let full = min(cap, base * Double(1 << exponent))
        let jittered = full / 2 + Double.random(in: 0...(full / 2), using: &random)
        var delay = Duration.nanoseconds(Int64(jittered))
        if let retryAfter { delay = max(delay, min(retryAfter, maxRetryAfter)) }
        return delay
    }
}

/// Waits between retries; tests inject one that records delays instead of sleeping.
public protocol DownloadSleeper: Sendable {
    /// Suspends for `duration`; throws `CancellationError` when the task is cancelled.
    func sleep(for duration: Duration) async throws
}

/// The real clock.
package struct ContinuousSleeper: DownloadSleeper {
    /// Creates a sleeper.
    public init() {}

    public func sleep(for duration: Duration) async throws {
        try await Task.sleep(for: duration)
    }
}

/// A SplitMix64 generator: fast, seedable, good enough for jitter.
package struct SplitMixRandom: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// Seeds the generator.
    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

extension Duration {
    var nanosecondsValue: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }

    var secondsValue: Double { Double(nanosecondsValue) / 1e9 }
}
