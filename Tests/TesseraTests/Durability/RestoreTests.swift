import Foundation
import Testing
@testable import Tessera
import TesseraTesting

@Suite(.timeLimit(.minutes(2))) struct RestoreTests {
    /// A second manager over the same store and root, as a new process would be.
    func reopen(_ harness: ManagerHarness, store: any DownloadStore) -> DownloadTaskManager {
        var configuration = DownloadTaskManager.Configuration(downloadRoot: harness.root.path)
        configuration.sleeper = harness.sleeper
        let registry = EntityRegistry()
        registry.register(FixtureEntity.self)
        return DownloadTaskManager(configuration: configuration, engine: harness.engine, store: store, registry: registry)
    }

    /// Whether the journal on disk of task `id`, under the download root `root`, says that
    /// `bytes` bytes of `segment` (starting at `offset` in output 0) are there, with the version
    /// they belong to: what a later run continues from.
    func journalRecords(_ root: String, _ id: DownloadTaskID, segment: Int, at offset: Int64, bytes: Int64) -> Bool {
        let record = TaskJournal.load(from: FileLayout(root: root).journalBase(of: id))[0]
        return record?.partials[segment] != nil && (record?.ranges.contiguousCount(from: offset) ?? 0) >= bytes
    }

    @Test func aDownloadingTaskContinuesInANewManagerWithoutFetchingFinishedSegmentsAgain() async throws {
        try await withManager { harness in
            let store = InMemoryDownloadStore()
            let fixture = harness.fixture("restore", segments: 6, size: 400_000)
            for segment in 0..<6 {
                harness.origin.inject(.stall(.seconds(60), afterBytes: 200_000), at: harness.segmentPath("restore", 0, segment, size: 400_000), times: 1)
            }
            // The first manager fetches segments 0-2 and half of 3-5, then "dies".
            harness.origin.clearFaults()
            for segment in 3..<6 {
                harness.origin.inject(.stall(.seconds(60), afterBytes: 200_000), at: harness.segmentPath("restore", 0, segment, size: 400_000), times: 1)
            }
            var configuration = DownloadTaskManager.Configuration(downloadRoot: harness.root.path)
            configuration.maxConcurrentSegments = 3
            configuration.progressInterval = .milliseconds(50)
            let first = DownloadTaskManager(configuration: configuration, engine: try CurlEngine(configuration: .forTests()), store: store)
            try await first.start(fixture.entity)
            let reached = await first.waitFor(fixture.id, timeout: .seconds(20)) { $0.segmentsDone == 3 && $0.bytesDone >= 3 * 400_000 + 3 * 200_000 }
            #expect(reached?.segmentsDone == 3, "\(String(describing: reached))")
            // What the next manager continues from is what the journal has committed (every
            // 20 ms, from the engine's thread): wait until it holds the bytes in flight.
            #expect(await eventually {
                (3..<6).allSatisfy { journalRecords(harness.root.path, fixture.id, segment: $0, at: Int64($0) * 400_000, bytes: 200_000) }
            }, "the journal records the half-fetched segments")
            await first.flushStore()
            // Its engine goes away with the stalled transfers (the process died).
            await first.engine.shutdown()
            harness.origin.clearFaults()

            let stored = try await store.loadAll()
            #expect(stored.first?.task.state == .downloading)
            #expect(stored.first?.task.segmentsDone == 3)

            let second = reopen(harness, store: store)
            let report = try await second.restore()
            #expect(report.restored.map(\.id) == [fixture.id])
            #expect(report.skipped.isEmpty)
            #expect(await second.waitForState(fixture.id, .completed, timeout: .seconds(20))?.state == .completed)
            #expect(harness.outputsMatch(fixture))
            for segment in 0..<3 {
                #expect(harness.origin.requestCount(for: harness.segmentPath("restore", 0, segment, size: 400_000)) == 1)
            }
            for segment in 3..<6 {
                let requests = harness.origin.requests(for: harness.segmentPath("restore", 0, segment, size: 400_000))
                #expect(requests.count == 2)
                #expect(requests.last?.header("Range") == "bytes=200000-", "continued from the bytes on disk")
            }
            #expect(harness.origin.requestCount(for: "/manifests/restore.json") == 1, "the stored manifest was used")
            await second.shutdown()
            // What the "dead" first manager still holds goes too, now that the checks are done.
            await first.shutdown()
        }
    }

    @Test func pausedCompletedAndFailedTasksKeepTheirState() async throws {
        try await withManager { harness in
            let store = InMemoryDownloadStore()
            var configuration = DownloadTaskManager.Configuration(downloadRoot: harness.root.path)
            configuration.retry = RetryPolicy(maxAttempts: 1, baseDelay: .milliseconds(1), maxDelay: .milliseconds(1))
            let registry = EntityRegistry()
            registry.register(FixtureEntity.self)
            let first = DownloadTaskManager(configuration: configuration, engine: harness.engine, store: store, registry: registry)
            let done = harness.fixture("done"), paused = harness.fixture("paused"), broken = harness.fixture("broken")
            harness.origin.inject(.status(500), at: harness.segmentPath("broken", 0, 0, size: 10_000))
            try await first.start(done.entity)
            try await first.add(paused.entity)
            try await first.start(broken.entity)
            #expect(await first.waitForState(done.id, .completed, timeout: .seconds(20))?.state == .completed)
            #expect(await first.waitForState(broken.id, .failed, timeout: .seconds(20))?.state == .failed)
            await first.shutdown()

            let requests = harness.origin.totalRequests
            let second = reopen(harness, store: store)
            let report = try await second.restore()
            #expect(Set(report.restored.map(\.id)) == [done.id, paused.id, broken.id])
            #expect(await second.check(done.id)?.state == .completed)
            #expect(await second.check(done.id)?.outputs.allSatisfy { $0.isComplete } == true)
            #expect(await second.check(paused.id)?.state == .idle)
            #expect(await second.check(broken.id)?.state == .failed)
            #expect(await second.check(broken.id)?.error?.httpStatus == 500, "the error survives")
            // That restoring starts nothing can only be seen by watching the origin for a while.
            #expect(await consistently(for: .milliseconds(200)) { harness.origin.totalRequests == requests },
                "restoring starts nothing that was not running")
            await second.shutdown()
        }
    }

    @Test func entitiesOfUnknownTypesAreSkippedAndReported() async throws {
        let store = InMemoryDownloadStore()
        let record = EntityRecord(
            entityType: "vanished-plugin", entityKey: "k", variantKey: "", title: "t", aggregationKey: nil,
            groupType: "DownloadTaskGroup", destinationDirectory: "", payload: Data("{}".utf8))
        try await store.apply([.insert(StoredTask(entity: record, task: TaskRecord(id: record.taskID, state: .waiting, mode: .download, weight: 0, sequence: 1)))])
        let root = TemporaryDirectory("restore-unknown")
        defer { root.cleanUp() }
        let engine = try CurlEngine(configuration: .forTests())
        let manager = DownloadTaskManager(configuration: .init(downloadRoot: root.path), engine: engine, store: store)
        let report = try await manager.restore()
        #expect(report.restored.isEmpty)
        #expect(report.skipped.map(\.id) == [record.taskID])
        #expect(report.skipped.first?.error.code == .noMatchingEntity)
        #expect(try await store.loadAll().count == 1, "the stored task is left alone")
        await manager.shutdown()
        await engine.shutdown()
    }

    @Test func movingTheDownloadRootKeepsTasksValid() async throws {
        try await withManager { harness in
            let store = InMemoryDownloadStore()
            let fixture = harness.fixture("moved", segments: 4, size: 300_000)
            harness.origin.inject(.stall(.seconds(60), afterBytes: 100_000), at: harness.segmentPath("moved", 0, 3, size: 300_000))
            let oldRoot = TemporaryDirectory("old-root"), newRoot = TemporaryDirectory("new-root")
            defer { oldRoot.cleanUp(); newRoot.cleanUp() }
            var configuration = DownloadTaskManager.Configuration(downloadRoot: oldRoot.path)
            configuration.maxConcurrentSegments = 1
            configuration.progressInterval = .milliseconds(50)
            let registry = EntityRegistry()
            registry.register(FixtureEntity.self)
            let first = DownloadTaskManager(configuration: configuration, engine: harness.engine, store: store, registry: registry)
            try await first.start(fixture.entity)
            let reached = await first.waitFor(fixture.id, timeout: .seconds(20)) { $0.segmentsDone == 3 && $0.bytesDone >= 3 * 300_000 + 100_000 }
            #expect(reached?.segmentsDone == 3, "\(String(describing: reached))")
            await first.stop(fixture.id)
            // The first manager goes away before its directory moves: shutdown waits for the
            // stopped run to end (its journal written) and writes the store.
            await first.shutdown()
            #expect(journalRecords(oldRoot.path, fixture.id, segment: 3, at: 900_000, bytes: 100_000),
                "the journal records the half-fetched segment")
            harness.origin.clearFaults()

            // The whole download directory moves elsewhere.
            try FileManager.default.removeItem(atPath: newRoot.path)
            try FileManager.default.moveItem(atPath: oldRoot.path, toPath: newRoot.path)
            configuration.downloadRoot = newRoot.path
            let second = DownloadTaskManager(configuration: configuration, engine: harness.engine, store: store, registry: registry)
            try await second.restore()
            #expect(await second.check(fixture.id)?.state == .paused)
            try await second.resume(fixture.id)
            #expect(await second.waitForState(fixture.id, .completed, timeout: .seconds(20))?.state == .completed)
            let output = newRoot.file("fixtures/moved/out-0.bin")
            #expect(fileBytes(output) == harness.expectedBytes(of: fixture.document, output: 0))
            for segment in 0..<3 {
                #expect(harness.origin.requestCount(for: harness.segmentPath("moved", 0, segment, size: 300_000)) == 1)
            }
            #expect(harness.origin.requests(for: harness.segmentPath("moved", 0, 3, size: 300_000)).last?.header("Range") == "bytes=100000-")
            await second.shutdown()
        }
    }
}
