import Foundation
import Synchronization
import Testing
@testable import Tessera
import TesseraTesting

@Suite struct ManagerLimitTests {
    @Test func neverMoreTasksRunningThanTheLimit() async throws {
        try await withManager(configure: { $0.maxConcurrentTasks = 3 }) { harness in
            let fixtures = (0..<10).map { harness.fixture("limit-\($0)", segments: 2, size: 100_000) }
            for fixture in fixtures {
                for segment in 0..<2 {
                    harness.origin.inject(.throttle(bytesPerSecond: 1_000_000), at: harness.segmentPath(fixture.entity.entityKey, 0, segment, size: 100_000))
                }
                try await harness.manager.start(fixture.entity)
            }
            for fixture in fixtures { await harness.waitForState(fixture.id, .completed) }
            let completions = { harness.log.all.filter { if case .taskStateChanged(let info, _) = $0 { return info.state == .completed } else { return false } }.count }
            #expect(await harness.eventually { completions() == 10 })
            // Replay the state changes: at no point were more than three running.
            var states: [DownloadTaskID: DownloadTaskState] = [:]
            var peak = 0
            for event in harness.log.all {
                guard case .taskStateChanged(let info, _) = event else { continue }
                states[info.id] = info.state
                peak = max(peak, states.values.filter(\.isRunning).count)
            }
            #expect(peak == 3)
        }
    }

    @Test func neverMoreSegmentTransfersThanTheLimit() async throws {
        var engine = CurlEngine.Configuration.forTests()
        engine.maxConnections = 64
        engine.maxConnectionsPerHost = 64
        try await withManager(engine: engine, configure: { $0.maxConcurrentSegments = 4; $0.maxConcurrentTasks = 3 }) { harness in
            let fixtures = (0..<3).map { harness.fixture("seg-\($0)", segments: 8, size: 100_000) }
            for fixture in fixtures {
                for segment in 0..<8 {
                    harness.origin.inject(.throttle(bytesPerSecond: 1_000_000), at: harness.segmentPath(fixture.entity.entityKey, 0, segment, size: 100_000))
                }
                try await harness.manager.start(fixture.entity)
            }
            for fixture in fixtures { await harness.waitForState(fixture.id, .completed) }
            // Manifests are fetched outside the segment limit; segments never exceed four.
            #expect(harness.origin.maxConcurrentConnections <= 4 + 3)
            #expect(harness.manager.limiter.peakInUse <= 4)
            // Three running tasks share the four slots (at most two each): several ran at once.
            #expect(harness.manager.limiter.peakInUse >= 2)
            #expect(harness.manager.limiter.inUse == 0)
        }
    }

    @Test func twoTasksNeedingTheSameSegmentShareOneTransfer() async throws {
        /// Entities whose segments are keyed by URL, so two of them share what they share.
        final class SharingEntity: FixtureEntityBase, @unchecked Sendable {
            override class var entityType: String { "sharing" }
            override func cacheKey(for segment: SegmentLocation) -> String { segment.segment.urls[0].absoluteString }
        }
        try await withManager { harness in
            let shared = "/bytes/400000/shared/common.bin"
            harness.origin.inject(.throttle(bytesPerSecond: 2_000_000), at: shared)
            var documents: [FixtureDocument] = []
            for key in ["one", "two"] {
                let document = FixtureDocument(title: key, outputs: [.init(name: "out-0.bin", segments: [
                    .init(urls: [harness.origin.url(shared).absoluteString], size: 400_000),
                    .init(urls: [harness.origin.url("/bytes/1000/\(key)/own.bin").absoluteString], size: 1000),
                ])])
                harness.serve(document, as: "share-\(key)")
                documents.append(document)
            }
            let one = SharingEntity(key: "one", manifestURL: harness.origin.url("/manifests/share-one.json").absoluteString)
            let two = SharingEntity(key: "two", manifestURL: harness.origin.url("/manifests/share-two.json").absoluteString)
            try await harness.manager.start(one)
            try await harness.manager.start(two)
            await harness.waitForState(one.taskID, .completed)
            await harness.waitForState(two.taskID, .completed)
            #expect(harness.origin.requestCount(for: shared) == 1)
            for (entity, document) in zip([one, two], documents) {
                #expect(fileBytes(harness.root.file("fixtures/\(entity.entityKey)/out-0.bin")) == harness.expectedBytes(of: document, output: 0))
            }
        }
    }
}

/// The fixture entity, open for subclassing in tests.
class FixtureEntityBase: PayloadEntity<FixtureEntityPayload>, DownloadParserProtocol, @unchecked Sendable {
    convenience init(key: String, manifestURL: String) {
        self.init(payload: FixtureEntityPayload(manifestURL: manifestURL), entityKey: key, destinationDirectory: "fixtures/\(key)")
    }

    func resolve(in context: ResolveContext) async throws -> DownloadManifest {
        try await FixtureEntity(key: entityKey, manifestURL: payload.manifestURL).resolve(in: context)
    }
}
