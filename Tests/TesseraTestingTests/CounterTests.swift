import Testing
@testable import TesseraTesting

extension OriginTests {
    @Suite("Counters")
    struct CounterTests {
        @Test("requestCount(for:) counts requests of any method per path, without the query")
        func requestCount() async throws {
            try await withLoopbackOrigin { origin in
                let path = "/bytes/100/count.bin"
                #expect(origin.requestCount(for: path) == 0)
                _ = try origin.rawRequest(path)
                _ = try origin.rawRequest("HEAD", path)
                _ = try origin.rawRequest(path + "?attempt=3")
                _ = try origin.rawRequest("/missing")
                #expect(origin.requestCount(for: path) == 3)
                #expect(origin.requestCount(for: "/missing") == 1)
                #expect(origin.requestCount(for: "/bytes/100/other.bin") == 0)
                #expect(origin.totalRequests == 4)
            }
        }

        @Test("requests(for:) records method, path, uri, headers and connection, in order")
        func recordedRequests() async throws {
            try await withLoopbackOrigin { origin in
                let path = "/bytes/1000/recorded.bin"
                _ = try origin.rawRequest(path + "?x=1&y=2", headers: [("X-Test-Token", "abc 123"), ("Range", "bytes=0-9")])
                _ = try origin.rawRequest("HEAD", path, headers: [("User-Agent", "raw-client/1")])
                _ = try origin.rawRequest("/bytes/1/unrelated.bin")

                let records = origin.requests(for: path)
                try #require(records.count == 2)
                let get = records[0]
                #expect(get.method == "GET")
                #expect(get.path == path)
                #expect(get.uri == path + "?x=1&y=2")
                #expect(get.header("X-Test-Token") == "abc 123")
                #expect(get.header("x-test-token") == "abc 123")
                #expect(get.header("Range") == "bytes=0-9")
                #expect(get.header("Host") == "127.0.0.1")
                #expect(get.header("If-Range") == nil)
                #expect(get.headers.contains { $0.name == "X-Test-Token" && $0.value == "abc 123" })
                #expect(get.headers.first?.name == "Host")

                let head = records[1]
                #expect(head.method == "HEAD")
                #expect(head.uri == path)
                #expect(head.header("User-Agent") == "raw-client/1")
                #expect(head.header("Range") == nil)

                #expect(origin.requests.map(\.path) == [path, path, "/bytes/1/unrelated.bin"])
                #expect(origin.requests.map(\.connection) == [1, 2, 3])
                #expect(origin.totalRequests == 3)
            }
        }

        @Test("bytesServed(for:) and totalBytesServed count the body bytes sent, also of cut-short bodies")
        func bytesServed() async throws {
            try await withLoopbackOrigin { origin in
                let full = "/bytes/10000/full.bin"
                let dropped = "/bytes/10000/dropped.bin"
                #expect(origin.totalBytesServed == 0)
                #expect(try origin.rawRequest(full).body.count == 10_000)
                #expect(origin.bytesServed(for: full) == 10_000)
                #expect(try origin.rawRequest(full, headers: [("Range", "bytes=0-9")]).body.count == 10)
                #expect(origin.bytesServed(for: full) == 10_010)
                _ = try origin.rawRequest("HEAD", full)
                #expect(origin.bytesServed(for: full) == 10_010)

                origin.inject(.dropConnection(afterBytes: 300), at: dropped, times: 1)
                let cut = try origin.rawRequest(dropped)
                #expect(cut.body.count == 300)
                #expect(origin.bytesServed(for: dropped) == 300)
                #expect(origin.totalBytesServed == 10_310)
                #expect(origin.bytesServed(for: "/bytes/1/never.bin") == 0)
            }
        }

