import Foundation
import Testing
import Tessera
import TesseraTesting

/// Rate limits are wall-clock measurements: `make test` runs suites named `…TimingTests` on
/// their own, after the parallel phase, and one test at a time.
@Suite(.serialized, .timeLimit(.minutes(2))) struct EngineRateLimitTimingTests {
    /// With two engine threads the transfers are spread over both, and take from one budget.
    @Test(arguments: [1, 2])
    func theGlobalLimitHoldsWithinTenPercentOverFiveSeconds(threads: Int) async throws {
        var configuration = CurlEngine.Configuration.forTests()
        let rate: Int64 = 2 << 20
        configuration.globalRateLimit = rate
        configuration.threads = threads
        let engine = try CurlEngine(configuration: configuration)
        #expect(engine.threadCount == threads)
        try await withLoopbackOrigin { origin in
            // Four transfers share 2 MiB/s; 10 MiB in all takes 5 s.
            let size: Int64 = (10 << 20) / 4
            let started = ContinuousClock.now
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<4 {
                    group.addTask {
                        let result = try await engine.transfer(TransferRequest(url: origin.url("/bytes/\(size)/r\(index)"), destination: .discard))
                        #expect(result.bytesReceived == size)
                    }
                }
                try await group.waitForAll()
            }
            let seconds = Double((ContinuousClock.now - started).nanoseconds) / 1e9
            let measured = Double(4 * size) / seconds
            #expect(abs(measured - Double(rate)) / Double(rate) < 0.10, "measured \(measured) B/s over \(seconds) s")
        }
    }

    @Test func aLateTransferGetsItsShareUnderTheGlobalLimit() async throws {
        var configuration = CurlEngine.Configuration.forTests()
        configuration.globalRateLimit = 2 << 20
        let engine = try CurlEngine(configuration: configuration)
        try await withLoopbackOrigin { origin in
            // Four long transfers take the whole limit (8 MiB each: 16 s together)...
            let long = (0..<4).map { index in
                Task { try await engine.transfer(TransferRequest(url: origin.url("/bytes/8388608/long\(index)"), destination: .discard)) }
            }
            #expect(await eventually { (0..<4).allSatisfy { origin.bytesServed(for: "/bytes/8388608/long\($0)") > 0 } },
                "the four long transfers are under way")
            // ...then a small one arrives: a fair share (a fifth, 400 KiB/s) brings 256 KiB in
            // under a second; starved, it would wait for a long one to finish.
            let started = ContinuousClock.now
            let small = try await engine.transfer(TransferRequest(url: origin.url("/bytes/262144/small"), destination: .discard))
            let seconds = Double((ContinuousClock.now - started).nanoseconds) / 1e9
            #expect(small.bytesReceived == 262_144)
            #expect(seconds < 2, "256 KiB next to four busy transfers took \(seconds) s")
            for task in long { task.cancel() }
        }
    }

    @Test func aSingleTransferHasItsOwnLimit() async throws {
        let engine = try CurlEngine(configuration: .forTests())
        try await withLoopbackOrigin { origin in
            var request = TransferRequest(url: origin.url("/bytes/2097152/own"), destination: .discard)
            request.rateLimit = 1 << 20
            let started = ContinuousClock.now
            _ = try await engine.transfer(request)
            let seconds = Double((ContinuousClock.now - started).nanoseconds) / 1e9
            #expect(seconds > 1.7 && seconds < 2.6, "2 MiB at 1 MiB/s took \(seconds) s")
        }
    }

    @Test func theGlobalLimitCanChangeWhileTransfersRun() async throws {
        var configuration = CurlEngine.Configuration.forTests()
        configuration.globalRateLimit = 100_000
        let engine = try CurlEngine(configuration: configuration)
        try await withLoopbackOrigin { origin in
            let started = ContinuousClock.now
            let task = Task { try await engine.transfer(TransferRequest(url: origin.url("/bytes/5000000/lift"), destination: .discard)) }
            // The transfer runs under the limit before it is lifted.
            #expect(await eventually { origin.bytesServed(for: "/bytes/5000000/lift") > 0 }, "the transfer is under way")
            engine.setGlobalRateLimit(nil)
            _ = try await task.value
            // At 100 kB/s the transfer would need 50 s; lifted, it finishes at once.
            #expect(ContinuousClock.now - started < .seconds(3))
        }
    }
}

extension Duration {
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
