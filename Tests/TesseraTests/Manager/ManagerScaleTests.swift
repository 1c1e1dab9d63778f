import Foundation
import Testing
@testable import Tessera
import TesseraTesting

/// An entity that needs no manifest request: its one segment is its key's URL.
final class SingleSegmentEntity: PayloadEntity<String>, DownloadParserProtocol, @unchecked Sendable {
    override class var entityType: String { "single" }

    func resolve(in context: ResolveContext) async throws -> DownloadManifest {
        let url = URL(string: payload)!
        return DownloadManifest(outputs: [DownloadOutput(name: url.lastPathComponent, segments: [DownloadSegment(url: url, expectedSize: 1000)])])
    }
}

@Suite(.timeLimit(.minutes(3))) struct ManagerScaleTimingTests {
    /// Measured in a process of its own (see `tessera-test-helper scale`), and in the timing
    /// phase of `make test`, so neither this process's tests nor other processes compete.
    @Test func aManagerWithTenThousandQueuedTasksStartsFastAndStaysSmall() async throws {
        let figures = try await runTestHelper(["scale", "10000"])
        print("SCALE \(figures)")
        let first = try #require(figures["firstTransferSeconds"] as? Double)
        let queuedRSS = try #require(figures["queuedRSS"] as? Int64)
        let runningRSS = try #require(figures["runningRSS"] as? Int64)
        let streamedFirst = try #require(figures["streamedFirstTransferSeconds"] as? Double)
        let streamedRSS = try #require(figures["streamedRSS"] as? Int64)
        #expect(first >= 0 && first < 0.1, "the first transfer started \(first) s after startAll")
        #expect(queuedRSS < 150 << 20, "\(queuedRSS >> 20) MiB with 10,000 queued tasks")
        #expect(runningRSS < 150 << 20, "\(runningRSS >> 20) MiB while running")
        // Adding one by one competes with the first runners for the manager: reported, bounded loosely.
        #expect(streamedFirst >= 0 && streamedFirst < 1, "adding one by one, the first transfer started after \(streamedFirst) s")
        #expect(streamedRSS < 150 << 20)
        #expect(figures["tasks"] as? Int == 10_000)
        // -j 3: at most three tasks hold a task slot (resolving, or with segments waiting); a
        // task whose one segment is in flight lets the next start (up to the 16 segment slots,
        // and as many again finishing their files without a slot).
        #expect((figures["resolvingTasks"] as? Int ?? 99) <= 3)
        #expect((figures["runningTasks"] as? Int ?? 99) <= 3 + 2 * 16)
    }
}
