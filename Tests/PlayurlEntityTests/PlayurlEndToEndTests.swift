import Foundation
import PlayurlEntity
import Tessera
import TesseraTesting
import Testing

/// The plugin through a `DownloadTaskManager` against a `LoopbackOrigin` serving `PlayurlFixture`.
@Suite(.timeLimit(.minutes(2))) struct PlayurlEndToEndTests {
    @Test func theFixturesThreeCidsDownloadByteForByte() async throws {
        try await withPlayurlHarness { harness in
            let fixture = PlayurlFixture.install(on: harness.origin)
            let entities = try await harness.entities(fixture)
            #expect(entities.count == 3)
            for entity in entities { try await harness.manager.start(entity) }
            for entity in entities {
                let info = await harness.waitUntilFinished(entity.taskID)
                #expect(info?.state == .completed, "\(entity.taskID): \(String(describing: info?.error))")
                #expect(info?.resolveCount == 1)
            }
            #expect(await fixture.verify(downloadRoot: harness.downloadRoot) == [])
            #expect(fixture.expectedFiles.count == 7)
            for video in fixture.videos {
                #expect(fixture.apiCalls(for: video.cid, on: harness.origin) == 1)
            }
            // The API was asked with the template filled in.
            let request = try #require(harness.origin.requests(for: "/playurl/\(fixture.xmlCid)").first)
            #expect(request.uri == "/playurl/\(fixture.xmlCid)?qn=80&avid=\(fixture.aid)&fnval=0")
        }
    }

    @Test func theCidWhosePrimaryURLsFailCompletesFromItsBackups() async throws {
        try await withPlayurlHarness { harness in
            let fixture = PlayurlFixture.install(on: harness.origin)
            let video = try #require(fixture.video(fixture.backupCid))
            let entity = try #require(try await harness.entities(fixture, inputs: ["playurl:\(fixture.aid)/\(video.cid)"]).first)
            try await harness.manager.start(entity)
            let info = await harness.waitUntilFinished(entity.taskID)
            #expect(info?.state == .completed, "\(String(describing: info?.error))")
            #expect(info?.resolveCount == 1)  // mirrors, not a re-resolve
            for (part, primary) in zip(video.parts, video.failingPrimaryPaths) {
                #expect(harness.origin.requestCount(for: primary) >= 1)
                #expect(harness.origin.bytesServed(for: part.contentPath) == part.size)
                let path = harness.downloadRoot + "/" + part.outputName
                #expect(await OriginContent(path: part.contentPath).verifyFile(atPath: path, size: part.size))
            }
            // A 404 marks the URL dead: it is asked once.
            #expect(harness.origin.requestCount(for: video.failingPrimaryPaths[0]) == 1)
            #expect(info?.outputs.map(\.name) == video.parts.map(\.outputName))
            #expect(info?.outputs.allSatisfy(\.isComplete) == true)
        }
    }

    @Test func aWrongMD5EndsInvalidAfterOneReDownload() async throws {
        try await withPlayurlHarness { harness in
            let fixture = PlayurlFixture.install(on: harness.origin, scenario: .wrongMD5)
            let video = try #require(fixture.video(fixture.jsonCid))
            let entity = try #require(try await harness.entities(fixture, inputs: ["playurl:\(fixture.aid)/\(video.cid)"]).first)
            try await harness.manager.start(entity)
            let info = await harness.waitUntilFinished(entity.taskID)
            #expect(info?.state == .invalid)
            #expect(info?.error?.code == .checksumMismatch)
            #expect(info?.error?.message.contains("second time") == true, "\(info?.error?.message ?? "")")
            // Downloaded, found wrong, downloaded once more, found wrong: two requests.
            #expect(harness.origin.requestCount(for: video.parts[0].contentPath) == 2)
            #expect(!FileManager.default.fileExists(atPath: harness.downloadRoot + "/" + video.parts[0].outputName))
        }
    }

    @Test func anAPIErrorEndsInvalidWithTheServersMessage() async throws {
        try await withPlayurlHarness { harness in
            let fixture = PlayurlFixture.install(on: harness.origin, scenario: .apiError)
            let entity = try #require(try await harness.entities(fixture, inputs: ["playurl:\(fixture.aid)/\(fixture.jsonCid)"]).first)
            try await harness.manager.start(entity)
            let info = await harness.waitUntilFinished(entity.taskID)
            #expect(info?.state == .invalid)
            #expect(info?.error?.code == .manifestInvalid)
            #expect(info?.error?.message.contains(PlayurlFixture.apiErrorMessage) == true, "\(info?.error?.message ?? "")")
            #expect(info?.error?.message.contains("-404") == true)
            #expect(fixture.apiCalls(for: fixture.jsonCid, on: harness.origin) == 1)  // not retried: it cannot succeed
        }
    }

    @Test func theGroupOfThreeRollsUp() async throws {
        try await withPlayurlHarness { harness in
            let fixture = PlayurlFixture.install(on: harness.origin)
            let entities = try await harness.entities(fixture)
            #expect(Set(entities.compactMap(\.aggregationKey)) == ["aid:\(fixture.aid)"])
            for entity in entities { try await harness.manager.start(entity) }
            for entity in entities { _ = await harness.waitUntilFinished(entity.taskID) }
            let group = try #require(await harness.manager.checkGroup("aid:\(fixture.aid)"))
            #expect(group.children.count == 3)
            #expect(group.state == .completed)
            let total = fixture.videos.flatMap(\.parts).reduce(Int64(0)) { $0 + $1.size }
            #expect(group.rollUp.bytesDone == total)
            #expect(group.rollUp.bytesTotal == total)
            #expect(group.children.map(\.bytesDone).reduce(0, +) == total)
            #expect(Set(group.children.map(\.id.entityKey)) == Set(fixture.videos.map { "cid:\($0.cid)" }))
        }
    }

    @Test func aPartURLAnswering403IsResolvedAgainForAFreshOne() async throws {
        try await withPlayurlHarness { harness in
            let fixture = PlayurlFixture.install(on: harness.origin, scenario: .staleFirstAnswer)
            let video = try #require(fixture.video(fixture.jsonCid))
            let entity = try #require(try await harness.entities(fixture, inputs: ["playurl:\(fixture.aid)/\(video.cid)"]).first)
            try await harness.manager.start(entity)
            let info = await harness.waitUntilFinished(entity.taskID)
            #expect(info?.state == .completed, "\(String(describing: info?.error))")
            #expect(info?.resolveCount == 2)
            #expect(fixture.apiCalls(for: video.cid, on: harness.origin) == 2)
            #expect(fixture.stalePaths.contains { harness.origin.requestCount(for: $0) >= 1 })
            for part in video.parts {
                let path = harness.downloadRoot + "/" + part.outputName
                #expect(await OriginContent(path: part.contentPath).verifyFile(atPath: path, size: part.size))
            }
        }
    }

    @Test func theAnswersSyntaxIsToldByContentNotByContentType() async throws {
        try await withPlayurlHarness { harness in
            let part = "/media/7/1.flv"
            harness.origin.serve(part, .generated(size: 5000))
            let md5 = Checksum.compute(.md5, bytes: OriginContent(path: part).bytes(0..<5000)).hexDigest
            // JSON labelled as XML, XML labelled as JSON.
            harness.origin.serve("/api/7", .text(
                #"{"code":0,"data":{"durl":[{"order":1,"size":5000,"md5":"\#(md5)","url":"\#(part)"}]}}"#, contentType: "text/xml"))
            harness.origin.serve("/api/8", .text(
                "<video><result>suee</result><durl><order>1</order><size>5000</size><md5>\(md5)</md5><url>\(part)</url></durl></video>",
                contentType: "application/json"))
            let arguments = try pluginArguments(["playurl:api=\(harness.origin.baseURL.absoluteString)/api/{cid}"])
            var ids: [DownloadTaskID] = []
            for cid in [7, 8] {
                let entity = try harness.registry.makeEntity(for: EntityInput("playurl:\(cid)", arguments: arguments))
                ids.append(try await harness.manager.start(entity).id)
            }
            for (id, cid) in zip(ids, [7, 8]) {
                let info = await harness.waitUntilFinished(id)
                #expect(info?.state == .completed, "\(String(describing: info?.error))")
                #expect(await OriginContent(path: part).verifyFile(atPath: harness.downloadRoot + "/\(cid)/part-1.flv", size: 5000))
            }
        }
    }

    @Test func aRestoredEntityResolvesWithoutThePluginArguments() async throws {
        try await withPlayurlHarness { harness in
            let fixture = PlayurlFixture.install(on: harness.origin)
            let original = try #require(try await harness.entities(fixture, inputs: ["playurl:\(fixture.aid)/\(fixture.xmlCid)"]).first)
            // As after a restart: only the stored record is left.
            let rebuilt = try harness.registry.rebuild(try original.record())
            try await harness.manager.start(rebuilt)
            let info = await harness.waitUntilFinished(rebuilt.taskID)
            #expect(info?.state == .completed, "\(String(describing: info?.error))")
            let video = try #require(fixture.video(fixture.xmlCid))
            for part in video.parts {
                #expect(await OriginContent(path: part.contentPath).verifyFile(atPath: harness.downloadRoot + "/" + part.outputName, size: part.size))
            }
        }
    }

    @Test func aHostileAnswerEndsInvalidAndFetchesNothing() async throws {
        try await withPlayurlHarness { harness in
            harness.origin.serve("/api/9", .text(#"{"code":0,"data":{"durl":[{"order":1,"url":"file:///etc/passwd"}]}}"#))
            let arguments = try pluginArguments(["playurl:api=\(harness.origin.baseURL.absoluteString)/api/{cid}"])
            let entity = try harness.registry.makeEntity(for: EntityInput("playurl:9", arguments: arguments))
            try await harness.manager.start(entity)
            let info = await harness.waitUntilFinished(entity.taskID)
            #expect(info?.state == .invalid)
            #expect(info?.error?.code == .unsafeInput)
            #expect(harness.origin.totalRequests == 1)
        }
    }
}
