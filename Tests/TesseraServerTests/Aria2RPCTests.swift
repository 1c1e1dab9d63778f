import Foundation
import Testing
import Tessera
@testable import TesseraServer
import TesseraTesting

/// aria2's JSON-RPC over a real daemon and manager, called directly (no server): downloads go to
/// a loopback origin.
@Suite(.timeLimit(.minutes(2))) struct Aria2RPCTests {
    @Test func callsWithoutTheRightTokenAreUnauthorized() async throws {
        try await ServeHarness.with(secret: "s3cret") { harness in
            let missing = await harness.rpc.respond(to: ["jsonrpc": "2.0", "id": 7, "method": "aria2.getVersion", "params": []])
            #expect(missing["error"] == ["code": 1, "message": "Unauthorized"])
            #expect(missing["id"] == 7)
            let wrong = await harness.rpc.respond(to: ["jsonrpc": "2.0", "id": 8, "method": "aria2.getGlobalStat", "params": ["token:s3creT"]])
            #expect(wrong["error"]?["message"] == "Unauthorized")
            #expect(await harness.result("aria2.getVersion")?["version"] == .string(Tessera.version))
            // system.listMethods needs no token, as in aria2.
            let methods = await harness.rpc.respond(to: ["jsonrpc": "2.0", "id": 1, "method": "system.listMethods"])
            #expect(methods["result"]?.arrayValue?.contains("aria2.addUri") == true)
        }
    }

    @Test func malformedRequestsGetJSONRPCErrors() async throws {
        try await ServeHarness.with(maxBatch: 3) { harness in
            let parse = try RPCValue.parse(await harness.rpc.respond(to: Data("{not json".utf8)))
            #expect(parse["error"]?["code"] == -32700)
            #expect(parse["id"] == .null)
            let invalid = await harness.rpc.respond(to: ["jsonrpc": "2.0", "id": 1, "params": []])
            #expect(invalid["error"]?["code"] == -32600)
            let unknown = await harness.call("aria2.fly")
            #expect(unknown["error"]?["message"]?.stringValue?.hasPrefix("No such method") == true)
            // A batch: each answered in order; beyond the bound, refused whole.
            let call: RPCValue = ["jsonrpc": "2.0", "id": 1, "method": "system.listNotifications"]
            let batch = try RPCValue.parse(await harness.rpc.respond(to: RPCValue.array([call, call]).data))
            #expect(batch.arrayValue?.count == 2)
            let tooMany = try RPCValue.parse(await harness.rpc.respond(to: RPCValue.array([call, call, call, call]).data))
            #expect(tooMany["error"]?["code"] == -32600)
        }
    }

    @Test func multicallChecksEachCallsTokenAndIsBounded() async throws {
        try await ServeHarness.with(secret: "s3cret", maxBatch: 2) { harness in
            let calls: RPCValue = [
                ["methodName": "aria2.getGlobalStat", "params": ["token:s3cret"]],
                ["methodName": "aria2.getGlobalStat", "params": ["token:nope"]],
            ]
            let results = await harness.rpc.respond(to: ["jsonrpc": "2.0", "id": 1, "method": "system.multicall", "params": [calls]])
            let list = results["result"]?.arrayValue ?? []
            #expect(list.count == 2)
            #expect(list.first?.arrayValue?.first?["numActive"] == "0")
            #expect(list.last?["message"] == "Unauthorized")
            let three: RPCValue = .array(Array(repeating: ["methodName": "system.listMethods"], count: 3))
            let refused = await harness.rpc.respond(to: ["jsonrpc": "2.0", "id": 1, "method": "system.multicall", "params": [three]])
            #expect(refused["error"] != nil)
        }
    }

    @Test func aPlainURLDownloadsAndIsReportedAsAriaWould() async throws {
        try await ServeHarness.with { harness in
            let url = harness.origin.url(LoopbackOrigin.generatedPath(size: 300_000, name: "plain.bin")).absoluteString
            let gid = try #require(await harness.result("aria2.addUri", [[.string(url)], ["dir": "sub"]])?.stringValue)
            #expect(Aria2GID.isValid(gid))
            #expect(await harness.waitForStatus(gid, "complete"))
            let status = try #require(await harness.result("aria2.tellStatus", [.string(gid)]))
            #expect(status["totalLength"] == "300000")
            #expect(status["completedLength"] == "300000")
            #expect(status["errorCode"] == "0")
            let path = try #require(status["files"]?.arrayValue?.first?["path"]?.stringValue)
            #expect(path == harness.root.file("downloads/sub/plain.bin"))
            #expect(fileSize(path) == 300_000)
            #expect(await harness.result("aria2.getUris", [.string(gid)])?.arrayValue?.first?["uri"] == .string(url))
            #expect(await harness.result("aria2.tellStopped", [0, 10, ["gid"]]) == [["gid": .string(gid)]])
            #expect(await harness.result("aria2.getGlobalStat")?["numStopped"] == "1")
            // Adding the same URL again finds the same task (Tessera's identity is the entity).
            #expect(await harness.result("aria2.addUri", [[.string(url)]])?.stringValue == gid)
            #expect(await harness.result("aria2.removeDownloadResult", [.string(gid)]) == "OK")
            #expect(await harness.call("aria2.tellStatus", [.string(gid)])["error"]?["message"] == .string("GID \(gid) is not found"))
            #expect(fileSize(path) == 300_000)
        }
    }

    @Test func aLiveStreamIsActiveWithAGrowingCompletedLengthAndNoTotal() async throws {
        try await ServeHarness.with { harness in
            // A live DASH stream of half-second segments on the real clock (generated bytes).
            var options = LiveStreamFixture.Options()
            options.format = .dashNumber
            options.ends = false
            let stream = LiveStreamFixture(
                LiveMedia.generated(segments: 200, bytesPerSegment: 20_000, segmentDuration: 0.5, initSection: true), options: options)
            let url = stream.install(on: harness.origin).absoluteString
            let gid = try #require(await harness.result("aria2.addUri", [[.string(url)]])?.stringValue)
            var completed: [Int64] = []
            #expect(await eventually(within: .seconds(60)) {
                guard let status = await harness.result("aria2.tellStatus", [.string(gid)]),
                    status["status"] == "active", status["totalLength"] == "0",
                    let done = status["completedLength"]?.stringValue.flatMap({ Int64($0) }), done > 0
                else { return false }
                if completed.last != done { completed.append(done) }
                return completed.count >= 2
            }, "\(completed)")
            #expect(completed == completed.sorted())
            #expect(await harness.field(gid, "files")?.arrayValue?.first?["length"] == "0")
            // Its event objects say it records.
            let task = try #require(await harness.manager.checkAll().first)
            #expect(task.isRecording && task.bytesTotal == nil)
            #expect(EventJSON.task("task_progress", task)["live"]?["recording"] == true)
            #expect(await harness.result("aria2.pause", [.string(gid)]) == .string(gid))
            #expect(await harness.waitForStatus(gid, "paused"))
        }
    }

    @Test func dirAndOutCannotLeaveTheRoot() async throws {
        try await ServeHarness.with { harness in
            let url = harness.origin.url(LoopbackOrigin.generatedPath(size: 1000, name: "x.bin")).absoluteString
            for dir in ["../elsewhere", "/etc", "a/../../b", harness.root.path] {
                let answer = await harness.call("aria2.addUri", [[.string(url)], ["dir": .string(dir)]])
                #expect(answer["error"]?["message"]?.stringValue?.contains("outside the download root") == true, "\(dir)")
            }
            for out in ["../x.bin", "a/b.bin", ".."] {
                let answer = await harness.call("aria2.addUri", [[.string(url)], ["out": .string(out)]])
                #expect(answer["error"]?["message"]?.stringValue?.contains("not a plain file name") == true, "\(out)")
            }
            #expect(await harness.manager.checkAll().isEmpty)
            // Inside the root, as an absolute path, with a name of its own: accepted.
            let gid = try #require(
                await harness.result("aria2.addUri", [[.string(url)], ["dir": .string(harness.root.file("downloads/in")), "out": "named.bin"]])?.stringValue)
            #expect(await harness.waitForStatus(gid, "complete"))
            #expect(fileSize(harness.root.file("downloads/in/named.bin")) == 1000)
        }
    }

    @Test func pauseUnpauseAndRemoveFollowAria() async throws {
        try await ServeHarness.with { harness in
            let path = LoopbackOrigin.generatedPath(size: 20_000_000, name: "slow.bin")
            harness.origin.inject(.throttle(bytesPerSecond: 400_000), at: path)
            let gid = try #require(await harness.result("aria2.addUri", [[.string(harness.origin.url(path).absoluteString)]])?.stringValue)
            #expect(await harness.waitForStatus(gid, "active"))
            #expect(await harness.result("aria2.tellActive", [["gid"]]) == [["gid": .string(gid)]])
            #expect(await harness.result("aria2.pause", [.string(gid)]) == .string(gid))
            #expect(await harness.waitForStatus(gid, "paused"))
            #expect(await harness.result("aria2.tellWaiting", [0, 5, ["gid", "status"]]) == [["gid": .string(gid), "status": "paused"]])
            // Pausing a paused download is refused, as aria2 does.
            #expect(await harness.call("aria2.pause", [.string(gid)])["error"] != nil)
            #expect(await harness.result("aria2.unpause", [.string(gid)]) == .string(gid))
            #expect(await harness.waitForStatus(gid, "active"))
            #expect(await harness.result("aria2.remove", [.string(gid)]) == .string(gid))
            #expect(await harness.field(gid, "status") == "removed")
            #expect(await harness.result("aria2.tellStopped", [0, 5, ["gid", "status", "errorCode"]]) == [["gid": .string(gid), "status": "removed", "errorCode": "31"]])
            #expect(await harness.manager.checkAll().isEmpty)
            #expect(await harness.result("aria2.purgeDownloadResult") == "OK")
            #expect(await harness.result("aria2.tellStopped", [0, 5]) == [])
        }
    }

    @Test func globalOptionsChangeTheRateLimitAndTheTaskLimit() async throws {
        try await ServeHarness.with { harness in
            #expect(await harness.result("aria2.changeGlobalOption", [["max-overall-download-limit": "512K", "max-concurrent-downloads": "7"]]) == "OK")
            #expect(harness.engine.globalRateLimit == Int64(524_288))
            #expect(await harness.manager.maxConcurrentTasks == 7)
            let options = try #require(await harness.result("aria2.getGlobalOption"))
            #expect(options["max-overall-download-limit"] == "524288")
            #expect(options["max-concurrent-downloads"] == "7")
            #expect(options["dir"] == .string(harness.root.file("downloads")))
            #expect(await harness.result("aria2.changeGlobalOption", [["max-overall-download-limit": "0"]]) == "OK")
            #expect(harness.engine.globalRateLimit == nil)
            #expect(await harness.call("aria2.changeGlobalOption", [["max-concurrent-downloads": "0"]])["error"] != nil)
            #expect(await harness.call("aria2.changeGlobalOption", [["max-overall-download-limit": "lots"]])["error"] != nil)
            #expect(await harness.call("aria2.changeGlobalOption", [["bt-max-peers": "3"]])["error"] != nil)
        }
    }

    @Test func aMetalinkIsAGroupFollowedByItsFiles() async throws {
        try await ServeHarness.with { harness in
            let fixture = MetalinkFixture.install(on: harness.origin)
            let gid = try #require(await harness.result("aria2.addUri", [[.string(fixture.inputs[0])]])?.stringValue)
            let followers = try #require(await harness.field(gid, "followedBy")?.arrayValue?.compactMap(\.stringValue))
            #expect(followers.count >= 2)
            for child in followers {
                #expect(await harness.field(child, "belongsTo") == .string(gid))
            }
            #expect(await eventually(within: .seconds(30)) {
                let status = await harness.field(gid, "status")?.stringValue
                return status == "complete" || status == "error"
            })
            // What the files say is what the tasks say.
            let files = await harness.result("aria2.getFiles", [.string(gid)])?.arrayValue ?? []
            #expect(files.count == followers.count)
        }
    }

    @Test func aMetalinkDocumentNeedsTheServerToServeIt() async throws {
        try await ServeHarness.with { harness in
            let document = Data("<metalink/>".utf8).base64EncodedString()
            let answer = await harness.call("aria2.addMetalink", [.string(document)])
            #expect(answer["error"]?["message"] == "the server does not run yet")
            #expect(await harness.call("aria2.addMetalink", ["%%%"])["error"] != nil)
        }
    }
}

extension Aria2RPCTests {
    @Test func shutdownIsRefusedUnlessTheOwnerAllowsIt() async throws {
        try await ServeHarness.with { harness in
            #expect(await harness.call("aria2.shutdown")["error"]?["message"] == "this daemon cannot be shut down over RPC")
        }
    }

    @Test func pauseTrueAddsWithoutQueueingUntilUnpaused() async throws {
        try await ServeHarness.with { harness in
            let url = harness.origin.url(LoopbackOrigin.generatedPath(size: 4000, name: "later.bin")).absoluteString
            let gid = try #require(await harness.result("aria2.addUri", [[.string(url)], ["pause": "true"]])?.stringValue)
            #expect(await harness.field(gid, "status") == "paused")
            #expect(await consistently(for: .milliseconds(200)) { harness.origin.totalRequests == 0 })
            #expect(await harness.result("aria2.unpauseAll") == "OK")
            #expect(await harness.waitForStatus(gid, "complete"))
        }
    }
}
