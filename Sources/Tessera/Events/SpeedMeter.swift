import Foundation

/// A moving average of throughput: an exponentially weighted average of the samples the manager
/// takes at each tick, weighted by the time each covers (a sample of 0.2 s moves the average less
/// than one of 2 s), so one slow or fast interval moves it only part of the way, however often
/// it is sampled.
///
/// The first interval gives the first value (a speed within the first second of a transfer, not
/// after several). Bytes counted from something else than arrival (a run that starts over finds
/// bytes on disk, or drops bad ones) are told apart by the progress's `epoch`: a sample of
/// another epoch only starts a new interval.
struct SpeedMeter: Sendable {
    /// How long a past rate takes to fade to 1/e of its weight.
    var timeConstant: Double = 2
    private(set) var bytesPerSecond: Double = 0
    private var lastBytes: Int64?
    private var lastTime: ContinuousClock.Instant?
    private var lastEpoch = 0

    init(timeConstant: Double = 2) {
        self.timeConstant = timeConstant
    }

    /// Notes that `bytes` were done at `time`; `epoch` changes when the count was reset.
    mutating func sample(bytes: Int64, at time: ContinuousClock.Instant = .now, epoch: Int = 0) {
        guard let lastBytes, let lastTime, lastEpoch == epoch, bytes >= lastBytes else {
            // The first sample, or the count started over: only the start of an interval.
            (self.lastBytes, self.lastTime, lastEpoch) = (bytes, time, epoch)
            return
        }
        let seconds = (time - lastTime).secondsValue
        guard seconds > 0.05 else { return }  // (too short to say anything: the next one will)
        let instant = Double(bytes - lastBytes) / seconds
        if bytesPerSecond == 0 {
            bytesPerSecond = instant
        } else {
            let weight = 1 - exp(-seconds / timeConstant)
            bytesPerSecond += weight * (instant - bytesPerSecond)
        }
        (self.lastBytes, self.lastTime) = (bytes, time)
    }

    /// Forgets the history (a paused task has no speed).
    mutating func reset() {
        self = SpeedMeter(timeConstant: timeConstant)
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
