import Foundation
import Testing
@testable import Tessera
import TesseraTesting

@Suite(.timeLimit(.minutes(2))) struct ManagerCommandTests {
    @Test func startReturnsTheTaskAndCheckFindsIt() async throws {
        try await withManager { harness in
            let fixture = harness.fixture("cmd-start", segments: 3)
            let result = try await harness.manager.perform(.start(fixture.entity))
            let started = try #require(result.task)
            #expect(started.id == fixture.id)
            #expect(started.title == "fixture cmd-start")
            await harness.waitForState(fixture.id, .completed)
            let checked = try #require(try await harness.manager.perform(.check(fixture.id)).task)
            #expect(checked.state == .completed)
            #expect(checked.title == "Fixture cmd-start", "the manifest's title once resolved")
            #expect(try await harness.manager.perform(.check(DownloadTaskID(entityType: "fixture", entityKey: "nope"))).task == nil)
        }
    }

    @Test func addingAKnownEntityReturnsTheSameTaskAndDoesNoMoreWork() async throws {
        try await withManager { harness in
            let fixture = harness.fixture("dup", segments: 4)
            let first = try await harness.manager.start(fixture.entity)
            let again = try await harness.manager.start(FixtureEntity(key: "dup", manifestURL: fixture.entity.payload.manifestURL))
            #expect(first.id == again.id)
            await harness.waitForState(fixture.id, .completed)
            _ = try await harness.manager.start(fixture.entity)
            // Starting a completed task again fetches nothing: absence, which only watching the
            // origin for a while can show.
            let requests = harness.origin.totalRequests
            #expect(await consistently(for: .milliseconds(100)) { harness.origin.totalRequests == requests })
            #expect(await harness.manager.checkAll().count == 1)
            #expect(harness.origin.requestCount(for: "/manifests/dup.json") == 1)
            for segment in 0..<4 {
                #expect(harness.origin.requestCount(for: harness.segmentPath("dup", 0, segment, size: 10_000)) == 1)
            }
        }
    }

    @Test func stopPausesADownloadingTaskAndResumeLosesNoFinishedSegment() async throws {
        try await withManager(configure: { $0.maxConcurrentSegments = 2 }) { harness in
            let fixture = harness.fixture("pause", segments: 6, size: 600_000)
            let path = { (segment: Int) in harness.segmentPath("pause", 0, segment, size: 600_000) }
            // Segments 2 and 3 stop sending at 300,000 bytes, so the pause lands mid-segment.
            harness.origin.inject(.stall(.seconds(60), afterBytes: 300_000), at: path(2))
            harness.origin.inject(.stall(.seconds(60), afterBytes: 300_000), at: path(3))
            try await harness.manager.start(fixture.entity)
            await harness.waitFor(fixture.id) { $0.segmentsDone == 2 && $0.bytesDone >= 2 * 600_000 + 2 * 300_000 }
            let paused = try #require(try await harness.manager.perform(.stop(fixture.id)).task)
            #expect(paused.state == .paused)
            #expect(paused.bytesDone >= 1_800_000, "in-flight bytes are kept")
            let requestsWhilePaused = harness.origin.totalRequests
            // Absence: only watching the origin for a while shows that nothing more is asked for.
            #expect(await consistently(for: .milliseconds(300)) { harness.origin.totalRequests == requestsWhilePaused },
                "a paused task sends nothing")
            harness.origin.clearFaults()
            try await harness.manager.perform(.resume(fixture.id))
            await harness.waitForState(fixture.id, .completed)
            #expect(harness.outputsMatch(fixture))
            // Finished segments were fetched once; the two in flight continued where they stopped.
            for segment in [0, 1, 4, 5] { #expect(harness.origin.requestCount(for: path(segment)) == 1) }
            for segment in [2, 3] {
                let requests = harness.origin.requests(for: path(segment))
                #expect(requests.count == 2)
                #expect(requests.last?.header("Range") == "bytes=300000-")
                #expect(requests.last?.header("If-Range") != nil)
                #expect(harness.origin.bytesServed(for: path(segment)) == 600_000)
            }
        }
    }

    @Test func stopWorksForWaitingTasksToo() async throws {
        try await withManager(configure: { $0.maxConcurrentTasks = 1 }) { harness in
            let slow = harness.fixture("slow", segments: 1, size: 2_000_000)
            harness.origin.inject(.throttle(bytesPerSecond: 1_000_000), at: harness.segmentPath("slow", 0, 0, size: 2_000_000))
            let queued = harness.fixture("queued", segments: 1)
            try await harness.manager.start(slow.entity)
            #expect(try await harness.manager.start(queued.entity).state == .waiting)
            #expect(await harness.manager.stop(queued.id)?.state == .paused)
            await harness.waitForState(slow.id, .completed)
            // The slot is free now; only watching the paused task for a while shows it stays put.
            #expect(await consistently(for: .milliseconds(100)) { await harness.manager.check(queued.id)?.state == .paused },
                "a paused task is not started by a free slot")
            #expect(harness.origin.requestCount(for: "/manifests/queued.json") == 0)
        }
    }

    @Test func removeForgetsTheTaskAndItsPartialFiles() async throws {
        try await withManager { harness in
            let fixture = harness.fixture("remove", segments: 4, size: 500_000)
            for segment in 0..<4 {
                harness.origin.inject(.throttle(bytesPerSecond: 1_000_000), at: harness.segmentPath("remove", 0, segment, size: 500_000))
            }
            try await harness.manager.start(fixture.entity)
            await harness.waitFor(fixture.id) { $0.bytesDone > 100_000 }
            let removed = try #require(try await harness.manager.perform(.remove(fixture.id)).task)
            #expect(removed.state == .removed)
            #expect(await harness.manager.check(fixture.id) == nil)
            func leftovers() -> [String] {
                ((try? FileManager.default.subpathsOfDirectory(atPath: harness.root.path)) ?? [])
                    .filter { $0.hasSuffix(".part") || $0.hasSuffix(".seg") }
            }
            #expect(await harness.eventually { leftovers().isEmpty }, "\(leftovers())")
            #expect(await harness.sawEvent { if case .taskRemoved(let id) = $0 { return id == fixture.id } else { return false } })
        }
    }

    @Test func removeWithDeletingFilesDeletesTheOutputs() async throws {
        try await withManager { harness in
            let fixture = harness.fixture("remove-done", outputs: 2, segments: 2)
            try await harness.manager.start(fixture.entity)
            await harness.waitForState(fixture.id, .completed)
            #expect(FileManager.default.fileExists(atPath: harness.outputPath(fixture.entity, 0)))
            await harness.manager.remove(fixture.id)
            #expect(await harness.sawEvent { if case .taskRemoved(let id) = $0 { return id == fixture.id } else { return false } })
            // The files go in the background after that; that the outputs are not among them
            // only watching them for a while can show.
            #expect(await consistently(for: .milliseconds(100)) { FileManager.default.fileExists(atPath: harness.outputPath(fixture.entity, 0)) },
                "outputs stay by default")
            let second = harness.fixture("remove-delete", outputs: 2, segments: 2)
            try await harness.manager.start(second.entity)
            await harness.waitForState(second.id, .completed)
            try await harness.manager.perform(.remove(second.id, deletingFiles: true))
            // (The outputs go one after the other: each is waited for.)
            for output in 0..<2 {
                #expect(await harness.eventually { !FileManager.default.fileExists(atPath: harness.outputPath(second.entity, output)) }, "output \(output)")
            }
        }
    }

    @Test func stopAllAndStartAll() async throws {
        try await withManager(configure: { $0.maxConcurrentTasks = 2 }) { harness in
            let fixtures = (0..<4).map { harness.fixture("all-\($0)", segments: 2, size: 300_000) }
            for fixture in fixtures {
                // Each segment takes a second: every task is still unfinished when stopAll comes,
                // on a loaded machine too (at 1.5 MB/s the first one once finished before it).
                for segment in 0..<2 {
                    harness.origin.inject(.throttle(bytesPerSecond: 300_000), at: harness.segmentPath(fixture.entity.entityKey, 0, segment, size: 300_000))
                }
                try await harness.manager.start(fixture.entity)
            }
            await harness.waitFor(fixtures[0].id) { $0.state == .downloading }
            let stopped = try await harness.manager.perform(.stopAll)
            guard case .tasks(let infos) = stopped else { Issue.record("stopAll returns tasks"); return }
            #expect(infos.count == 4)
            for fixture in fixtures { #expect(await harness.manager.check(fixture.id)?.state == .paused) }
            guard case .tasks(let restarted) = try await harness.manager.perform(.startAll) else { return }
            #expect(restarted.count == 4)
            for fixture in fixtures { await harness.waitForState(fixture.id, .completed) }
            for fixture in fixtures { #expect(harness.outputsMatch(fixture)) }
        }
    }

    @Test func checkGroupAndCheckAllGroups() async throws {
        try await withManager { harness in
            let a = harness.fixture("g-a", group: "first"), b = harness.fixture("g-b", group: "first")
            let c = harness.fixture("g-c", group: "second"), loner = harness.fixture("g-none")
            for fixture in [a, b, c, loner] { try await harness.manager.start(fixture.entity) }
            for fixture in [a, b, c, loner] { await harness.waitForState(fixture.id, .completed) }
            let groups = await harness.manager.checkAllGroups()
            #expect(groups.map(\.key) == ["first", "second"])
            #expect(groups[0].children.map(\.id) == [a.id, b.id])
            guard case .group(let second) = try await harness.manager.perform(.checkGroup("second")) else { return }
            #expect(second?.children.map(\.id) == [c.id])
            #expect(second?.state == .completed)
            #expect(await harness.manager.checkGroup("missing") == nil)
            // A group disappears with its last child.
            await harness.manager.remove(c.id)
            #expect(await harness.manager.checkGroup("second") == nil)
            #expect(await harness.sawEvent { if case .groupRemoved(let key) = $0 { return key == "second" } else { return false } })
        }
    }

    @Test func aRestartedTaskJumpsAheadOfTheQueue() async throws {
        try await withManager(configure: { $0.maxConcurrentTasks = 1 }) { harness in
            let blocker = harness.fixture("blocker", segments: 1, size: 1_000_000)
            harness.origin.inject(.throttle(bytesPerSecond: 2_000_000), at: harness.segmentPath("blocker", 0, 0, size: 1_000_000))
            let queued = (0..<3).map { harness.fixture("q\($0)") }
            try await harness.manager.start(blocker.entity)
            for fixture in queued { try await harness.manager.start(fixture.entity) }
            // q2 is paused and restarted: it must run before q0 and q1.
            await harness.manager.stop(queued[2].id)
            try await harness.manager.resume(queued[2].id)
            #expect(await harness.manager.check(queued[2].id)!.weight > (await harness.manager.check(queued[0].id)!.weight))
            for fixture in queued { await harness.waitForState(fixture.id, .completed) }
            let order = harness.origin.requests.map(\.path).filter { $0.hasPrefix("/manifests/q") }
            #expect(order == ["/manifests/q2.json", "/manifests/q0.json", "/manifests/q1.json"])
        }
    }

    @Test func anEntityWithoutAParserIsRefused() async throws {
        final class Mute: DownloadBaseEntity, @unchecked Sendable {}
        try await withManager { harness in
            await #expect(throws: DownloadError.self) { try await harness.manager.start(Mute(entityKey: "m")) }
        }
    }

    @Test func aDestinationOutsideTheRootIsRefused() async throws {
        final class Escaping: DownloadBaseEntity, DownloadParserProtocol, @unchecked Sendable {
            func resolve(in context: ResolveContext) async throws -> DownloadManifest { DownloadManifest(outputs: []) }
        }
        try await withManager { harness in
            let error = await #expect(throws: DownloadError.self) {
                try await harness.manager.start(Escaping(entityKey: "e", destinationDirectory: "../../etc"))
            }
            #expect(error?.code == .unsafePath)
        }
    }
}
