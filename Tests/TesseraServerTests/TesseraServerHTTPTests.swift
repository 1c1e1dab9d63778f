import Foundation
import Logging
import Testing
import Tessera
@testable import TesseraServer
import TesseraTesting

/// The HTTP server on 127.0.0.1 (a free port), started and stopped by each test.
@Suite(.timeLimit(.minutes(2))) struct TesseraServerHTTPTests {
    struct Running {
        let harness: ServeHarness
        let port: Int

        func post(_ path: String, _ body: Data, headers: [String: String] = [:]) async throws -> (Data, LoopbackHTTP.Response) {
            let response = try await LoopbackHTTP.request(port: port, method: "POST", path: path, headers: headers, body: body)
            return (response.body, response)
        }

        func get(_ path: String, headers: [String: String] = [:]) async throws -> (Data, LoopbackHTTP.Response) {
            let response = try await LoopbackHTTP.request(port: port, path: path, headers: headers)
            return (response.body, response)
        }

        func rpc(_ method: String, _ params: [RPCValue]) async throws -> RPCValue {
            let body: RPCValue = ["jsonrpc": "2.0", "id": "t", "method": .string(method), "params": .array(["token:s3cret"] + params)]
            return try RPCValue.parse(try await post("/jsonrpc", body.data).0)
        }
    }

    /// Runs `body` with a server on a free port; the server is stopped (its task cancelled)
    /// and awaited afterwards.
    func withServer(maxBodySize: Int = 64 << 10, allowsAnyOrigin: Bool = false, _ body: (Running) async throws -> Void) async throws {
        try await ServeHarness.with(secret: "s3cret") { harness in
            var configuration = TesseraServer.Configuration()
            configuration.port = 0
            configuration.maxBodySize = maxBodySize
            configuration.allowsAnyOrigin = allowsAnyOrigin
            let server = TesseraServer(daemon: harness.daemon, configuration: configuration, logger: quietLogger)
            let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
            let serving = Task { try await server.run { port in continuation.yield(port) } }
            var iterator = ports.makeAsyncIterator()
            guard let port = await iterator.next() else { throw ServerDidNotStart() }
            do {
                try await body(Running(harness: harness, port: port))
            } catch {
                serving.cancel()
                _ = await serving.result
                throw error
            }
            serving.cancel()
            _ = await serving.result
        }
    }

    @Test func jsonRPCOverHTTPWithAuthAndCORS() async throws {
        try await withServer { server in
            let version = try await server.rpc("aria2.getVersion", [])
            #expect(version["result"]?["version"] == .string(Tessera.version))
            let anonymous: RPCValue = ["jsonrpc": "2.0", "id": 1, "method": "aria2.tellActive", "params": []]
            let (data, response) = try await server.post("/jsonrpc", anonymous.data)
            #expect(response.statusCode == 200)
            #expect(try RPCValue.parse(data)["error"]?["message"] == "Unauthorized")
            // No CORS header unless asked for (aria2's --rpc-allow-origin-all): a page of another
            // origin cannot read the answers.
            #expect(response.value(forHTTPHeaderField: "Access-Control-Allow-Origin") == nil)
        }
        try await withServer(allowsAnyOrigin: true) { server in
            let (_, response) = try await server.post("/jsonrpc", Data("{}".utf8))
            #expect(response.value(forHTTPHeaderField: "Access-Control-Allow-Origin") == "*")
        }
    }

    @Test func anOversizedBodyIsRefused() async throws {
        try await withServer(maxBodySize: 4096) { server in
            let big = Data(repeating: 0x20, count: 100_000)
            let (_, response) = try await server.post("/jsonrpc", big)
            #expect(response.statusCode == 413)
            // The server still answers.
            #expect(try await server.rpc("aria2.getGlobalStat", [])["result"]?["numActive"] == "0")
        }
    }

    @Test func theNativeAPINeedsTheSecretAndListsTasksAndGroups() async throws {
        try await withServer { server in
            #expect(try await server.get("/api/tasks").1.statusCode == 401)
            #expect(try await server.get("/api/tasks?token=wrong").1.statusCode == 401)
            let url = server.harness.origin.url(LoopbackOrigin.generatedPath(size: 5000, name: "api.bin")).absoluteString
            let gid = try #require(try await server.rpc("aria2.addUri", [[.string(url)]])["result"]?.stringValue)
            #expect(await server.harness.waitForStatus(gid, "complete"))
            let (data, response) = try await server.get("/api/tasks", headers: ["Authorization": "Bearer s3cret"])
            #expect(response.statusCode == 200)
            let tasks = try RPCValue.parse(data).arrayValue ?? []
            #expect(tasks.count == 1)
            #expect(tasks.first?["gid"] == .string(gid))
            #expect(tasks.first?["state"] == "completed")
            #expect(tasks.first?["plugin"] == "direct")
            let groups = try await server.get("/api/groups?token=s3cret")
            #expect(groups.1.statusCode == 200)
            #expect(try RPCValue.parse(groups.0) == [])
            let resolved = try await server.post("/api/resolve", RPCValue.object(["input": .string(url)]).data, headers: ["Authorization": "Bearer s3cret"])
            #expect(try RPCValue.parse(resolved.0).arrayValue?.first?["gid"] == .string(gid))
        }
    }

    @Test func metricsAndTheDashboardAreServed() async throws {
        try await withServer { server in
            let (metrics, response) = try await server.get("/metrics")
            #expect(response.statusCode == 200)
            #expect(response.value(forHTTPHeaderField: "Content-Type")?.hasPrefix("text/plain") == true)
            #expect(String(decoding: metrics, as: UTF8.self).contains("tessera_tasks{state=\"downloading\"} 0"))
            let (page, pageResponse) = try await server.get("/")
            #expect(String(decoding: page, as: UTF8.self).contains("id=\"add-form\""))
            #expect(pageResponse.value(forHTTPHeaderField: "Content-Security-Policy")?.contains("default-src 'self'") == true)
            #expect(try await server.get("/dashboard.js").1.statusCode == 200)
            #expect(try await server.get("/rpc-documents/../../etc/passwd").1.statusCode == 404)
        }
    }

    @Test func addMetalinkServesTheDocumentToItsOwnTasks() async throws {
        try await withServer { server in
            let origin = server.harness.origin
            let content = origin.content(at: LoopbackOrigin.generatedPath(size: 70_000, name: "m.bin"))
            let sha = Checksum.compute(.sha256, bytes: content.bytes(0..<70_000)).hexDigest
            let document = """
                <?xml version="1.0" encoding="UTF-8"?>
                <metalink xmlns="urn:ietf:params:xml:ns:metalink"><file name="from-document.bin"><size>70000</size>
                <hash type="sha-256">\(sha)</hash><url>\(origin.url(LoopbackOrigin.generatedPath(size: 70_000, name: "m.bin")).absoluteString)</url></file></metalink>
                """
            let answer = try await server.rpc("aria2.addMetalink", [.string(Data(document.utf8).base64EncodedString())])
            let gids = answer["result"]?.arrayValue?.compactMap(\.stringValue) ?? []
            #expect(gids.count == 1, "\(answer)")
            guard let gid = gids.first else { return }
            #expect(await server.harness.waitForStatus(gid, "complete"))
            #expect(fileSize(server.harness.root.file("downloads/from-document.bin")) == 70_000)
        }
    }

    @Test func eventsStreamTheJSONObjectsAndEndWithTheServer() async throws {
        try await withServer { server in
            let reader = try LoopbackHTTP.stream(port: server.port, path: "/events?token=s3cret")
            defer { reader.close() }
            #expect(await eventually(within: .seconds(10)) { reader.statusCode == 200 })
            let url = server.harness.origin.url(LoopbackOrigin.generatedPath(size: 5000, name: "sse.bin")).absoluteString
            let gid = try #require(try await server.rpc("aria2.addUri", [[.string(url)]])["result"]?.stringValue)
            #expect(await eventually(within: .seconds(20)) {
                reader.text.contains("\"state\":\"completed\"") && reader.text.contains("\"gid\":\"\(gid)\"")
            })
            let first = reader.text.components(separatedBy: "\n\n").first ?? ""
            #expect(first.hasPrefix("data: {"))
            #expect(first.contains("\"type\":\"task_added\""))
        }
    }

    @Test func cancellingTheServerEndsItsOpenEventStreams() async throws {
        try await ServeHarness.with(secret: nil) { harness in
            var configuration = TesseraServer.Configuration()
            configuration.port = 0
            let server = TesseraServer(daemon: harness.daemon, configuration: configuration, logger: quietLogger)
            let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
            let serving = Task { try await server.run { port in continuation.yield(port) } }
            var iterator = ports.makeAsyncIterator()
            let port = try #require(await iterator.next())
            let reader = try LoopbackHTTP.stream(port: port, path: "/events")
            defer { reader.close() }
            #expect(await eventually(within: .seconds(10)) { reader.statusCode == 200 })
            serving.cancel()
            let stopped = Locked(false)
            let waiter = Task {
                _ = await serving.result
                stopped.withLock { $0 = true }
            }
            #expect(await eventually(within: .seconds(15)) { stopped.withLock { $0 } })
            waiter.cancel()
            // Its stream ended with it.
            #expect(await eventually(within: .seconds(15)) { reader.ended })
        }
    }
}

struct ServerDidNotStart: Error {}

/// Hummingbird logs a cancelled server's shutdown as an error; these tests cancel theirs.
let quietLogger: Logger = {
    var logger = Logger(label: "tessera.serve.tests")
    logger.logLevel = .critical
    return logger
}()
