import Foundation

/// The clock a live recording reads and waits on: the wall clock by default; tests run a
/// stream and its recorder on one `ScaledLiveClock` to record a minute of media in seconds.
///
/// The reload rules (RFC 8216 §6.3.4), DASH segment availability and the stall timeout are all
/// measured on it; transfers keep their own (real) timeouts.
public protocol LiveClock: Sendable {
    /// The time now.
    func now() -> Date
    /// Suspends until `date` (at once when it has passed); throws `CancellationError` when the
    /// task is cancelled.
    func sleep(until date: Date) async throws
}

/// The system's wall clock.
public struct SystemLiveClock: LiveClock {
    /// Creates the clock.
    public init() {}

    public func now() -> Date { Date() }

    public func sleep(until date: Date) async throws {
        let seconds = date.timeIntervalSinceNow
        if seconds > 0 { try await Task.sleep(for: .nanoseconds(Int64(min(seconds, 86_400) * 1e9))) }
        try Task.checkCancellation()
    }
}

/// A clock that runs `rate` times as fast as the real one from a starting point (for tests: a
/// live origin and its recorder sharing one run ten times as fast, so a minute of segments is
/// published and recorded in six seconds), optionally `offset` seconds away from it (a server
/// whose clock is off, for `UTCTiming`).
package struct ScaledLiveClock: LiveClock {
    /// How many clock seconds pass per real second.
    public let rate: Double
    /// The clock's reading at ``realStart``.
    public let start: Date
    /// The real moment (monotonic) the clock started.
    private let realStart: ContinuousClock.Instant

    /// A clock reading `start` now, running `rate` times as fast as real time.
    public init(rate: Double, start: Date = Date()) {
        self.rate = max(0.001, rate)
        self.start = start
        realStart = .now
    }

    private init(rate: Double, start: Date, realStart: ContinuousClock.Instant) {
        self.rate = rate
        self.start = start
        self.realStart = realStart
    }

    /// The same clock, `seconds` ahead (negative: behind).
    public func offset(by seconds: Double) -> ScaledLiveClock {
        ScaledLiveClock(rate: rate, start: start.addingTimeInterval(seconds), realStart: realStart)
    }

    public func now() -> Date {
        let elapsed = ContinuousClock.now - realStart
        return start.addingTimeInterval(elapsed.secondsValue * rate)
    }

    public func sleep(until date: Date) async throws {
        let seconds = date.timeIntervalSince(now()) / rate
        if seconds > 0 { try await Task.sleep(for: .nanoseconds(Int64(min(seconds, 86_400) * 1e9))) }
        try Task.checkCancellation()
    }
}
