import Foundation
import Testing
@testable import Tessera
import TesseraTesting

@Suite(.timeLimit(.minutes(2))) struct ManagerCacheTests {
    /// A fixture whose segments carry their SHA-256, so the default cache key is content-addressed.
    func hashedFixture(_ harness: ManagerHarness, key: String, manifestOrigin: LoopbackOrigin, segmentKey: String = "shared") -> Fixture {
        let size: Int64 = 50_000
        let segments = (0..<4).map { index -> FixtureDocument.Segment in
            let path = harness.segmentPath(segmentKey, 0, index, size: size)
            let digest = Checksum.compute(.sha256, bytes: harness.origin.content(at: path).bytes(0..<size)).hexDigest
            return .init(urls: [harness.origin.url(path).absoluteString], size: size, sha256: digest)
        }
        let document = FixtureDocument(title: key, outputs: [.init(name: "out-0.bin", segments: segments)])
        manifestOrigin.serve("/manifests/\(key).json", .bytes(Array(try! JSONEncoder().encode(document)), contentType: "application/json"))
        return Fixture(entity: FixtureEntity(key: key, manifestURL: manifestOrigin.url("/manifests/\(key).json").absoluteString), document: document)
    }

    @Test func aSecondEntityWhoseSegmentsAreCachedMakesNoRequestToTheOrigin() async throws {
        try await withManager(cache: true) { harness in
            try await withLoopbackOrigin { manifests in
                let first = hashedFixture(harness, key: "first", manifestOrigin: manifests)
                try await harness.manager.start(first.entity)
                await harness.waitForState(first.id, .completed)
                #expect(harness.cache?.entryCount == 4)
                harness.origin.resetCounters()
                let second = hashedFixture(harness, key: "second", manifestOrigin: manifests)
                try await harness.manager.start(second.entity)
                await harness.waitForState(second.id, .completed)
                #expect(harness.origin.totalRequests == 0, "every segment came from the cache")
                #expect(harness.outputsMatch(second))
            }
        }
    }

    @Test func startCacheThenStartCompletesWithTheOriginGone() async throws {
        try await withLoopbackOrigin { origin in
            let harness = try ManagerHarness(origin: origin, cache: true)
            let fixture = harness.fixture("prefetch", segments: 5, size: 30_000)
            let cached = try await harness.manager.perform(.startCache(fixture.entity))
            #expect(cached.task?.mode == .cacheOnly)
            await harness.waitForState(fixture.id, .completed)
            #expect(!FileManager.default.fileExists(atPath: harness.outputPath(fixture.entity, 0)), "cache only: no output")
            #expect(harness.cache?.entryCount == 5)
            try await origin.shutdown()
            // The origin is gone: the stored manifest and the cache are all there is.
            let started = try #require(try await harness.manager.perform(.start(fixture.entity)).task)
            #expect(started.mode == .download)
            await harness.waitForState(fixture.id, .completed)
            #expect(harness.outputsMatch(fixture))
            await harness.tearDown()
        }
    }

    @Test func aCorruptEntryIsEvictedAndFetchedAgain() async throws {
        try await withManager(cache: true) { harness in
            try await withLoopbackOrigin { manifests in
                let first = hashedFixture(harness, key: "one", manifestOrigin: manifests)
                try await harness.manager.start(first.entity)
                await harness.waitForState(first.id, .completed)
                // Flip one byte of one entry (same size: only the checksum can tell).
                let key = first.entity.cacheKey(for: SegmentLocation(
                    outputIndex: 0, segmentIndex: 2, outputName: "out-0.bin",
                    segment: DownloadSegment(url: URL(string: first.document.outputs[0].segments[2].urls[0])!,
                                             checksum: try Checksum(.sha256, hex: first.document.outputs[0].segments[2].sha256!))))
                let entry = try #require(harness.cache?.lookup(key))
                var bytes = fileBytes(entry.path)
                bytes[100] ^= 0xFF
                // Write a new file (not in place: the output shares the inode of a linked entry).
                try FileManager.default.removeItem(atPath: entry.path)
                try Data(bytes).write(to: URL(fileURLWithPath: entry.path))
                harness.origin.resetCounters()
                let second = hashedFixture(harness, key: "two", manifestOrigin: manifests)
                try await harness.manager.start(second.entity)
                await harness.waitForState(second.id, .completed)
                #expect(harness.origin.totalRequests == 1, "only the corrupt segment is fetched again")
                #expect(harness.origin.requestCount(for: harness.segmentPath("shared", 0, 2, size: 50_000)) == 1)
                #expect(harness.outputsMatch(second))
                #expect(harness.cache?.lookup(key) != nil, "the fresh copy is cached again")
            }
        }
    }

    @Test func startCacheWithoutACacheIsRefused() async throws {
        try await withManager { harness in
            let fixture = harness.fixture("no-cache")
            let error = await #expect(throws: DownloadError.self) { try await harness.manager.startCache(fixture.entity) }
            #expect(error?.code == .invalidState)
        }
    }
}
