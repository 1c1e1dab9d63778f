import CoreMetrics
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
    /// `cache`: the manager has a segment cache. `requestMetrics`: the server runs with the daemon's
    /// metrics factory bound to its task (`withMetricsFactory`), as `tessera serve`'s global
    /// bootstrap does for the whole process, so Hummingbird's `MetricsMiddleware` reports to it.
    func withServer(
        maxBodySize: Int = 64 << 10, allowsAnyOrigin: Bool = false, cache: Bool = false, requestMetrics: Bool = false,
        _ body: (Running) async throws -> Void
    ) async throws {
        try await ServeHarness.with(secret: "s3cret", cache: cache) { harness in
            var configuration = TesseraServer.Configuration()
            configuration.port = 0
            configuration.maxBodySize = maxBodySize
            configuration.allowsAnyOrigin = allowsAnyOrigin
            let server = TesseraServer(daemon: harness.daemon, configuration: configuration, logger: quietLogger)
            let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
            let serving = requestMetrics
                ? withMetricsFactory(harness.daemon.metrics.factory) { Task { try await server.run { port in continuation.yield(port) } } }
                : Task { try await server.run { port in continuation.yield(port) } }
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

    /// The families `/metrics` exported before it went through swift-metrics and swift-prometheus,
    /// as dashboards know them: name, type, help, label names. (Values are Prometheus's floats
    /// for gauges now: `1.0` where it was `1`.)
    static let familiesDashboardsKnow: [(name: String, type: String, help: String, labels: [String])] = [
        ("tessera_downloaded_bytes_total", "counter", "Bytes the daemon's tasks have downloaded (outputs).", []),
        ("tessera_engine_received_bytes_total", "counter", "Body bytes received by finished transfers.", []),
        ("tessera_transfers_total", "counter", "Transfers finished, in success or failure.", []),
        ("tessera_transfers_active", "gauge", "Transfers handed to libcurl now.", []),
        ("tessera_transfers_queued", "gauge", "Transfers waiting for a slot.", []),
        ("tessera_tasks", "gauge", "Tasks by state.", ["state"]),
        ("tessera_groups", "gauge", "Groups.", []),
        ("tessera_download_speed_bytes", "gauge", "Summed download speed of the tasks, bytes per second.", []),
        ("tessera_tasks_added_total", "counter", "Tasks added over RPC.", []),
        ("tessera_tasks_completed_total", "counter", "Tasks that completed while the daemon ran.", []),
        ("tessera_task_failures_total", "counter", "Tasks that failed or became invalid, by error code.", ["code"]),
        ("tessera_errors_retried_total", "counter", "Errors retried, by error code.", ["code"]),
        ("tessera_cache_entries", "gauge", "Segments in the segment cache.", []),
        ("tessera_cache_bytes", "gauge", "Bytes in the segment cache.", []),
        ("tessera_cache_hits_total", "counter", "Segments taken from the cache (verified).", []),
        ("tessera_cache_misses_total", "counter", "Cache lookups that found no usable entry.", []),
    ]

    /// A Prometheus text exposition read back: each family's help, type and samples.
    struct Exposition {
        var help: [String: String] = [:]
        var type: [String: String] = [:]
        /// Sample name → [(labels, value)].
        var samples: [String: [(labels: [String: String], value: Double)]] = [:]

        init(_ text: String) {
            for line in text.split(separator: "\n").map(String.init) {
                if line.hasPrefix("# HELP ") {
                    let rest = line.dropFirst(7)
                    let name = rest.prefix { $0 != " " }
                    #expect(help[String(name)] == nil, "HELP twice for \(name)")
                    help[String(name)] = String(rest.dropFirst(name.count + 1))
                } else if line.hasPrefix("# TYPE ") {
                    let parts = line.dropFirst(7).split(separator: " ")
                    #expect(type[String(parts[0])] == nil, "TYPE twice for \(parts[0])")
                    type[String(parts[0])] = parts.count > 1 ? String(parts[1]) : ""
                } else if let match = line.wholeMatch(of: /([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (.+)/) {
                    var labels: [String: String] = [:]
                    for pair in (match.3.map(String.init) ?? "").matches(of: /([a-zA-Z_]+)="([^"]*)"/) { labels[String(pair.1)] = String(pair.2) }
                    samples[String(match.1), default: []].append((labels, Double(match.4) ?? .nan))
                } else {
                    Issue.record("not a line of the text format: \(line)")
                }
            }
        }

        func value(_ name: String, _ labels: [String: String] = [:]) -> Double? {
            samples[name]?.first { $0.labels == labels }?.value
        }
    }

    @Test func metricsKeepTheirNamesTypesAndHelpAndAddRemovalsTransfersAndRequests() async throws {
        try await withServer(cache: true, requestMetrics: true) { server in
            let origin = server.harness.origin
            let file = LoopbackOrigin.generatedPath(size: 300_000, name: "m.bin")
            let retried = LoopbackOrigin.generatedPath(size: 1000, name: "r.bin")
            origin.inject(.status(503, retryAfter: "0"), at: retried, times: 1)
            var gids: [String] = []
            for path in [file, retried, "/missing/none.bin"] {
                gids.append(try #require(try await server.rpc("aria2.addUri", [[.string(origin.url(path).absoluteString)]])["result"]?.stringValue))
            }
            #expect(await server.harness.waitForStatus(gids[0], "complete"))
            #expect(await server.harness.waitForStatus(gids[1], "complete"))
            #expect(await server.harness.waitForStatus(gids[2], "error"))
            let paused = try #require(try await server.rpc(
                "aria2.addUri", [[.string(origin.url(LoopbackOrigin.generatedPath(size: 10, name: "p.bin")).absoluteString)], ["pause": "true"]])["result"]?.stringValue)
            #expect(try await server.rpc("aria2.remove", [.string(paused)])["result"] == .string(paused))
            #expect(try await server.get("/no/such/route").1.statusCode == 404)
            // The counters come from the events: the last ones may still be on their way.
            var metrics = Exposition("")
            let settled = await eventually(within: .seconds(20)) {
                let text = String(decoding: (try? await server.get("/metrics").0) ?? Data(), as: UTF8.self)
                metrics = Exposition(text)
                return metrics.value("tessera_tasks_completed_total") == 2 && metrics.value("tessera_downloaded_bytes_total") == 301_000
                    && metrics.value("tessera_task_failures_total", ["code": "httpStatus"]) == 1
            }
            #expect(settled)
            for family in Self.familiesDashboardsKnow {
                #expect(metrics.help[family.name] == family.help, "\(family.name)'s HELP")
                #expect(metrics.type[family.name] == family.type, "\(family.name)'s TYPE")
                let samples = metrics.samples[family.name] ?? []
                #expect(!samples.isEmpty, "\(family.name) has samples")
                for sample in samples { #expect(sample.labels.keys.sorted() == family.labels, "\(family.name)'s labels") }
            }
            #expect(metrics.samples["tessera_tasks"]?.map { $0.labels["state"] ?? "" }.sorted()
                == ["completed", "downloading", "failed", "idle", "interrupted", "invalid", "paused", "resolving", "waiting"])
            #expect(metrics.value("tessera_tasks", ["state": "completed"]) == 2)
            #expect(metrics.value("tessera_tasks_added_total") == 4)
            #expect(metrics.value("tessera_errors_retried_total", ["code": "httpStatus"]) == 1)
            // The engine's own counts: three files, the 503 and the 404 (a transfer each).
            #expect(metrics.value("tessera_transfers_total") == 4)
            #expect((metrics.value("tessera_engine_received_bytes_total") ?? 0) >= 301_000)
            // What was counted and not exported before: removals over RPC, transfers by outcome and
            // their durations, and the HTTP requests (Hummingbird's MetricsMiddleware).
            #expect(metrics.type["tessera_tasks_removed_total"] == "counter")
            #expect(metrics.value("tessera_tasks_removed_total") == 1)
            #expect(metrics.value("tessera_transfer_outcomes_total", ["outcome": "completed"]) == 2)
            #expect(metrics.value("tessera_transfer_outcomes_total", ["outcome": "failed"]) == 2, "the 503 and the 404")
            #expect(metrics.value("tessera_transfer_outcomes_total", ["outcome": "cancelled"]) == 0)
            #expect(metrics.type["tessera_transfer_duration_seconds"] == "histogram")
            #expect(metrics.value("tessera_transfer_duration_seconds_count") == 4)
            #expect(metrics.type["hb_requests"] == "counter")
            #expect(metrics.help["hb_requests"] == "HTTP requests answered, by route, method and status.")
            #expect((metrics.value("hb_requests", ["http_route": "/jsonrpc", "http_request_method": "POST", "http_response_status_code": "200"]) ?? 0) >= 5)
            #expect(metrics.type["http_server_request_duration"] == "histogram")
            #expect(metrics.type["hb_request_errors"] == "counter")
            #expect(metrics.type["http_server_active_requests"] == "gauge")
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
