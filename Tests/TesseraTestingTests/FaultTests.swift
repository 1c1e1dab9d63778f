import Testing
import TesseraTesting

extension OriginTests {
    @Suite("Faults")
    struct FaultTests {
        @Test("dropConnection(afterBytes:) closes after exactly that many body bytes", arguments: [0, 1, 1000, 65_536, 100_001] as [Int64])
        func drop(after: Int64) async throws {
            try await withLoopbackOrigin { origin in
                let path = "/bytes/200000/drop.bin"
                origin.inject(.dropConnection(afterBytes: after), at: path)
                let connection = try origin.connect()
                defer { connection.close() }
                let response = try connection.request("GET", path)
                #expect(response.status == 200)
                #expect(response.header("Content-Length") == "200000")
                #expect(response.closedEarly)
                #expect(response.body.count == Int(after))
                #expect(response.body == OriginContent(path: path).bytes(0..<after))
                #expect(try connection.readUntilClose().isEmpty)
                #expect(origin.bytesServed(for: path) == after)
            }
        }

        @Test("dropConnection at or past the end lets the response complete")
        func dropPastEnd() async throws {
            try await withLoopbackOrigin { origin in
                let path = "/bytes/5000/drop-late.bin"
                origin.inject(.dropConnection(afterBytes: 5000), at: path)
                let response = try origin.rawRequest(path)
                #expect(!response.closedEarly)
                #expect(response.body == OriginContent(path: path).bytes(0..<5000))
            }
        }

        @Test("dropConnection of a Range request counts from the range's first byte")
        func dropRange() async throws {
            try await withLoopbackOrigin { origin in
                let path = "/bytes/200000/drop-range.bin"
                origin.inject(.dropConnection(afterBytes: 100), at: path)
                let response = try origin.rawRequest(path, headers: [("Range", "bytes=70000-")])
                #expect(response.status == 206)
                #expect(response.header("Content-Length") == "130000")
                #expect(response.closedEarly)
                #expect(response.body == OriginContent(path: path).bytes(70_000..<70_100))
            }
        }

        @Test("dropConnection sends exactly afterBytes even when the client reads late")
        func dropWithSlowReader() async throws {
            try await withLoopbackOrigin { origin in
                let path = "/bytes/67108864/drop-slow.bin"
                let after: Int64 = 24 << 20
                origin.inject(.dropConnection(afterBytes: after), at: path)
                let connection = try origin.connect()
                defer { connection.close() }
                try connection.send("GET", path)
                // Let the socket buffers fill: the origin stops at the backpressure.
                let stopped = await settledValue(quiet: .milliseconds(50)) { origin.bytesServed(for: path) }
                #expect(stopped != nil, "the origin stops writing at the backpressure")
                let head = try connection.readHead()
                #expect(head.status == 200)
                var verifier = StreamingTests.StreamVerifier(content: OriginContent(path: path))
                let received = Int64(try connection.readBody(limit: nil) { verifier.consume($0) })
                verifier.finish()
                #expect(verifier.firstMismatch == nil)
                #expect(received <= after)
                #expect(origin.bytesServed(for: path) == after)
                #expect(received == after, "\(after - received) bytes counted as served were never sent")
            }
        }

        @Test("status(503, retryAfter:) answers 503 with Retry-After")
        func status503() async throws {
            try await withLoopbackOrigin { origin in
                let path = "/bytes/1000/busy.bin"
                origin.inject(.status(503, retryAfter: "7"), at: path)
                let response = try origin.rawRequest(path)
                #expect(response.status == 503)
                #expect(response.header("Retry-After") == "7")
                #expect(response.header("Content-Length").flatMap(Int.init) == response.body.count)
                #expect(response.header("ETag") == nil)
                #expect(response.body != OriginContent(path: path).bytes(0..<Int64(response.body.count)) || response.body.isEmpty)
            }
        }

