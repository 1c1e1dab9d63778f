import Foundation
import Testing
import Tessera
import TesseraTesting

/// The origin's throttle, measured with a wall clock: `make test` runs suites named
/// `…TimingTests` on their own, after the parallel phase.
@Suite(.serialized, .timeLimit(.minutes(2))) struct OriginThrottleTimingTests {
    @Test("throttle(bytesPerSecond:) paces the body: 200 KB at 400 KB/s takes about 0.5 s")
    func throttle() async throws {
        try await withLoopbackOrigin { origin in
            let path = "/bytes/200000/throttle.bin"
            origin.inject(.throttle(bytesPerSecond: 400_000), at: path)
            let start = ContinuousClock.now
            let response = try origin.rawRequest(path)
            let elapsed = seconds(ContinuousClock.now - start)
            #expect(response.status == 200)
            #expect(response.body == OriginContent(path: path).bytes(0..<200_000))
            #expect(elapsed >= 0.4 && elapsed <= 1.0, "took \(elapsed) s")
        }
    }

    @Test("faults of different kinds combine: throttle + drop")
    func throttleAndDrop() async throws {
        try await withLoopbackOrigin { origin in
            let path = "/bytes/1000000/combined.bin"
            origin.inject(.throttle(bytesPerSecond: 200_000), at: path)
            origin.inject(.dropConnection(afterBytes: 100_000), at: path)
            let start = ContinuousClock.now
            let response = try origin.rawRequest(path)
            let elapsed = seconds(ContinuousClock.now - start)
            #expect(response.status == 200)
            #expect(response.closedEarly)
            #expect(response.body == OriginContent(path: path).bytes(0..<100_000))
            #expect(elapsed >= 0.4 && elapsed <= 1.2, "took \(elapsed) s")
            #expect(origin.bytesServed(for: path) == 100_000)
        }
    }
}
