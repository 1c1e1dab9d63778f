import Foundation
import MetricsTestKit
import Testing
import Tessera
import TesseraTesting

/// The engine and the cache report through the swift-metrics factory they are given (no global
/// bootstrap), with the names the daemon's `/metrics` exports.
@Suite(.timeLimit(.minutes(2))) struct LibraryMetricsTests {
    let directory = TemporaryDirectory("metrics")

    @Test func theEngineCountsBytesTransfersByOutcomeAndTheirDurations() async throws {
        let metrics = TestMetrics()
        var configuration = CurlEngine.Configuration.forTests()
        configuration.metricsFactory = metrics
        let engine = try CurlEngine(configuration: configuration)
        try await withLoopbackOrigin { origin in
            defer { directory.cleanUp() }
            // Made once, when the engine starts: at zero before any transfer.
            #expect(try metrics.expectCounter("tessera_transfers_total").totalValue == 0)
            _ = try await engine.transfer(.download(origin.url("/bytes/100000/a.bin"), to: directory.file("a.bin")))
            let dropped = "/bytes/100000/b.bin"
            origin.inject(.dropConnection(afterBytes: 1000), at: dropped)
            await #expect(throws: DownloadError.self) {
                try await engine.transfer(.download(origin.url(dropped), to: directory.file("b.bin")))
            }
            let slow = "/bytes/50000000/slow.bin"
            origin.inject(.throttle(bytesPerSecond: 1_000_000), at: slow)
            let started = Atomic(false)
            let task = Task {
                try await engine.transfer(.download(origin.url(slow), to: directory.file("slow.bin"))) { progress in
                    if progress.bytesWritten > 10_000 { started.set(true) }
                }
            }
            #expect(await eventually { started.value })
            task.cancel()
            _ = await task.result
        }
        await engine.shutdown()
        let statistics = engine.statistics
        #expect(try metrics.expectCounter("tessera_transfers_total").totalValue == 3)
        #expect(Int(try metrics.expectCounter("tessera_transfers_total").totalValue) == statistics.finishedTransfers)
        #expect(try metrics.expectCounter("tessera_engine_received_bytes_total").totalValue == statistics.bytesReceived)
        #expect(statistics.bytesReceived > 110_000, "the whole file, what came before the drop and before the cancel")
        for (outcome, count) in [("completed", 1), ("failed", 1), ("cancelled", 1)] {
            #expect(try metrics.expectCounter("tessera_transfer_outcomes_total", [("outcome", outcome)]).totalValue == Int64(count), "\(outcome)")
        }
        let durations = try metrics.expectTimer("tessera_transfer_duration_seconds").values
        #expect(durations.count == 3)
        #expect(durations.allSatisfy { $0 > 0 && $0 < 60_000_000_000 })
    }

    @Test func theCacheCountsHitsAndMisses() throws {
        defer { directory.cleanUp() }
        let metrics = TestMetrics()
        let cache = try SegmentCache(directory: directory.file("c"), metricsFactory: metrics)
        let source = directory.file("s.bin")
        #expect(FileManager.default.createFile(atPath: source, contents: Data(repeating: 7, count: 100)))
        #expect(cache.lookup("k") == nil)
        try cache.insert("k", from: source)
        #expect(cache.lookup("k") != nil)
        #expect(cache.lookup("k", expectedSize: 99) == nil, "a wrong size is a miss (and evicts)")
        #expect(try metrics.expectCounter("tessera_cache_hits_total").totalValue == 1)
        #expect(try metrics.expectCounter("tessera_cache_misses_total").totalValue == 2)
        #expect(cache.lookupCounts == (hits: 1, misses: 2))
    }
}