        @Test("status(_:) answers that status, without Retry-After unless given", arguments: [429, 404, 403, 500, 502])
        func status(code: Int) async throws {
            try await withLoopbackOrigin { origin in
                let path = "/bytes/1000/status.bin"
                origin.inject(.status(code), at: path)
                let response = try origin.rawRequest(path)
                #expect(response.status == code)
                #expect(response.header("Retry-After") == nil)
                #expect(response.header("Content-Length") != "1000")

                origin.inject(.status(code, retryAfter: "Wed, 21 Oct 2015 07:28:00 GMT"), at: "/other")
                let dated = try origin.rawRequest("/other")
                #expect(dated.status == code)
                #expect(dated.header("Retry-After") == "Wed, 21 Oct 2015 07:28:00 GMT")
            }
        }

        @Test("a fault with times: 1 applies once, then the normal response comes back")
        func timesOne() async throws {
            try await withLoopbackOrigin { origin in
                let path = "/bytes/3000/once.bin"
                origin.inject(.status(503, retryAfter: "1"), at: path, times: 1)
                let connection = try origin.connect()
                defer { connection.close() }
                #expect(try connection.request("GET", path).status == 503)
                let second = try connection.request("GET", path)
                #expect(second.status == 200)
                #expect(second.body == OriginContent(path: path).bytes(0..<3000))
                #expect(try connection.request("GET", path).status == 200)
                #expect(origin.requestCount(for: path) == 3)
            }
        }

        @Test("times: n applies n times; times: nil applies to every request")
        func timesCounting() async throws {
            try await withLoopbackOrigin { origin in
                origin.inject(.status(500), at: "/bytes/10/twice.bin", times: 2)
                origin.inject(.status(429), at: "/bytes/10/always.bin")
                let twice = try (0..<4).map { _ in try origin.rawRequest("/bytes/10/twice.bin").status }
                #expect(twice == [500, 500, 200, 200])
                let always = try (0..<4).map { _ in try origin.rawRequest("/bytes/10/always.bin").status }
                #expect(always == [429, 429, 429, 429])
                // Faults belong to their path only.
                #expect(try origin.rawRequest("/bytes/10/other.bin").status == 200)
            }
        }

        @Test("stall(_:afterBytes:) pauses the body after that many bytes")
        func stallAfterBytes() async throws {
            try await withLoopbackOrigin { origin in
                let path = "/bytes/50000/stall.bin"
                let stall = Duration.milliseconds(500)
                origin.inject(.stall(stall, afterBytes: 1000), at: path)
                let connection = try origin.connect()
                defer { connection.close() }
                let start = ContinuousClock.now
                try connection.send("GET", path)
                let head = try connection.readHead()
                var firstBytes: [UInt8] = []
                try connection.readBody(limit: 1000) { firstBytes.append(contentsOf: $0) }
                let beforeStall = ContinuousClock.now - start
                var rest: [UInt8] = []
                try connection.readBody(limit: 49_000) { rest.append(contentsOf: $0) }
                let elapsed = ContinuousClock.now - start
                #expect(head.status == 200)
                #expect(beforeStall < stall, "the first 1000 bytes came after \(seconds(beforeStall)) s")
                #expect(elapsed >= stall, "took \(seconds(elapsed)) s")
                #expect(firstBytes + rest == OriginContent(path: path).bytes(0..<50_000))
            }
        }

        @Test("hold(_:afterBytes:) stops the body after that many bytes until the gate opens, and lets later responses through")
        func holdUntilTheGateOpens() async throws {
            try await withLoopbackOrigin { origin in
                let path = "/bytes/50000/hold.bin"
                let gate = LoopbackOrigin.Gate()
                origin.inject(.hold(gate, afterBytes: 1000), at: path)
                let connection = try origin.connect()
                defer { connection.close() }
                try connection.send("GET", path)
                #expect(try connection.readHead().status == 200)
                var body: [UInt8] = []
                try connection.readBody(limit: 1000) { body.append(contentsOf: $0) }
                // The first 1000 bytes were flushed after the writing loop stopped at the hold;
                // without it the same loop would have written on.
                #expect(origin.bytesServed(for: path) == 1000)
                #expect(!gate.isOpen)
                gate.open()
                #expect(gate.isOpen)
                try connection.readBody(limit: 49_000) { body.append(contentsOf: $0) }
                #expect(body == OriginContent(path: path).bytes(0..<50_000))
                // An open gate holds nothing.
                #expect(try origin.rawRequest(path).body == OriginContent(path: path).bytes(0..<50_000))
            }
        }

