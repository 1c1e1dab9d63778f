import Foundation
import Testing
@testable import Tessera
import TesseraTesting

@Suite(.timeLimit(.minutes(2))) struct OutputNameTests {
    @Test func aClaimKeepsItsNameOrTakesTheFirstFreeOne() {
        let claims = OutputClaims()
        let (one, two) = (TaskHandle(1), TaskHandle(2))
        let path: (String) -> String = { "/d/" + $0 }
        #expect(claims.claimFirstFree("a.bin", for: one, releasing: nil, taken: []) { path($0) } == ("a.bin", "/d/a.bin"))
        // The same name again (a response naming the file as its URL does): kept.
        #expect(claims.claimFirstFree("a.bin", for: one, releasing: "/d/a.bin", taken: []) { path($0) } == ("a.bin", "/d/a.bin"))
        #expect(claims.holder(of: "/d/a.bin") == one)
        // Another task asking for it gets the next free name.
        #expect(claims.claimFirstFree("a.bin", for: two, releasing: nil, taken: []) { path($0) } == ("a.1.bin", "/d/a.1.bin"))
        // Found occupied on disk: the holder moves on, letting go of its name.
        #expect(claims.claimFirstFree("a.bin", for: one, releasing: "/d/a.bin", taken: ["/d/a.bin"]) { path($0) } == ("a.2.bin", "/d/a.2.bin"))
        #expect(claims.holder(of: "/d/a.bin") == nil)
        // Another name: the old one is let go.
        #expect(claims.claimFirstFree("b.bin", for: two, releasing: "/d/a.1.bin", taken: []) { path($0) } == ("b.bin", "/d/b.bin"))
        #expect(claims.holder(of: "/d/a.1.bin") == nil)
        #expect(claims.holder(of: "/d/b.bin") == two)
    }

    @Test func numberedNamesGoBeforeTheExtension() {
        #expect(OutputClaims.numbered("file.bin", 1) == "file.1.bin")
        #expect(OutputClaims.numbered("dir.v2/file", 3) == "dir.v2/file.3")
        #expect(OutputClaims.numbered("a/b/movie.mp4", 2) == "a/b/movie.2.mp4")
        #expect(OutputClaims.numbered(".hidden", 1) == ".hidden.1")
    }

    @Test func twoURLsWithTheSameFileNameNeverShareAnOutput() async throws {
        try await withManager { harness in
            let first = DirectEntity(url: harness.origin.url("/bytes/1000/a/file.bin"))
            let second = DirectEntity(url: harness.origin.url("/bytes/2000/b/file.bin"))
            try await harness.manager.start(first)
            try await harness.manager.start(second)
            let one = try #require(await harness.waitForState(first.taskID, .completed))
            let two = try #require(await harness.waitForState(second.taskID, .completed))
            let paths = Set([one.outputs[0].path, two.outputs[0].path])
            #expect(paths == [harness.root.file("file.bin"), harness.root.file("file.1.bin")])
            #expect(fileSize(one.outputs[0].path) == 1000)
            #expect(fileSize(two.outputs[0].path) == 2000)
        }
    }

    @Test func anExistingFileIsNeverOverwritten() async throws {
        try await withManager { harness in
            try Data("mine".utf8).write(to: URL(fileURLWithPath: harness.root.file("report.pdf")))
            let entity = DirectEntity(url: harness.origin.url("/bytes/5000/report.pdf"))
            try await harness.manager.start(entity)
            let done = try #require(await harness.waitForState(entity.taskID, .completed))
            #expect(done.outputs[0].path == harness.root.file("report.1.pdf"))
            #expect(fileBytes(harness.root.file("report.pdf")) == Array("mine".utf8))
        }
    }

    /// A small plain file is moved into place on the engine thread as its transfer ends: with
    /// every thread of the manager's blocking executor held, it still completes (its finish needs
    /// no hop to the executor and back), named as the response says and with its bytes.
    @Test func aSmallFileIsFinishedAsItsTransferEnds() async throws {
        try await withManager { harness in
            let held = DispatchSemaphore(value: 0)
            for _ in 0..<harness.manager.executor.threads { harness.manager.executor.submit { held.wait() } }
            defer { for _ in 0..<harness.manager.executor.threads { held.signal() } }
            let entity = DirectEntity(url: harness.origin.url("/bytes/5000/small.bin"))
            try await harness.manager.start(entity)
            let done = try #require(await harness.waitForState(entity.taskID, .completed))
            #expect(done.outputs[0].path == harness.root.file("small.bin"))
            #expect(fileSize(harness.root.file("small.bin")) == 5000)
        }
    }

    /// A plain URL is resolved and named as its run is launched (no round trip through the
    /// manager); a name the user gave (not a response's) is in the store before the first
    /// request is sent, so a kill at any byte finds the same file again.
    @Test func aGivenNameIsStoredBeforeThePlainURLsFirstRequest() async throws {
        try await withManager { harness in
            let path = harness.root.file("state.sqlite")
            var configuration = DownloadTaskManager.Configuration(downloadRoot: harness.root.path)
            // (No tick writes the store in the test's time: only the launch can have.)
            configuration.storeInterval = .seconds(600)
            let manager = DownloadTaskManager(configuration: configuration, engine: harness.engine, store: try SQLiteDownloadStore(path: path))
            let resource = "/bytes/200000/served.bin"
            harness.origin.inject(.stall(.seconds(60), afterBytes: nil), at: resource)
            let entity = DirectEntity(url: harness.origin.url(resource), fileName: "chosen.bin")
            try await manager.start(entity)
            #expect(await harness.eventually { harness.origin.requestCount(for: resource) >= 1 })
            let stored = try await SQLiteDownloadStore(path: path).loadAll().first { $0.task.id == entity.taskID }
            #expect(stored?.task.manifest?.outputs.map(\.name) == ["chosen.bin"], "\(String(describing: stored))")
            #expect(stored?.task.resolveCount == 1)
            _ = await manager.stop(entity.taskID)
            await manager.shutdown()
        }
    }

    @Test func aReResolveKeepsTheAssignedName() async throws {
        try await withManager { harness in
            // Taken: the fixture's own output name exists, so the task gets out-0.1.bin …
            try FileManager.default.createDirectory(atPath: harness.root.file("fixtures/named"), withIntermediateDirectories: true)
            try Data("x".utf8).write(to: URL(fileURLWithPath: harness.root.file("fixtures/named/out-0.bin")))
            // … and its segment URL expires once (403): the entity is resolved again.
            let fixture = harness.fixture("named", segments: 3)
            harness.origin.inject(.status(403), at: harness.segmentPath("named", 0, 1, size: 10_000), times: 1)
            try await harness.manager.start(fixture.entity)
            let done = try #require(await harness.waitForState(fixture.id, .completed))
            #expect(done.resolveCount == 2)
            let output = try #require(done.outputs.first)
            #expect(output.path == harness.root.file("fixtures/named/out-0.1.bin"))
            #expect(fileBytes(output.path) == harness.expectedBytes(of: fixture.document, output: 0))
            #expect(harness.origin.requestCount(for: harness.segmentPath("named", 0, 0, size: 10_000)) == 1, "progress survived the re-resolve")
        }
    }
}
