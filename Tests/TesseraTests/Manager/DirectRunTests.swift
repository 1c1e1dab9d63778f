import Foundation
import Testing
@testable import Tessera
import TesseraTesting

/// A fresh plain file's run starts without a task (``TaskRun/startDirectly(host:)``): what may,
/// and that a stop or a shutdown in the middle of its transfer hands the run to its task, which
/// keeps the bytes for the next start.
@Suite(.timeLimit(.minutes(2))) struct DirectRunTests {
    private static func plain(_ url: String = "http://127.0.0.1:1/a.bin") -> DownloadManifest {
        DownloadManifest(outputs: [DownloadOutput(name: "a.bin", segments: [DownloadSegment(url: URL(string: url)!)])])
    }

    /// A manager on an in-memory store that runs one task at a time and never ticks (a tick
    /// records a running task's bytes and writes what waits): what the store has is what the
    /// rules under test wrote.
    private static func oneTaskAtATimeWithoutTicks(_ harness: ManagerHarness) -> (DownloadTaskManager, InMemoryDownloadStore) {
        let store = InMemoryDownloadStore()
        var configuration = DownloadTaskManager.Configuration(downloadRoot: harness.root.path)
        configuration.maxConcurrentTasks = 1
        configuration.progressInterval = .seconds(3600)
        configuration.storeInterval = .seconds(3600)
        return (DownloadTaskManager(configuration: configuration, engine: harness.engine, store: store), store)
    }

    @Test func onlyAFileThatNeedsNothingButItsBytesStartsWithoutATask() {
        let plain = Self.plain()
        #expect(TaskRun.startsDirectly(plain, mode: .download, rateLimited: false, fenced: false))
        #expect(!TaskRun.startsDirectly(plain, mode: .cacheOnly, rateLimited: false, fenced: false))
        #expect(!TaskRun.startsDirectly(plain, mode: .download, rateLimited: true, fenced: false), "a rate limit sizes ranges")
        #expect(!TaskRun.startsDirectly(plain, mode: .download, rateLimited: false, fenced: true), "a fleet's fence may wait")

        var two = plain
        two.outputs.append(DownloadOutput(name: "b.bin", segments: [DownloadSegment(url: URL(string: "http://127.0.0.1:1/b.bin")!)]))
        #expect(!TaskRun.startsDirectly(two, mode: .download, rateLimited: false, fenced: false))

        var segments = plain
        segments.outputs[0] = DownloadOutput(
            name: "a.bin", segments: [DownloadSegment(url: URL(string: "http://127.0.0.1:1/1")!), DownloadSegment(url: URL(string: "http://127.0.0.1:1/2")!)])
        #expect(!TaskRun.startsDirectly(segments, mode: .download, rateLimited: false, fenced: false))

        var checked = plain
        checked.outputs[0].checksum = Checksum(.sha256, digest: [UInt8](repeating: 0, count: 32))
        #expect(!TaskRun.startsDirectly(checked, mode: .download, rateLimited: false, fenced: false), "a checksum is computed off the engine")

        var ranged = plain
        ranged.outputs[0] = DownloadOutput(
            name: "a.bin", segments: [DownloadSegment(url: URL(string: "http://127.0.0.1:1/a.bin")!, range: ByteRange(offset: 10, length: 5))])
        #expect(!TaskRun.startsDirectly(ranged, mode: .download, rateLimited: false, fenced: false))

        var unselected = plain
        unselected.outputs[0].isSelected = false
        #expect(!TaskRun.startsDirectly(unselected, mode: .download, rateLimited: false, fenced: false))
    }

    /// Stopped while its transfer runs without a task: the transfer is cancelled, the run's task
    /// records the bytes on disk, and the next start asks only for the rest.
    @Test func aPlainFileStoppedMidTransferResumesFromItsBytes() async throws {
        try await withManager { harness in
            let size: Int64 = 1_500_000
            let path = "/bytes/\(size)/stopped.bin"
            harness.origin.inject(.stall(.seconds(60), afterBytes: 600_000), at: path)
            let entity = DirectEntity(url: harness.origin.url(path))
            try await harness.manager.start(entity)
            let flowing = try #require(await harness.waitFor(entity.taskID) { $0.bytesDone >= 600_000 })
            #expect(flowing.state == .downloading)
            _ = await harness.manager.stop(entity.taskID)
            let paused = try #require(await harness.waitForState(entity.taskID, .paused))
            #expect(paused.bytesDone >= 600_000, "kept \(paused.bytesDone)")

            harness.origin.clearFaults(at: path)
            _ = try await harness.manager.resume(entity.taskID)
            let done = try #require(await harness.waitForState(entity.taskID, .completed))
            #expect(done.bytesDone == size)
            let requests = harness.origin.requests(for: path)
            #expect(requests.count == 2, "\(requests.map { $0.header("Range") ?? "-" })")
            let range = try #require(requests.last?.header("Range"))
            #expect(range.hasPrefix("bytes=") && !range.hasPrefix("bytes=0-"), "the second request asks for the rest: \(range)")
            #expect(await harness.origin.content(at: path).verifyFile(atPath: harness.root.file("stopped.bin"), size: size))
        }
    }

    /// A run without a task is recorded with what comes of it (``DownloadTaskManager/recordsLater(_:from:to:)``):
    /// a task the store has as waiting stays so in a batch written while its run downloads (a
    /// restart queues it as it would a resolving or downloading one), and its end is one record:
    /// completed, with its manifest. (A record is written as the task is when its batch is: a
    /// task added and started in the batch's time is stored as it is then.)
    @Test func aRunWithoutATaskIsRecordedAtItsEnd() async throws {
        try await withManager { harness in
            let (manager, store) = Self.oneTaskAtATimeWithoutTicks(harness)
            // The first task holds the only task slot while its manifest is held back: the plain
            // file waits in the queue, and is stored waiting.
            let first = harness.fixture("first").entity
            let manifestGate = LoopbackOrigin.Gate(), fileGate = LoopbackOrigin.Gate()
            harness.origin.inject(.hold(manifestGate, afterBytes: 0), at: "/manifests/first.json")
            let plain = DirectEntity(url: harness.origin.url("/bytes/40000/plain.bin"))
            harness.origin.inject(.hold(fileGate, afterBytes: 10_000), at: "/bytes/40000/plain.bin")
            _ = await manager.start(contentsOf: [first, plain])
            #expect(await manager.waitForState(first.taskID, .resolving, timeout: .seconds(20))?.state == .resolving)
            await manager.writeUnsaved()
            #expect(try await store.loadAll().first { $0.task.id == plain.taskID }?.task.state == .waiting)

            // It starts, without a task, once the first has its segments in flight; a batch
            // written while it downloads has it as before.
            manifestGate.open()
            #expect(await manager.waitFor(plain.taskID, timeout: .seconds(20)) { $0.bytesDone >= 10_000 }?.state == .downloading)
            await manager.writeUnsaved()
            let during = try #require(try await store.loadAll().first { $0.task.id == plain.taskID })
            #expect(during.task.state == .waiting)
            #expect(during.task.manifest == nil)

            fileGate.open()
            #expect(await manager.waitForState(plain.taskID, .completed, timeout: .seconds(20))?.state == .completed)
            await manager.writeUnsaved()
            let after = try #require(try await store.loadAll().first { $0.task.id == plain.taskID })
            #expect(after.task.state == .completed)
            #expect(after.task.manifest?.outputs.first?.name == "plain.bin")
            #expect(after.task.resolveCount == 1)
            #expect(await manager.waitForState(first.taskID, .completed, timeout: .seconds(20))?.state == .completed)
            await manager.shutdown()
            #expect(await harness.origin.content(at: "/bytes/40000/plain.bin").verifyFile(atPath: harness.root.file("plain.bin"), size: 40_000))
        }
    }

    /// Once fewer than ``DownloadTaskManager/storeTailBatchSize`` tasks wait to be launched, the
    /// changes go to the store in batches that small, not at the next full batch or tick: a
    /// list's last downloads run while what ended before them is written. Here, 80 small files
    /// and a last one held back, one at a time, with no tick: while the last one downloads, the
    /// store already has the files that ended before the queue went short.
    @Test func theLastDownloadsRunWhileWhatEndedBeforeIsWritten() async throws {
        #expect(!DownloadTaskManager.writesEarly(unsaved: DownloadTaskManager.storeBatchSize - 1, queued: 1_000))
        #expect(DownloadTaskManager.writesEarly(unsaved: DownloadTaskManager.storeBatchSize, queued: 1_000))
        #expect(!DownloadTaskManager.writesEarly(unsaved: DownloadTaskManager.storeTailBatchSize - 1, queued: 0))
        try await withManager { harness in
            let (manager, store) = Self.oneTaskAtATimeWithoutTicks(harness)
            let small = (0..<80).map { DirectEntity(url: harness.origin.url("/bytes/2000/s\($0).bin")) }
            let gate = LoopbackOrigin.Gate()
            let last = DirectEntity(url: harness.origin.url("/bytes/40000/last.bin"))
            harness.origin.inject(.hold(gate, afterBytes: 10_000), at: "/bytes/40000/last.bin")
            _ = await manager.start(contentsOf: small + [last])
            #expect(await manager.waitFor(last.taskID, timeout: .seconds(20)) { $0.bytesDone >= 10_000 }?.state == .downloading)
            // (The queue went short at the 18th launch: the 17 files before it had ended.)
            let written = await eventually(within: .seconds(20)) {
                let stored = (try? await store.loadAll()) ?? []
                return stored.count == 81 && stored.filter { $0.task.state == .completed }.count >= 17
            }
            let states = ((try? await store.loadAll()) ?? []).map(\.task.state)
            #expect(written, "\(states)")
            gate.open()
            #expect(await manager.waitForState(last.taskID, .completed, timeout: .seconds(20))?.state == .completed)
            await manager.shutdown()
            let final = try await store.loadAll()
            #expect(final.count == 81 && final.allSatisfy { $0.task.state == .completed })
        }
    }

    /// A shutdown while the transfer runs without a task: the next manager on the same store
    /// finds the task interrupted with its bytes and finishes it with the rest. The first
    /// shutdown leaves the work directory with the partial file; the second, with every task
    /// finished, removes it.
    @Test func aShutdownMidTransferLeavesThePlainFileToResume() async throws {
        try await withManager { harness in
            let size: Int64 = 1_500_000
            let path = "/bytes/\(size)/cut.bin"
            harness.origin.inject(.stall(.seconds(60), afterBytes: 600_000), at: path)
            let store = InMemoryDownloadStore()
            let configuration = DownloadTaskManager.Configuration(downloadRoot: harness.root.path)
            let first = DownloadTaskManager(configuration: configuration, engine: harness.engine, store: store)
            let entity = DirectEntity(url: harness.origin.url(path))
            try await first.start(entity)
            #expect(await first.waitFor(entity.taskID, timeout: .seconds(20)) { $0.bytesDone >= 600_000 }.map { $0.bytesDone >= 600_000 } == true)
            await first.shutdown()
            // The work directory keeps what the next run resumes from.
            let work = harness.root.file(".tessera/work")
            #expect(((try? FileManager.default.contentsOfDirectory(atPath: work)) ?? []).contains { $0.hasSuffix(".part") })

            harness.origin.clearFaults(at: path)
            let second = DownloadTaskManager(configuration: configuration, engine: harness.engine, store: store)
            try await second.restore()
            let done = await second.waitForState(entity.taskID, .completed, timeout: .seconds(20))
            #expect(done?.state == .completed, "\(String(describing: done?.state)) \(String(describing: done?.error))")
            let ranges = harness.origin.requests(for: path).map { $0.header("Range") ?? "-" }
            #expect(ranges.count == 2 && ranges[0] == "-" && ranges[1] != "-", "\(ranges)")
            #expect(await harness.origin.content(at: path).verifyFile(atPath: harness.root.file("cut.bin"), size: size))
            await second.shutdown()
            // Every task finished: nothing of Tessera's is left beside the file.
            #expect(!FileManager.default.fileExists(atPath: harness.root.file(".tessera")), "\((try? FileManager.default.subpathsOfDirectory(atPath: harness.root.path)) ?? [])")
        }
    }

    /// A process killed after a file was finished and moved into place, before the store recorded
    /// the task complete (or recorded the task at all): the next process finds the file by its
    /// partial file, which stays its second name until then, and neither fetches it again nor
    /// writes it again beside itself as `name.1`.
    @Test func aFileFinishedBeforeAKillIsNotFetchedAgainByTheNextRun() async throws {
        try await withManager { harness in
            let store = InMemoryDownloadStore()
            let frozen = FreezingStore(store)
            let configuration = DownloadTaskManager.Configuration(downloadRoot: harness.root.path)
            let killed = DownloadTaskManager(configuration: configuration, engine: harness.engine, store: frozen)
            // One task the store knows (flushed while its body stalls), one it never heard of.
            let known = DirectEntity(url: harness.origin.url("/bytes/40000/known.bin"))
            let unknown = DirectEntity(url: harness.origin.url("/bytes/30000/unknown.bin"))
            let gate = LoopbackOrigin.Gate()
            harness.origin.inject(.hold(gate, afterBytes: 10_000), at: "/bytes/40000/known.bin")
            try await killed.start(known)
            await killed.flushStore()
            // From here on nothing reaches the store, as if the process were killed before it did.
            frozen.freeze()
            gate.open()
            _ = await killed.start(contentsOf: [unknown])
            for entity in [known, unknown] {
                #expect(await killed.waitForState(entity.taskID, .completed, timeout: .seconds(20))?.state == .completed)
            }
            // "Killed": the first manager is abandoned without a shutdown (its store never hears of
            // the completions); the files are in place.
            #expect(fileSize(harness.root.file("known.bin")) == 40_000)
            #expect(fileSize(harness.root.file("unknown.bin")) == 30_000)
            let stored = try await store.loadAll()
            #expect(stored.map(\.task.id) == [known.taskID], "\(stored.map(\.task.id))")
            #expect(stored.allSatisfy { $0.task.state != .completed }, "\(stored.map(\.task.state))")

            let next = DownloadTaskManager(configuration: configuration, engine: harness.engine, store: store)
            try await next.restore()
            _ = await next.start(contentsOf: [unknown])
            for entity in [known, unknown] {
                let done = await next.waitForState(entity.taskID, .completed, timeout: .seconds(20))
                #expect(done?.state == .completed, "\(entity.taskID): \(String(describing: done?.state))")
                #expect(done?.outputs.first?.path == harness.root.file(entity === known ? "known.bin" : "unknown.bin"))
                // (Its size is the file's: the next run took the file as it is, and says so.)
                let size: Int64 = entity === known ? 40_000 : 30_000
                #expect(done?.bytesDone == size && done?.bytesTotal == size, "\(entity.taskID): \(String(describing: done?.bytesDone)) of \(String(describing: done?.bytesTotal))")
            }
            #expect(harness.origin.requestCount(for: "/bytes/40000/known.bin") == 1)
            #expect(harness.origin.requestCount(for: "/bytes/30000/unknown.bin") == 1)
            #expect(harness.root.files.sorted() == ["known.bin", "unknown.bin"], "no copy beside the files: \(harness.root.files)")
            #expect(await harness.origin.content(at: "/bytes/40000/known.bin").verifyFile(atPath: harness.root.file("known.bin"), size: 40_000))
            #expect(await harness.origin.content(at: "/bytes/30000/unknown.bin").verifyFile(atPath: harness.root.file("unknown.bin"), size: 30_000))
            await next.shutdown()
            let work = harness.root.file(".tessera/work")
            #expect(((try? FileManager.default.contentsOfDirectory(atPath: work)) ?? []).filter { $0.hasSuffix(".part") }.isEmpty)
            frozen.release()
        }
    }

    /// Only a fresh task whose partial file the start found linked looks for one (a look per
    /// file costs a path walk); a manager that never looked (no `restore`) has every fresh task
    /// look, and either way a finished file is found by its second name, never fetched again.
    @Test(arguments: [true, false])
    func aFreshTaskLooksForAFinishedFileUnlessTheStartFoundNone(restoring: Bool) async throws {
        try await withManager { harness in
            let configuration = DownloadTaskManager.Configuration(downloadRoot: harness.root.path)
            let first = DownloadTaskManager(configuration: configuration, engine: harness.engine)
            let finished = DirectEntity(url: harness.origin.url("/bytes/20000/finished.bin"))
            try await first.start(finished)
            #expect(await first.waitForState(finished.taskID, .completed, timeout: .seconds(20))?.state == .completed)
            await first.shutdown()
            // What a process killed before its store heard of the task leaves: the output, and
            // the partial file as its second name.
            // (A killed process never reached its shutdown, which took the empty work directory.)
            let part = FileLayout(root: harness.root.path).responseNamedPart(of: finished.taskID, output: 0)
            try FileManager.default.createDirectory(atPath: (part as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            #expect(link(harness.root.file("finished.bin"), part) == 0)

            let next = DownloadTaskManager(configuration: configuration, engine: harness.engine)
            if restoring { try await next.restore() }
            let other = DirectEntity(url: harness.origin.url("/bytes/10000/other.bin"))
            _ = await next.start(contentsOf: [finished, other])
            for entity in [finished, other] {
                #expect(await next.waitForState(entity.taskID, .completed, timeout: .seconds(20))?.state == .completed)
            }
            #expect(harness.origin.requestCount(for: "/bytes/20000/finished.bin") == 1, "found, not fetched again")
            #expect(harness.origin.requestCount(for: "/bytes/10000/other.bin") == 1)
            #expect(harness.root.files.sorted() == ["finished.bin", "other.bin"], "\(harness.root.files)")
            #expect(await harness.origin.content(at: "/bytes/20000/finished.bin").verifyFile(atPath: harness.root.file("finished.bin"), size: 20_000))
            await next.shutdown()
        }
    }

    /// A process killed after the store recorded a completion and before it let go of the
    /// output's partial file (its second name): the next start lets go of it; the output stays.
    @Test func aCompletedTasksLeftoverPartialFileGoesAtTheNextStart() async throws {
        try await withManager { harness in
            let store = InMemoryDownloadStore()
            let configuration = DownloadTaskManager.Configuration(downloadRoot: harness.root.path)
            let first = DownloadTaskManager(configuration: configuration, engine: harness.engine, store: store)
            let entity = DirectEntity(url: harness.origin.url("/bytes/20000/kept.bin"))
            try await first.start(entity)
            #expect(await first.waitForState(entity.taskID, .completed, timeout: .seconds(20))?.state == .completed)
            await first.shutdown()
            // What the killed process would have left: the partial file, a second name of the output.
            let part = FileLayout(root: harness.root.path).responseNamedPart(of: entity.taskID, output: 0)
            #expect(!FileManager.default.fileExists(atPath: part), "a shutdown lets go of it")
            // (A killed process never reached its shutdown, which took the empty work directory.)
            try FileManager.default.createDirectory(atPath: (part as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            #expect(link(harness.root.file("kept.bin"), part) == 0)

            let next = DownloadTaskManager(configuration: configuration, engine: harness.engine, store: store)
            try await next.restore()
            #expect(await eventually { !FileManager.default.fileExists(atPath: part) }, "the leftover goes")
            #expect(await next.check(entity.taskID)?.state == .completed)
            #expect(await harness.origin.content(at: "/bytes/20000/kept.bin").verifyFile(atPath: harness.root.file("kept.bin"), size: 20_000))
            #expect(harness.origin.requestCount(for: "/bytes/20000/kept.bin") == 1)
            await next.shutdown()
        }
    }
}

/// A store whose writes stop reaching `inner` once frozen: a write after that does not end
/// until the test lets go of the store (``release()``), and then fails, as one a killed process
/// had started (nothing the manager does after a write happens).
private final class FreezingStore: DownloadStore {
    let inner: InMemoryDownloadStore
    private struct State {
        var frozen = false
        var released = false
        var waiting: [CheckedContinuation<Void, Never>] = []
    }
    private let state = Locked(State())

    init(_ inner: InMemoryDownloadStore) {
        self.inner = inner
    }

    func freeze() { state.withLock { $0.frozen = true } }

    /// Ends the writes that wait (they fail, `inner` never hears of them), and every later one
    /// at once: a test lets go of what it started (a write left waiting forever holds its
    /// batch until the process exits, which LeakSanitizer reports).
    func release() {
        let waiting = state.withLock { state in
            state.released = true
            defer { state.waiting = [] }
            return state.waiting
        }
        for continuation in waiting { continuation.resume() }
    }

    func loadAll() async throws -> [StoredTask] { try await inner.loadAll() }

    func apply(_ changes: [StoreChange]) async throws {
        guard state.withLock({ $0.frozen }) else { return try await inner.apply(changes) }
        await withCheckedContinuation { continuation in
            let now = state.withLock { state in
                if !state.released { state.waiting.append(continuation) }
                return state.released
            }
            if now { continuation.resume() }
        }
        throw CancellationError()
    }
}
