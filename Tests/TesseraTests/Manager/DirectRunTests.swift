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

    /// A shutdown while the transfer runs without a task: the next manager on the same store
    /// finds the task interrupted with its bytes and finishes it with the rest.
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

            harness.origin.clearFaults(at: path)
            let second = DownloadTaskManager(configuration: configuration, engine: harness.engine, store: store)
            try await second.restore()
            let done = await second.waitForState(entity.taskID, .completed, timeout: .seconds(20))
            #expect(done?.state == .completed, "\(String(describing: done?.state)) \(String(describing: done?.error))")
            let ranges = harness.origin.requests(for: path).map { $0.header("Range") ?? "-" }
            #expect(ranges.count == 2 && ranges[0] == "-" && ranges[1] != "-", "\(ranges)")
            #expect(await harness.origin.content(at: path).verifyFile(atPath: harness.root.file("cut.bin"), size: size))
            await second.shutdown()
        }
    }
}
