import Testing
@testable import Tessera

/// The network probe's waits, without a clock.
@Suite struct ProbeBackoffTests {
    @Test func roundsThatReachNothingDoubleTheWaitUpToTheMaximum() {
        var backoff = ProbeBackoff(initial: .seconds(1), maximum: .seconds(5))
        #expect(backoff.delay == .seconds(1))
        var waits: [Duration] = []
        for _ in 0..<5 {
            backoff.roundEnded(reached: false)
            waits.append(backoff.delay)
        }
        #expect(waits == [.seconds(2), .seconds(4), .seconds(5), .seconds(5), .seconds(5)])
    }

    @Test func aRoundThatReachesAHostStartsOver() {
        var backoff = ProbeBackoff(initial: .milliseconds(250), maximum: .seconds(60))
        backoff.roundEnded(reached: false)
        backoff.roundEnded(reached: false)
        #expect(backoff.delay == .seconds(1))
        backoff.roundEnded(reached: true)
        #expect(backoff.delay == .milliseconds(250))
    }
}
