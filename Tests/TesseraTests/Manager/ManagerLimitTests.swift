import Foundation
import Testing
@testable import Tessera
import TesseraTesting

@Suite(.timeLimit(.minutes(2))) struct ManagerLimitTests {
    /// `-j 3`: at most three tasks hold a task slot (resolving, or downloading with segments
    /// still waiting for a slot); a task whose last segments are all in flight lets the next one
    /// start. Seen from outside: never more than three resolving at once, and tasks start in order.
    @Test func neverMoreTasksResolvingThanTheLimitAndTasksStartInOrder() async throws {
        try await withManager(configure: { $0.maxConcurrentTasks = 3 }) { harness in
            let fixtures = (0..<10).map { harness.fixture("limit-\($0)", segments: 2, size: 100_000) }
            for fixture in fixtures {
                harness.origin.inject(.throttle(bytesPerSecond: 2_000_000), at: "/manifests/\(fixture.entity.entityKey).json")
                try await harness.manager.start(fixture.entity)
            }
            for fixture in fixtures { await harness.waitForState(fixture.id, .completed) }
            let completions = { harness.log.all.filter { if case .taskStateChanged(let info, _) = $0 { return info.state == .completed } else { return false } }.count }
            #expect(await harness.eventually { completions() == 10 })
            // Replay the state changes: at no point were more than three resolving.
            var states: [DownloadTaskID: DownloadTaskState] = [:]
            var peak = 0
            var starts: [DownloadTaskID] = []
            for event in harness.log.all {
                guard case .taskStateChanged(let info, _) = event else { continue }
                states[info.id] = info.state
                if info.state == .resolving { starts.append(info.id) }
                peak = max(peak, states.values.filter { $0 == .resolving }.count)
            }
            #expect(peak <= 3)
            #expect(peak >= 2, "tasks resolved side by side")
            #expect(starts == fixtures.map(\.id), "started in the order added")
        }
    }

    @Test func neverMoreSegmentTransfersThanTheLimit() async throws {
        var engine = CurlEngine.Configuration.forTests()
        engine.maxConnections = 64
        engine.maxConnectionsPerHost = 64
        // (One engine thread reuses every idle connection, so the origin's open connections show
        // the slots in use; a second thread's idle ones would count beside them.)
        engine.threads = 1
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
            let slots = await harness.manager.segmentSlots
            #expect(slots.peak <= 4)
            #expect(slots.peak >= 2, "several segments ran at once")
            #expect(slots.inUse == 0, "every slot was given back")
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