        @Test("hold with afterBytes nil holds the response head until the gate opens")
        func holdHeaders() async throws {
            try await withLoopbackOrigin { origin in
                let path = "/bytes/1000/hold-head.bin"
                let gate = LoopbackOrigin.Gate()
                origin.inject(.hold(gate, afterBytes: nil), at: path, times: 1)
                let connection = try origin.connect()
                defer { connection.close() }
                try connection.send("GET", path)
                #expect(await eventually { origin.requestCount(for: path) == 1 })
                #expect(origin.bytesServed(for: path) == 0)
                gate.open()
                #expect(try connection.readHead().status == 200)
                var body: [UInt8] = []
                try connection.readBody(limit: 1000) { body.append(contentsOf: $0) }
                #expect(body == OriginContent(path: path).bytes(0..<1000))
            }
        }

        @Test("stall with afterBytes nil delays the response head")
        func stallHeaders() async throws {
            try await withLoopbackOrigin { origin in
                let path = "/bytes/1000/stall-head.bin"
                let stall = Duration.milliseconds(400)
                origin.inject(.stall(stall, afterBytes: nil), at: path, times: 1)
                let connection = try origin.connect()
                defer { connection.close() }
                let start = ContinuousClock.now
                try connection.send("GET", path)
                let head = try connection.readHead()
                let headElapsed = ContinuousClock.now - start
                #expect(head.status == 200)
                #expect(headElapsed >= stall, "the head came after \(seconds(headElapsed)) s")
                var body: [UInt8] = []
                try connection.readBody(limit: 1000) { body.append(contentsOf: $0) }
                #expect(body == OriginContent(path: path).bytes(0..<1000))
                // The fault was used up: the next request is not delayed.
                let again = ContinuousClock.now
                #expect(try connection.request("GET", path).status == 200)
                #expect(ContinuousClock.now - again < stall)
            }
        }


        @Test("wrongContentLength(delta: +100) announces n+100, sends n bytes and closes")
        func contentLengthTooLarge() async throws {
            try await withLoopbackOrigin { origin in
                let path = "/bytes/5000/long.bin"
                origin.inject(.wrongContentLength(delta: 100), at: path)
                let connection = try origin.connect()
                defer { connection.close() }
                let response = try connection.request("GET", path)
                #expect(response.status == 200)
                #expect(response.header("Content-Length") == "5100")
                #expect(response.header("Connection") == "close")
                #expect(response.closedEarly)
                #expect(response.body == OriginContent(path: path).bytes(0..<5000))
                #expect(origin.bytesServed(for: path) == 5000)
            }
        }

        @Test("wrongContentLength(delta: -100) announces n-100, sends n bytes and closes")
        func contentLengthTooSmall() async throws {
            try await withLoopbackOrigin { origin in
                let path = "/bytes/5000/short.bin"
                origin.inject(.wrongContentLength(delta: -100), at: path)
                let connection = try origin.connect()
                defer { connection.close() }
                let response = try connection.request("GET", path)
                #expect(response.status == 200)
                #expect(response.header("Content-Length") == "4900")
                #expect(response.header("Connection") == "close")
                #expect(!response.closedEarly)
                // The 100 surplus bytes follow, then the connection closes.
                let surplus = try connection.readUntilClose()
                #expect(response.body + surplus == OriginContent(path: path).bytes(0..<5000))
                #expect(surplus.count == 100)
            }
        }

        @Test("redirect(to:) answers 302 with Location, whatever the scheme", arguments: [
            "/bytes/10/target.bin", "http://127.0.0.1:1/elsewhere", "ftp://example.invalid/x",
        ])
        func redirect(location: String) async throws {
            try await withLoopbackOrigin { origin in
                let path = "/bytes/1000/moved.bin"
                origin.inject(.redirect(to: location), at: path)
                let response = try origin.rawRequest(path)
                #expect(response.status == 302)
                #expect(response.header("Location") == location)
                #expect(response.header("Content-Length").flatMap(Int.init) == response.body.count)
            }
        }

