/// A moving average of throughput: an exponentially weighted average of samples taken at each
/// progress tick, so one slow or fast interval moves it only part of the way.
struct SpeedMeter: Sendable {
    /// How much of the newest sample enters the average.
    var smoothing: Double = 0.3
    private(set) var bytesPerSecond: Double = 0
    private var lastBytes: Int64?
    private var lastTime: ContinuousClock.Instant?

    mutating func sample(bytes: Int64, at time: ContinuousClock.Instant = .now) {
        defer {
            lastBytes = bytes
            lastTime = time
        }
        guard let lastBytes, let lastTime else { return }
        let seconds = (time - lastTime).secondsValue
        guard seconds > 0.01 else { return }
        let instant = Double(max(0, bytes - lastBytes)) / seconds
        bytesPerSecond = bytesPerSecond == 0 ? instant : smoothing * instant + (1 - smoothing) * bytesPerSecond
    }

    /// Forgets the history (a paused task has no speed).
    mutating func reset() {
        self = SpeedMeter(smoothing: smoothing)
    }

    func eta(remaining: Int64?) -> Duration? {
        remaining.flatMap { Duration.estimate(remaining: $0, bytesPerSecond: bytesPerSecond) }
    }
}

extension Duration {
    /// How long `remaining` bytes take at `bytesPerSecond`: `nil` when the speed is too low to
    /// tell (1 byte a second or less), and at most a hundred years (a total from the network may
    /// be anything).
    public static func estimate(remaining: Int64, bytesPerSecond: Double) -> Duration? {
        guard bytesPerSecond > 1, bytesPerSecond.isFinite else { return nil }
        return .seconds(min(Double(max(0, remaining)) / bytesPerSecond, 100 * 365 * 86_400))
    }
}
