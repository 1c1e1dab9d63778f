import Foundation
import Testing
import TesseraTesting

@testable import Tessera

/// An entity whose payload lists `/bytes/…` paths: one output per path (`concatenated`), or all
/// of them as separate files of one output.
final class PathsEntity: PayloadEntity<[String]>, DownloadParserProtocol, @unchecked Sendable {
    override class var entityType: String { "paths" }

    var separate: Bool { entityKey.hasPrefix("separate") }

    func resolve(in context: ResolveContext) async throws -> DownloadManifest {
        let segments = payload.map { text in
            let url = URL(string: text)!
            return DownloadSegment(urls: [url], expectedSize: Int64(url.pathComponents.dropLast().last ?? "0"), name: url.lastPathComponent)
        }
        if separate {
            return DownloadManifest(title: entityKey, outputs: [DownloadOutput(name: "parts", assembly: .separateFiles, segments: segments)])
        }
        return DownloadManifest(title: entityKey, outputs: segments.map { DownloadOutput(name: $0.name!, segments: [$0]) })
    }
}

/// "Completed" means the outputs are there: a task started again checks them.
@Suite(.timeLimit(.minutes(1))) struct ManagerOutputsTests {
    @Test func aCompletedTaskWhoseOutputIsGoneRunsAgain() async throws {
        try await withManager { harness in
            let paths = ["/bytes/3000/one.bin", "/bytes/4000/two.bin"]
            let entity = PathsEntity(payload: paths.map { harness.origin.url($0).absoluteString }, entityKey: "files")
            try await harness.manager.start(entity)
            _ = try #require(await harness.waitForState(entity.taskID, .completed))
            #expect(harness.origin.requests.count == 2)
            // Whole and in place: started again, nothing is fetched.
            let again = try await harness.manager.start(entity)
            #expect(again.state == .completed)
            #expect(harness.origin.requests.count == 2)
            // One output deleted: the task runs again and puts it back.
            try FileManager.default.removeItem(atPath: harness.root.file("two.bin"))
            let redo = try await harness.manager.start(entity)
            #expect(redo.state != .completed)
            _ = try #require(await harness.waitForState(entity.taskID, .completed))
            #expect(await harness.origin.content(at: paths[1]).verifyFile(atPath: harness.root.file("two.bin"), size: 4000))
            #expect(await harness.origin.content(at: paths[0]).verifyFile(atPath: harness.root.file("one.bin"), size: 3000))
        }
    }

    @Test func anOutputOfSeparateFilesIsADirectoryAndIsNotFetchedAgain() async throws {
        try await withManager { harness in
            let paths = ["/bytes/1000/a.bin", "/bytes/2000/b.bin"]
            let entity = PathsEntity(payload: paths.map { harness.origin.url($0).absoluteString }, entityKey: "separate")
            try await harness.manager.start(entity)
            _ = try #require(await harness.waitForState(entity.taskID, .completed))
            let served = harness.origin.requests.count
            let again = try await harness.manager.start(entity)
            #expect(again.state == .completed)
            #expect(harness.origin.requests.count == served)
            #expect(fileSize(harness.root.file("parts/b.bin")) == 2000)
        }
    }

    @Test func downloadReturnsWhenTheTaskHasSettled() async throws {
        try await withManager { harness in
            let path = "/bytes/200000/whole.bin"
            harness.origin.inject(.throttle(bytesPerSecond: 400_000), at: path)
            let entity = PathsEntity(payload: [harness.origin.url(path).absoluteString], entityKey: "download")
            let done = try await harness.manager.download(entity)
            #expect(done.state == .completed)
            #expect(await harness.origin.content(at: path).verifyFile(atPath: harness.root.file("whole.bin"), size: 200_000))
            // Settled already: at once. Unknown: nil.
            #expect(await harness.manager.wait(for: entity.taskID)?.state == .completed)
            #expect(await harness.manager.wait(for: DownloadTaskID(entityType: "paths", entityKey: "nobody")) == nil)
        }
    }

    @Test func waitReturnsWhenTheTaskIsPaused() async throws {
        try await withManager { harness in
            let path = "/bytes/3000000/slow.bin"
            harness.origin.inject(.stall(.seconds(30), afterBytes: 100_000), at: path)
            let entity = PathsEntity(payload: [harness.origin.url(path).absoluteString], entityKey: "paused")
            let id = try await harness.manager.start(entity).id
            async let settled = harness.manager.wait(for: id)
            #expect(await eventually(within: .seconds(10)) { harness.origin.bytesServed(for: path) >= 100_000 })
            await harness.manager.stop(id)
            #expect(await settled?.state == .paused)
        }
    }
}
