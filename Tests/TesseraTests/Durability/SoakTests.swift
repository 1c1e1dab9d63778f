import Foundation
import Testing
import TesseraTesting

@testable import Tessera

/// The soak test (`make soak`; skipped unless `TESSERA_SOAK=1`): 10,000 segments over 20
/// entities, 5% of them with a fault (a dropped connection, a 500, a wrong length, a stall, a
/// 503 with `Retry-After`), in two rounds on one manager. Every output is byte-identical, and the
/// process's memory and open files are flat: after the second round, no more than after the
/// first (a warm-up) plus a small margin.
@Suite(.enabled(if: ProcessInfo.processInfo.environment["TESSERA_SOAK"] == "1"), .timeLimit(.minutes(10)))
struct SoakTests {
    static let entities = 20, segmentsPerEntity = 500, segmentSize: Int64 = 4_000

    @Test func tenThousandSegmentsWithFaultsLeaveMemoryAndFilesFlat() async throws {
        var engine = CurlEngine.Configuration.forTests()
        engine.lowSpeedTime = .seconds(1)
        try await withManager(engine: engine, configure: { configuration in
            configuration.retry.maxAttempts = 6
            configuration.maxConcurrentTasks = 4
            configuration.maxConcurrentSegments = 16
        }) { harness in
            var random = SplitMixRandom(seed: 2026)
            var faults = 0
            let fixtures = (0..<Self.entities).map { entity in
                harness.fixture("soak-\(entity)", segments: Self.segmentsPerEntity, size: Self.segmentSize)
            }
            for fixture in fixtures {
                for segment in 0..<Self.segmentsPerEntity where random.next() % 100 < 5 {
                    let path = harness.segmentPath(fixture.entity.entityKey, 0, segment, size: Self.segmentSize)
                    faults += 1
                    switch random.next() % 5 {
                    case 0: harness.origin.inject(.dropConnection(afterBytes: Self.segmentSize / 2), at: path, times: 1)
                    case 1: harness.origin.inject(.status(500), at: path, times: 1)
                    case 2: harness.origin.inject(.wrongContentLength(delta: 100), at: path, times: 1)
                    case 3: harness.origin.inject(.stall(.seconds(30), afterBytes: Self.segmentSize / 4), at: path, times: 1)
                    default: harness.origin.inject(.status(503, retryAfter: "1"), at: path, times: 1)
                    }
                }
            }
            // Round 1 (the warm-up): a quarter of the entities.
            let warmUp = fixtures.prefix(Self.entities / 4), rest = fixtures.dropFirst(Self.entities / 4)
            for fixture in warmUp { try await harness.manager.start(fixture.entity) }
            for fixture in warmUp {
                let done = await harness.waitForState(fixture.id, .completed, timeout: .seconds(240))
                #expect(done?.state == .completed, "\(String(describing: done?.error))")
            }
            let after1 = Usage.now()
            // Round 2: the other three quarters.
            for fixture in rest { try await harness.manager.start(fixture.entity) }
            for fixture in rest {
                let done = await harness.waitForState(fixture.id, .completed, timeout: .seconds(400))
                #expect(done?.state == .completed, "\(String(describing: done?.error))")
            }
            let after2 = Usage.now()
            for fixture in fixtures { #expect(harness.outputsMatch(fixture)) }
            print("SOAK segments=\(Self.entities * Self.segmentsPerEntity) faults=\(faults) "
                + "rss after warm-up=\(after1.rssMB) MB, at the end=\(after2.rssMB) MB; "
                + "open files after warm-up=\(after1.openFiles), at the end=\(after2.openFiles); "
                + "requests=\(harness.origin.totalRequests)")
            // Three times the segments of the warm-up: flat means no more than a little over it.
            #expect(after2.rssMB <= after1.rssMB + 40, "memory grew from \(after1.rssMB) MB to \(after2.rssMB) MB")
            #expect(after2.openFiles <= after1.openFiles + 8, "open files grew from \(after1.openFiles) to \(after2.openFiles)")
        }
    }

    /// This process's resident memory and open file descriptors.
    struct Usage {
        var rssMB: Int
        var openFiles: Int

        static func now() -> Usage {
            let statm = fileText("/proc/self/statm")
            let pages = statm.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
            let files = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd"))?.count ?? 0
            return Usage(rssMB: pages * Int(sysconf(Int32(_SC_PAGESIZE))) / 1_000_000, openFiles: files)
        }
    }
}