        @Test("redirect(to:status:) uses the given status", arguments: [301, 303, 307, 308])
        func redirectStatus(status: Int) async throws {
            try await withLoopbackOrigin { origin in
                origin.inject(.redirect(to: "/bytes/1/t", status: status), at: "/moved")
                let response = try origin.rawRequest("/moved")
                #expect(response.status == status)
                #expect(response.header("Location") == "/bytes/1/t")
            }
        }

        @Test("ignoreRange answers a Range request with 200 and the full body")
        func ignoreRange() async throws {
            try await withLoopbackOrigin { origin in
                let path = "/bytes/70000/ignore.bin"
                origin.inject(.ignoreRange, at: path)
                let response = try origin.rawRequest(path, headers: [("Range", "bytes=100-199")])
                #expect(response.status == 200)
                #expect(response.header("Content-Range") == nil)
                #expect(response.header("Content-Length") == "70000")
                #expect(response.header("Accept-Ranges") == "none")
                #expect(response.body == OriginContent(path: path).bytes(0..<70_000))
            }
        }

        @Test("shiftContentRange(by:) shifts the Content-Range header, not the bytes", arguments: [5, -50, 65_536] as [Int64])
        func shiftContentRange(shift: Int64) async throws {
            try await withLoopbackOrigin { origin in
                let path = "/bytes/200000/shift.bin"
                origin.inject(.shiftContentRange(by: shift), at: path)
                let response = try origin.rawRequest(path, headers: [("Range", "bytes=100-199")])
                #expect(response.status == 206)
                #expect(response.header("Content-Range") == "bytes \(100 + shift)-\(199 + shift)/200000")
                #expect(response.header("Content-Length") == "100")
                #expect(response.body == OriginContent(path: path).bytes(100..<200))
                // Without a Range there is no Content-Range to shift.
                let whole = try origin.rawRequest(path)
                #expect(whole.status == 200)
                #expect(whole.header("Content-Range") == nil)
            }
        }

        @Test("clearFaults(at:) and clearFaults() restore normal behaviour")
        func clearFaults() async throws {
            try await withLoopbackOrigin { origin in
                let a = "/bytes/100/a.bin"
                let b = "/bytes/100/b.bin"
                origin.inject(.status(500), at: a)
                origin.inject(.dropConnection(afterBytes: 10), at: a)
                origin.inject(.status(503), at: b)
                #expect(try origin.rawRequest(a).status == 500)
                #expect(try origin.rawRequest(b).status == 503)

                origin.clearFaults(at: a)
                let cleared = try origin.rawRequest(a)
                #expect(cleared.status == 200)
                #expect(!cleared.closedEarly)
                #expect(cleared.body == OriginContent(path: a).bytes(0..<100))
                #expect(try origin.rawRequest(b).status == 503)

                origin.inject(.ignoreRange, at: a)
                origin.clearFaults()
                #expect(try origin.rawRequest(b).status == 200)
                #expect(try origin.rawRequest(a, headers: [("Range", "bytes=0-9")]).status == 206)
            }
        }


        @Test("faults of different kinds combine: stall + range shift + wrong length")
        func stallShiftAndLength() async throws {
            try await withLoopbackOrigin { origin in
                let path = "/bytes/10000/combined.bin"
                origin.inject(.stall(.milliseconds(200), afterBytes: 10), at: path, times: 1)
                origin.inject(.shiftContentRange(by: 1), at: path, times: 1)
                origin.inject(.wrongContentLength(delta: 10), at: path, times: 1)
                let start = ContinuousClock.now
                let response = try origin.rawRequest(path, headers: [("Range", "bytes=0-99")])
                #expect(ContinuousClock.now - start >= .milliseconds(200))
                #expect(response.status == 206)
                #expect(response.header("Content-Range") == "bytes 1-100/10000")
                #expect(response.header("Content-Length") == "110")
                #expect(response.closedEarly)
                #expect(response.body == OriginContent(path: path).bytes(0..<100))
                // All three were used up.
                let normal = try origin.rawRequest(path, headers: [("Range", "bytes=0-99")])
                #expect(normal.header("Content-Range") == "bytes 0-99/10000")
                #expect(normal.header("Content-Length") == "100")
            }
        }
    }
}