        @Test("two requests on one keep-alive connection: one connection accepted, same connection number")
        func keepAlive() async throws {
            try await withLoopbackOrigin { origin in
                let connection = try origin.connect()
                defer { connection.close() }
                let first = try connection.request("GET", "/bytes/70000/one.bin")
                let second = try connection.request("GET", "/bytes/500/two.bin", headers: [("Range", "bytes=1-2")])
                #expect(first.body == OriginContent(path: "/bytes/70000/one.bin").bytes(0..<70_000))
                #expect(second.body == OriginContent(path: "/bytes/500/two.bin").bytes(1..<3))
                #expect(first.header("Connection") != "close")
                #expect(origin.connectionsAccepted == 1)
                let records = origin.requests
                #expect(records.count == 2)
                #expect(records.map(\.connection) == [1, 1])

                // A second socket is a second connection with another number.
                let other = try origin.connect()
                defer { other.close() }
                _ = try other.request("GET", "/bytes/1/three.bin")
                #expect(origin.connectionsAccepted == 2)
                #expect(origin.requests.last?.connection == 2)
                #expect(origin.openConnections == 2)
            }
        }

        @Test("Connection: close on a request makes the origin close after the response")
        func connectionClose() async throws {
            try await withLoopbackOrigin { origin in
                let connection = try origin.connect()
                defer { connection.close() }
                let response = try connection.request("GET", "/bytes/1000/close.bin", headers: [("Connection", "close")])
                #expect(response.body.count == 1000)
                #expect(response.header("Connection") == "close")
                #expect(try connection.readUntilClose().isEmpty)
                #expect(await eventually { origin.openConnections == 0 })
            }
        }

        @Test("Connection: close is honoured for error, redirect and injected-status responses too")
        func connectionCloseOnTextResponses() async throws {
            try await withLoopbackOrigin { origin in
                origin.inject(.redirect(to: "/elsewhere"), at: "/moved")
                for path in ["/missing", "/moved"] {
                    let connection = try origin.connect()
                    defer { connection.close() }
                    let response = try connection.request("GET", path, headers: [("Connection", "close")])
                    #expect(response.status != 200)
                    try connection.setReceiveTimeout(.milliseconds(500))
                    #expect(response.header("Connection") == "close")
                    let rest = try connection.readUntilClose()
                    #expect(rest.isEmpty)
                }
            }
        }

        @Test("maxConcurrentConnections counts sockets open at once; openConnections returns to 0")
        func concurrentConnections() async throws {
            try await withLoopbackOrigin { origin in
                var connections: [RawHTTPConnection] = []
                for index in 0..<5 {
                    let connection = try origin.connect()
                    // A request makes sure the origin has accepted the connection.
                    #expect(try connection.request("GET", "/bytes/10/c\(index).bin").status == 200)
                    connections.append(connection)
                }
                #expect(origin.openConnections == 5)
                #expect(origin.maxConcurrentConnections == 5)
                #expect(origin.connectionsAccepted == 5)
                #expect(Set(origin.requests.map(\.connection)) == [1, 2, 3, 4, 5])

                for connection in connections { connection.close() }
                connections.removeAll()
                #expect(await eventually { origin.openConnections == 0 }, "open: \(origin.openConnections)")
                #expect(origin.maxConcurrentConnections == 5)

                // Sequential connections do not raise the maximum.
                for _ in 0..<3 { _ = try origin.rawRequest("/bytes/1/seq.bin") }
                #expect(await eventually { origin.openConnections == 0 })
                #expect(origin.maxConcurrentConnections == 5)
                #expect(origin.connectionsAccepted == 8)
            }
        }

