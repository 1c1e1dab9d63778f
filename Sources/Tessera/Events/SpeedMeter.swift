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
        guard let remaining, bytesPerSecond > 1 else { return nil }
        return .seconds(Double(max(0, remaining)) / bytesPerSecond)
    }
}
