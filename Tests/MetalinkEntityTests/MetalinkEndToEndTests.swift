import Foundation
import MetalinkEntity
import Tessera
import TesseraTestSupport
import TesseraTesting
import Testing

/// Through a `DownloadTaskManager` against a `LoopbackOrigin`.
@Suite(.timeLimit(.minutes(2))) struct MetalinkEndToEndTests {
    /// The fixture's three files arrive byte-identical, from one fetch of the document.
    @Test func theFixtureDownloadsByteIdentical() async throws {
        try await withMetalinkHarness { harness in
            let fixture = MetalinkFixture.install(on: harness.origin)
            let started = try await harness.start(fixture.inputs[0])
            #expect(started.map(\.title) == ["metalink-release.tar", "metalink-extras/archive.bin", "metalink-notes.txt"])
            let final = await harness.waitUntilFinal(started.map(\.id))
            for info in final.values { #expect(info.state == .completed, "\(info.title): \(String(describing: info.error))") }
            #expect(await fixture.verify(downloadRoot: harness.downloadRoot) == [])
            #expect(fixture.expectedFiles.allSatisfy { FileManager.default.fileExists(atPath: harness.downloadRoot + "/" + $0) })
            // Once to expand; each file's first resolve uses that copy.
            #expect(harness.origin.requestCount(for: fixture.metalinkPath) == 1)
            // The broken mirror was tried, the other one served the file.
            #expect(harness.origin.requestCount(for: fixture.failingMirrorPath) >= 1)
            #expect(harness.origin.bytesServed(for: fixture.files[0].mirrorPaths[1]) == 300_000)
            // notes.txt's relative mirror resolved against the document's URL; ftp and torrent untouched.
            let notes = fixture.files[2]
            #expect(harness.origin.bytesServed(for: notes.mirrorPaths[0]) == notes.size)
            #expect(harness.origin.requestCount(for: "/metalink/notes.torrent") == 0)
            let info = try #require(final[started[2].id])
            #expect(info.outputs.map(\.name) == ["metalink-notes.txt"])
            #expect(info.segmentsTotal == 4)
        }
    }

    /// A piece whose bytes do not match its hash is fetched again from the next mirror: only that piece.
    @Test func aCorruptedPieceIsFetchedFromTheOtherMirror() async throws {
        try await withMetalinkHarness { harness in
            let fixture = MetalinkFixture.install(on: harness.origin)
            let started = try await harness.start(fixture.inputs[0])
            let archive = try #require(started.first { $0.title == "metalink-extras/archive.bin" })
            let final = await harness.waitUntilFinal(started.map(\.id))
            #expect(final[archive.id]?.state == .completed)
            let file = fixture.files[1]
            #expect(await file.content.verifyFile(atPath: harness.downloadRoot + "/" + file.name, size: file.size))
            // Every piece from the first mirror, once; the bad one again from the second.
            #expect(harness.origin.requestCount(for: fixture.corruptMirrorPath) == file.pieceCount)
            #expect(harness.origin.bytesServed(for: fixture.corruptMirrorPath) == file.size)
            #expect(harness.origin.requestCount(for: fixture.repairMirrorPath) == 1)
            #expect(harness.origin.bytesServed(for: fixture.repairMirrorPath) == file.pieceLength)
            let range = try #require(harness.origin.requests(for: fixture.repairMirrorPath).first?.header("Range"))
            let start = Int64(fixture.corruptPieceIndex) * file.pieceLength!
            #expect(range == "bytes=\(start)-\(start + file.pieceLength! - 1)")
            let errors = harness.log.errors(of: archive.id)
            #expect(errors.contains { $0.code == .checksumMismatch })
        }
    }

    /// A whole-file hash that no mirror's bytes match: the file is fetched once more, then `invalid`;
    /// the other files of the document complete.
    @Test func aWholeFileHashMismatchIsInvalid() async throws {
        try await withMetalinkHarness { harness in
            let origin = harness.origin
            let content = OriginContent(path: "/hash/content")
            let bytes = content.bytes(0..<50_000)
            for name in ["good.bin", "whole.bin", "pieced.bin"] { origin.serve("/hash/\(name)", .bytes(bytes)) }
            let wrong = sha256("something else")
            let pieces = stride(from: 0, to: 50_000, by: 20_000).map {
                "<hash>\(checksum(.sha256, Array(bytes[$0..<min($0 + 20_000, 50_000)])).hexDigest)</hash>"
            }.joined()
            origin.serve("/hash/set.meta4", .text(meta4("""
                  <file name="good.bin"><size>50000</size><hash type="sha-256">\(checksum(.sha256, bytes).hexDigest)</hash><url>/hash/good.bin</url></file>
                  <file name="whole.bin"><size>50000</size><hash type="sha-256">\(wrong)</hash><url>/hash/whole.bin</url></file>
                  <file name="pieced.bin"><size>50000</size><hash type="sha-256">\(wrong)</hash>
                    <pieces length="20000" type="sha-256">\(pieces)</pieces><url>/hash/pieced.bin</url></file>
                """), contentType: "application/metalink4+xml"))
            let url = origin.url("/hash/set.meta4").absoluteString
            let started = try await harness.start(url)
            let final = await harness.waitUntilFinal(started.map(\.id))
            let byName = Dictionary(uniqueKeysWithValues: final.values.map { ($0.title, $0) })
            #expect(byName["good.bin"]?.state == .completed)
            for name in ["whole.bin", "pieced.bin"] {
                #expect(byName[name]?.state == .invalid, "\(name)")
                #expect(byName[name]?.error?.code == .checksumMismatch, "\(name)")
                #expect(!FileManager.default.fileExists(atPath: harness.downloadRoot + "/" + name))
            }
            // Downloaded twice: the first copy and the one fetched again.
            #expect(origin.bytesServed(for: "/hash/whole.bin") == 100_000)
            #expect(origin.bytesServed(for: "/hash/pieced.bin") == 100_000)
            #expect(await content.verifyFile(atPath: harness.downloadRoot + "/good.bin", size: 50_000))
            #expect(await harness.manager.checkGroup(url)?.state == .failed)
        }
    }

    /// A file whose name would leave the download directory is refused; the others download.
    @Test func aHostileFileNameIsRefusedAndTheOthersComplete() async throws {
        try await withMetalinkHarness { harness in
            let origin = harness.origin
            let content = OriginContent(path: "/hostile/content")
            origin.serve("/hostile/ok.bin", .bytes(content.bytes(0..<10_000)))
            for name in ["escape", "absolute", "backslash"] { origin.serve("/hostile/\(name)", .bytes(content.bytes(0..<10_000))) }
            origin.serve("/hostile/set.meta4", .text(meta4("""
                  <file name="sub/ok-1.bin"><size>10000</size><url>/hostile/ok.bin</url></file>
                  <file name="../../escape.bin"><size>10000</size><url>/hostile/escape</url></file>
                  <file name="/tmp/absolute.bin"><size>10000</size><url>/hostile/absolute</url></file>
                  <file name="a\\..\\..\\backslash.bin"><size>10000</size><url>/hostile/backslash</url></file>
                  <file name="ok-2.bin"><size>10000</size><url>/hostile/ok.bin</url></file>
                """)))
            let url = origin.url("/hostile/set.meta4").absoluteString
            let started = try await harness.start(url)
            #expect(started.count == 5)
            let final = await harness.waitUntilFinal(started.map(\.id))
            let byName = Dictionary(uniqueKeysWithValues: final.values.map { ($0.title, $0) })
            #expect(byName["sub/ok-1.bin"]?.state == .completed)
            #expect(byName["ok-2.bin"]?.state == .completed)
            for name in ["../../escape.bin", "/tmp/absolute.bin", #"a\..\..\backslash.bin"#] {
                #expect(byName[name]?.state == .invalid, "\(name)")
                #expect(byName[name]?.error?.code == .unsafePath, "\(name)")
            }
            for path in ["/hostile/escape", "/hostile/absolute", "/hostile/backslash"] {
                #expect(origin.requestCount(for: path) == 0, "\(path)")
            }
            #expect(!FileManager.default.fileExists(atPath: harness.root.path + "/escape.bin"))
            #expect(!FileManager.default.fileExists(atPath: (harness.root.path as NSString).deletingLastPathComponent + "/escape.bin"))
            #expect(!FileManager.default.fileExists(atPath: "/tmp/absolute.bin"))
            #expect(await content.verifyFile(atPath: harness.downloadRoot + "/sub/ok-1.bin", size: 10_000))
            #expect(await content.verifyFile(atPath: harness.downloadRoot + "/ok-2.bin", size: 10_000))
        }
    }

    /// A Metalink 3 document downloads: preference order, SHA-1 pieces, an MD5 file hash.
    @Test func aMetalink3DocumentDownloads() async throws {
        try await withMetalinkHarness { harness in
            let origin = harness.origin
            let content = OriginContent(path: "/v3/content")
            let bytes = content.bytes(0..<70_000)
            origin.serve("/v3/low/f.bin", .bytes(bytes))
            origin.serve("/v3/high/f.bin", .bytes(bytes))
            let pieces = stride(from: 0, to: 70_000, by: 32_768).enumerated().map { index, offset in
                #"<hash piece="\#(index)">\#(checksum(.sha1, Array(bytes[offset..<min(offset + 32_768, 70_000)])).hexDigest)</hash>"#
            }.reversed().joined()
            origin.serve("/v3/set.metalink", .text("""
                <?xml version="1.0" encoding="UTF-8"?>
                <metalink version="3.0" xmlns="http://www.metalinker.org/">
                  <files>
                    <file name="v3/f.bin">
                      <size>70000</size>
                      <verification>
                        <hash type="md5">\(checksum(.md5, bytes).hexDigest)</hash>
                        <pieces length="32768" type="sha1">\(pieces)</pieces>
                      </verification>
                      <resources>
                        <url type="http" preference="10">/v3/low/f.bin</url>
                        <url type="bittorrent" preference="100">/v3/f.torrent</url>
                        <url type="http" preference="90">high/f.bin</url>
                      </resources>
                    </file>
                  </files>
                </metalink>
                """, contentType: "application/metalink+xml"))
            let started = try await harness.start(origin.url("/v3/set.metalink").absoluteString)
            let final = await harness.waitUntilFinal(started.map(\.id))
            #expect(final.values.map(\.state) == [.completed])
            #expect(await content.verifyFile(atPath: harness.downloadRoot + "/v3/f.bin", size: 70_000))
            #expect(origin.bytesServed(for: "/v3/high/f.bin") == 70_000)
            #expect(origin.requestCount(for: "/v3/low/f.bin") == 0)
            #expect(origin.requestCount(for: "/v3/f.torrent") == 0)
        }
    }

    /// The document is the group: `checkGroup(<metalink URL>)` rolls up its files.
    @Test func theDocumentIsAGroup() async throws {
        try await withMetalinkHarness { harness in
            let fixture = MetalinkFixture.install(on: harness.origin)
            let key = fixture.metalinkURL.absoluteString
            let started = try await harness.start(key)
            #expect(started.allSatisfy { $0.groupKey == key })
            let early = try #require(await harness.manager.checkGroup(key))
            #expect(early.children.count == 3)
            #expect(early.state != .completed)
            _ = await harness.waitUntilFinal(started.map(\.id))
            let group = try #require(await harness.manager.checkGroup(key))
            #expect(group.state == .completed)
            #expect(group.children.map(\.title) == ["metalink-release.tar", "metalink-extras/archive.bin", "metalink-notes.txt"])
            #expect(group.rollUp.bytesDone == 1_000_000)
            #expect(group.rollUp.bytesTotal == 1_000_000)
            #expect(await harness.manager.checkAllGroups().map(\.key) == [key])
            // Events arrive asynchronously: the group's completion may trail the last task's.
            #expect(await harness.log.eventually { events in
                events.contains { if case .groupUpdated(let info) = $0 { info.key == key && info.state == .completed } else { false } }
            })
        }
    }

    /// Relative mirrors are resolved against the document's URL after redirects.
    @Test func relativeMirrorsFollowTheRedirectedDocument() async throws {
        try await withMetalinkHarness { harness in
            let origin = harness.origin
            let content = OriginContent(path: "/redirect/content")
            origin.serve("/releases/2.0/files/app.bin", .bytes(content.bytes(0..<40_000)))
            origin.serve("/releases/2.0/app.meta4", .text(meta4("""
                  <file name="app.bin"><size>40000</size><hash type="sha-256">\(checksum(.sha256, content.bytes(0..<40_000)).hexDigest)</hash>
                    <url>files/app.bin</url></file>
                """)))
            origin.inject(.redirect(to: "/releases/2.0/app.meta4"), at: "/latest.meta4")
            let started = try await harness.start(origin.url("/latest.meta4").absoluteString)
            let final = await harness.waitUntilFinal(started.map(\.id))
            #expect(final.values.map(\.state) == [.completed])
            #expect(started.first?.groupKey == origin.url("/latest.meta4").absoluteString)
            #expect(origin.bytesServed(for: "/releases/2.0/files/app.bin") == 40_000)
            #expect(origin.requestCount(for: "/files/app.bin") == 0)
            #expect(await content.verifyFile(atPath: harness.downloadRoot + "/app.bin", size: 40_000))
        }
    }

    /// Expansion: one entity per file in document order, a repeated name once, arguments and the
    /// destination directory passed on; a URL without the extension is known by its Content-Type.
    @Test func expansion() async throws {
        try await withMetalinkHarness { harness in
            let origin = harness.origin
            origin.serve("/expand/get", .text(meta4("""
                  <file name="b.bin"><url location="us">/x/b</url><url location="de">/y/b</url></file>
                  <file name="a.bin"><url>/x/a</url></file>
                  <file name="b.bin"><url>/z/b</url></file>
                """), contentType: "application/metalink4+xml"))
            var arguments = PluginArguments()
            try arguments.add("metalink:location=de")
            let input = EntityInput(
                origin.url("/expand/get?id=1").absoluteString, contentType: "application/metalink4+xml",
                arguments: arguments, destinationDirectory: "mirror")
            let entities = try await harness.registry.makeEntities(for: input, context: ResolveContext(engine: harness.engine))
            let metalinks = entities.compactMap { $0 as? MetalinkEntity }
            #expect(metalinks.count == 2)
            let key = origin.url("/expand/get?id=1").absoluteString
            #expect(metalinks.map(\.entityKey) == ["\(key)|b.bin", "\(key)|a.bin"])
            #expect(metalinks.allSatisfy { $0.aggregationKey == key && $0.destinationDirectory == "mirror" })
            #expect(metalinks.allSatisfy { $0.payload.preferredLocations == ["de"] })
            let manifest = try await metalinks[0].resolve(in: ResolveContext(engine: harness.engine))
            #expect(manifest.outputs[0].segments[0].urls == [origin.url("/y/b"), origin.url("/x/b")])
            #expect(manifest.sourceURL == origin.url("/expand/get?id=1"))
        }
    }

    /// The entities survive a restart: a second manager over the same store rebuilds them from
    /// their records and downloads them.
    @Test func entitiesAreRestoredFromTheStore() async throws {
        try await withLoopbackOrigin { origin in
            let fixture = MetalinkFixture.install(on: origin)
            let store = InMemoryDownloadStore()
            let root = TemporaryDirectory("metalink-restore")
            defer { root.cleanUp() }
            let registry = EntityRegistry()
            MetalinkEntity.register(in: registry)
            let engine = try CurlEngine(configuration: CurlEngine.Configuration.forTests())
            var configuration = DownloadTaskManager.Configuration(downloadRoot: root.path)
            configuration.sleeper = QuickSleeper()
            configuration.diskSpace = nil
            let first = DownloadTaskManager(configuration: configuration, engine: engine, store: store, registry: registry)
            let entities = try await registry.makeEntities(
                for: EntityInput(fixture.inputs[0]), context: ResolveContext(engine: engine))
            for entity in entities { try await first.add(entity) }
            await first.flushStore()

            let second = DownloadTaskManager(configuration: configuration, engine: engine, store: store, registry: registry)
            let report = try await second.restore()
            #expect(report.skipped.isEmpty)
            #expect(report.restored.map(\.id) == entities.map(\.taskID))
            await second.startAll()
            let final = await second.waitForFinal(entities.map(\.taskID))
            expectFinal(final, of: entities.map(\.taskID))
            #expect(await second.checkAll().map(\.state) == [.completed, .completed, .completed])
            #expect(await fixture.verify(downloadRoot: root.path) == [])
            #expect(await second.checkGroup(fixture.metalinkURL.absoluteString)?.state == .completed)
            await engine.shutdown()
        }
    }

    /// A resolve that fetches the document again (a restored task, a retry) reads it as a stream
    /// up to its own file: a document broken after that file still describes it, while the
    /// expansion, which reads every file, refuses the document.
    @Test func aResolveReadsTheDocumentUpToItsFile() async throws {
        try await withMetalinkHarness { harness in
            let origin = harness.origin
            let content = OriginContent(path: "/upto/content")
            origin.serve("/upto/a.bin", .bytes(content.bytes(0..<10_000)))
            origin.serve("/upto/set.meta4", .text(meta4("""
                  <file name="a.bin"><size>10000</size><url>/upto/a.bin</url></file>
                  <!-- \(String(repeating: "-.", count: 4096)) -->
                  <file name="b.bin"><size>1</fil>
                """), contentType: "application/metalink4+xml"))
            let url = origin.url("/upto/set.meta4")
            let expansion = await #expect(throws: DownloadError.self) { try await harness.start(url.absoluteString) }
            #expect(expansion?.code == .manifestInvalid)
            #expect(expansion?.message.contains("line 5") == true, "\(String(describing: expansion))")
            // A restored entity has nothing kept from an expansion: it fetches the document.
            let entity = MetalinkEntity(metalinkURL: url, fileName: "a.bin")
            let manifest = try await entity.resolve(in: ResolveContext(engine: harness.engine))
            #expect(manifest.outputs[0].segments[0].urls == [origin.url("/upto/a.bin")])
            #expect(manifest.outputs[0].expectedSize == 10_000)
            #expect(origin.requestCount(for: "/upto/set.meta4") == 2)
            let info = try await harness.manager.start(entity)
            let final = await harness.waitUntilFinal([info.id])
            #expect(final[info.id]?.state == .completed)
            #expect(await content.verifyFile(atPath: harness.downloadRoot + "/a.bin", size: 10_000))
            // The broken file itself: the document's error.
            let broken = MetalinkEntity(metalinkURL: url, fileName: "b.bin")
            let error = await #expect(throws: DownloadError.self) { try await broken.resolve(in: ResolveContext(engine: harness.engine)) }
            #expect(error?.message == expansion?.message)
        }
    }

    /// Resolves whose details were not kept (a list restored after a restart, or one that
    /// starts more than a minute after its expansion) fetch the document once for a window of
    /// files, not once each: for 100,000 files the per-file reads were quadratic. A file read
    /// ahead is described as its own read would describe it, the first of a name included.
    @Test func resolvesWithoutKeptDetailsFetchTheDocumentOnceForManyFiles() async throws {
        try await withMetalinkHarness { harness in
            let origin = harness.origin
            let names = (0..<40).map { "f\($0).bin" }
            // `dup.bin` twice, before `f10.bin` and after it: the first is the one downloaded.
            var body = ""
            for (index, name) in names.enumerated() {
                if index == 5 { body += #"<file name="dup.bin"><size>1</size><url>/ahead/first-dup</url></file>"# + "\n" }
                if index == 15 { body += #"<file name="dup.bin"><size>2</size><url>/ahead/second-dup</url></file>"# + "\n" }
                body += #"<file name="\#(name)"><size>\#(index + 1)</size><url>/ahead/\#(name)</url></file>"# + "\n"
            }
            origin.serve("/ahead/set.meta4", .text(meta4(body), contentType: "application/metalink4+xml"))
            let url = origin.url("/ahead/set.meta4")
            func resolve(_ name: String, attempt: Int = 1) async throws -> DownloadManifest {
                try await MetalinkEntity(metalinkURL: url, fileName: name).resolve(in: ResolveContext(engine: harness.engine, attempt: attempt))
            }
            // Restored entities, resolved from the tenth file on, in order: one fetch.
            var manifests: [String: DownloadManifest] = [:]
            for name in names[10...] { manifests[name] = try await resolve(name) }
            #expect(origin.requestCount(for: "/ahead/set.meta4") == 1)
            let dup = try await resolve("dup.bin")
            #expect(dup.outputs[0].segments[0].urls == [origin.url("/ahead/first-dup")], "the first of the name")
            // Each as its own read describes it (a retry reads the document for itself).
            for name in names[10...] {
                #expect(manifests[name] == (try await resolve(name, attempt: 2)), "\(name)")
            }
            #expect(try await resolve("dup.bin", attempt: 2) == dup)
        }
    }

    /// Resolves that find nothing kept at the same time fetch the document once: the first
    /// fetches it, the others wait for its read ahead (under a tight `--limit-rate` each fetching
    /// the whole document shared the limit between as many copies as there were resolves). A
    /// waiting resolve that is cancelled stops waiting at once.
    @Test func concurrentResolvesWithoutKeptDetailsShareOneFetch() async throws {
        try await withMetalinkHarness { harness in
            let origin = harness.origin
            let names = (0..<12).map { "c\($0).bin" }
            let body = names.enumerated().map { index, name in
                #"<file name="\#(name)"><size>\#(index + 1)</size><url>/together/\#(name)</url></file>"#
            }.joined(separator: "\n")
            origin.serve("/together/set.meta4", .text(meta4(body), contentType: "application/metalink4+xml"))
            let url = origin.url("/together/set.meta4")
            // The first fetch is held until every other resolve waits for it.
            let gate = LoopbackOrigin.Gate()
            origin.inject(.hold(gate, afterBytes: nil), at: "/together/set.meta4", times: 1)
            let engine = harness.engine
            func resolve(_ name: String) async throws -> DownloadManifest {
                try await MetalinkEntity(metalinkURL: url, fileName: name).resolve(in: ResolveContext(engine: engine))
            }
            let first = Task { try await resolve(names[0]) }
            #expect(await eventually { origin.requestCount(for: "/together/set.meta4") == 1 })
            let others = names.dropFirst().map { name in Task { try await resolve(name) } }
            let cancelled = Task { try await resolve(names[5]) }
            #expect(await eventually { MetalinkEntity.resolvesWaitingForFetch(of: url) == others.count + 1 })
            cancelled.cancel()
            await #expect(throws: (any Error).self) { try await cancelled.value }
            #expect(MetalinkEntity.resolvesWaitingForFetch(of: url) == others.count)
            gate.open()
            var manifests = [try await first.value]
            for other in others { manifests.append(try await other.value) }
            #expect(origin.requestCount(for: "/together/set.meta4") == 1, "one fetch for them all")
            for (index, manifest) in manifests.enumerated() {
                #expect(manifest.outputs[0].segments[0].urls == [origin.url("/together/\(names[index])")])
            }
        }
    }

    /// A retry (a second resolve) fetches the document again and reads only its file.
    @Test func aRetryFetchesTheDocumentAgain() async throws {
        try await withMetalinkHarness { harness in
            let fixture = MetalinkFixture.install(on: harness.origin)
            let entities = try await harness.registry.makeEntities(
                for: EntityInput(fixture.inputs[0]), context: ResolveContext(engine: harness.engine))
            let notes = try #require(entities.last as? MetalinkEntity)
            let kept = try await notes.resolve(in: ResolveContext(engine: harness.engine))
            #expect(harness.origin.requestCount(for: fixture.metalinkPath) == 1)
            let again = try await notes.resolve(in: ResolveContext(engine: harness.engine, attempt: 2))
            #expect(harness.origin.requestCount(for: fixture.metalinkPath) == 2)
            #expect(again == kept)
        }
    }

    /// A document that is not a Metalink fails the expansion with the parser's message.
    @Test func aBrokenDocumentFailsTheExpansion() async throws {
        try await withMetalinkHarness { harness in
            harness.origin.serve("/broken.meta4", .text("<html><body>Sign in</body></html>", contentType: "text/html"))
            await #expect(throws: DownloadError.self) {
                try await harness.start(harness.origin.url("/broken.meta4").absoluteString)
            }
            do {
                try await harness.start(harness.origin.url("/broken.meta4").absoluteString)
            } catch let error as DownloadError {
                #expect(error.code == .manifestInvalid)
                #expect(error.message.contains("not a Metalink"))
            }
            harness.origin.inject(.status(404), at: "/gone.meta4")
            do {
                try await harness.start(harness.origin.url("/gone.meta4").absoluteString)
                Issue.record("a 404 was accepted")
            } catch let error as DownloadError {
                #expect(error.httpStatus == 404)
            }
        }
    }
}