        @Test("maxConcurrentConnections(grace:) leaves out overlaps shorter than the grace, and counts the rest")
        func concurrentConnectionsWithGrace() async throws {
            typealias Lifetime = (opened: UInt64, closed: UInt64?)
            // Two connections open together for 100 (ns, say), then one closed at 200 seen
            // 3 after the next one's start at 197: one at a time with a grace of 5, two without.
            let lifetimes: [Lifetime] = [(0, 100), (10, 100), (120, 200), (197, 300), (400, nil)]
            #expect(LoopbackOrigin.mostOverlapping(lifetimes, grace: 0) == 2)
            #expect(LoopbackOrigin.mostOverlapping(lifetimes, grace: 5) == 2, "the first two overlap for 85")
            #expect(LoopbackOrigin.mostOverlapping(Array(lifetimes.dropFirst()), grace: 5) == 1)
            #expect(LoopbackOrigin.mostOverlapping(Array(lifetimes.dropFirst()), grace: 0) == 2)
            // Connections shorter than the grace overlap nothing (each counts at its start); ones
            // still open count.
            #expect(LoopbackOrigin.mostOverlapping([(0, 2), (1, 3), (2, nil)], grace: 0) == 2)
            #expect(LoopbackOrigin.mostOverlapping([(0, 2), (1, 3), (2, nil)], grace: 10) == 1)
            #expect(LoopbackOrigin.mostOverlapping([(0, nil), (5, nil)], grace: 1_000) == 2)
            #expect(LoopbackOrigin.mostOverlapping([], grace: 0) == 0)

            // And as the origin records them: three sockets open together, whatever the grace.
            try await withLoopbackOrigin { origin in
                var connections: [RawHTTPConnection] = []
                for index in 0..<3 {
                    let connection = try origin.connect()
                    #expect(try connection.request("GET", "/bytes/10/g\(index).bin").status == 200)
                    connections.append(connection)
                }
                #expect(origin.maxConcurrentConnections(grace: .seconds(60)) == 3)
                for connection in connections { connection.close() }
                #expect(await eventually { origin.openConnections == 0 })
                #expect(origin.maxConcurrentConnections(grace: .zero) == 3)
            }
        }

        @Test("resetCounters forgets requests and zeroes the counters, keeping open connections counted")
        func resetCounters() async throws {
            try await withLoopbackOrigin { origin in
                let path = "/bytes/1000/reset.bin"
                let held = try origin.connect()
                defer { held.close() }
                _ = try held.request("GET", path)
                for _ in 0..<2 { _ = try origin.rawRequest(path) }
                #expect(await eventually { origin.openConnections == 1 })
                #expect(origin.totalRequests == 3)
                #expect(origin.maxConcurrentConnections >= 2)

                origin.resetCounters()
                #expect(origin.totalRequests == 0)
                #expect(origin.requests.isEmpty)
                #expect(origin.requests(for: path).isEmpty)
                #expect(origin.requestCount(for: path) == 0)
                #expect(origin.bytesServed(for: path) == 0)
                #expect(origin.totalBytesServed == 0)
                #expect(origin.connectionsAccepted == 0)
                #expect(origin.openConnections == 1)
                #expect(origin.maxConcurrentConnections == 1)

                // Counting resumes.
                _ = try held.request("GET", path)
                #expect(origin.totalRequests == 1)
                #expect(origin.bytesServed(for: path) == 1000)
                #expect(origin.requestCount(for: path) == 1)

                // Content and faults are not counters: they survive.
                origin.inject(.status(500), at: path)
                origin.resetCounters()
                #expect(try held.request("GET", path).status == 500)
            }
        }

        @Test("connection numbers stay unique across resetCounters")
        func connectionNumbersAfterReset() async throws {
            try await withLoopbackOrigin { origin in
                let first = try origin.connect()
                defer { first.close() }
                _ = try first.request("GET", "/bytes/1/a.bin")
                origin.resetCounters()
                let second = try origin.connect()
                defer { second.close() }
                _ = try second.request("GET", "/bytes/1/b.bin")
                _ = try first.request("GET", "/bytes/1/c.bin")
                let records = origin.requests
                try #require(records.count == 2)
                #expect(records[0].path == "/bytes/1/b.bin")
                #expect(origin.connectionsAccepted == 1)
                #expect(records[0].connection != records[1].connection)
            }
        }
    }
}
