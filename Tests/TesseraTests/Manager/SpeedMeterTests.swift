import Foundation
import Testing
@testable import Tessera

/// The speed and ETA every front-end shows, as a value: samples in, bytes per second out.
@Suite struct SpeedMeterTests {
    let start = ContinuousClock.now

    func at(_ seconds: Double) -> ContinuousClock.Instant { start + .milliseconds(Int64(seconds * 1000)) }

    @Test func aSteadyRateIsKnownAfterTheFirstIntervalAndStays() {
        var meter = SpeedMeter()
        meter.sample(bytes: 0, at: at(0))
        #expect(meter.bytesPerSecond == 0)
        meter.sample(bytes: 200_000, at: at(0.2))
        #expect(abs(meter.bytesPerSecond - 1_000_000) < 1, "known after one tick, well within the first second")
        for tick in 2...20 { meter.sample(bytes: Int64(tick) * 200_000, at: at(Double(tick) * 0.2)) }
        #expect(abs(meter.bytesPerSecond - 1_000_000) < 1)
        let eta = meter.eta(remaining: 30_000_000)
        #expect(eta == .seconds(30))
    }

    @Test func bytesCountedFromAnotherEpochAreNoSpeed() {
        var meter = SpeedMeter()
        meter.sample(bytes: 0, at: at(0), epoch: 1)
        // A run starts over and finds 100 MB on disk: a new epoch, not 100 MB in 0.2 s.
        meter.sample(bytes: 100_000_000, at: at(0.2), epoch: 2)
        #expect(meter.bytesPerSecond == 0)
        meter.sample(bytes: 100_200_000, at: at(0.4), epoch: 2)
        #expect(abs(meter.bytesPerSecond - 1_000_000) < 1)
        // Bytes dropped (a bad segment) in the same epoch: no negative speed, no jump.
        meter.sample(bytes: 50_000_000, at: at(0.6), epoch: 2)
        #expect(abs(meter.bytesPerSecond - 1_000_000) < 1)
        meter.sample(bytes: 50_200_000, at: at(0.8), epoch: 2)
        #expect(abs(meter.bytesPerSecond - 1_000_000) < 1)
    }

    @Test func oneFastIntervalMovesTheAverageByItsShareOfTime() {
        func after(burst seconds: Double) -> Double {
            var meter = SpeedMeter()
            meter.sample(bytes: 0, at: at(0))
            meter.sample(bytes: 1_000_000, at: at(1))  // 1 MB/s
            // Then `seconds` at 10 MB/s.
            meter.sample(bytes: 1_000_000 + Int64(seconds * 10_000_000), at: at(1 + seconds))
            return meter.bytesPerSecond
        }
        let short = after(burst: 0.2), long = after(burst: 2)
        #expect(short > 1_000_000 && short < long && long < 10_000_000, "\(short) \(long)")
        // Sampled twice as often, the same burst ends at about the same average.
        var often = SpeedMeter()
        often.sample(bytes: 0, at: at(0))
        often.sample(bytes: 1_000_000, at: at(1))
        often.sample(bytes: 2_000_000, at: at(1.1))
        often.sample(bytes: 3_000_000, at: at(1.2))
        #expect(abs(often.bytesPerSecond - short) < short * 0.02, "\(often.bytesPerSecond) \(short)")
    }

    @Test func aPausedMeterStartsOver() {
        var meter = SpeedMeter()
        meter.sample(bytes: 0, at: at(0))
        meter.sample(bytes: 500_000, at: at(0.5))
        meter.reset()
        #expect(meter.bytesPerSecond == 0 && meter.eta(remaining: 1000) == nil)
        meter.sample(bytes: 500_000, at: at(10))
        meter.sample(bytes: 700_000, at: at(10.5))
        #expect(abs(meter.bytesPerSecond - 400_000) < 1)
    }
}
