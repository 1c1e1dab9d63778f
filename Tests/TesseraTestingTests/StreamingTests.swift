import Testing
import Tessera
import TesseraTesting

extension OriginTests {
    @Suite("Streaming and shutdown")
    struct StreamingTests {
        /// Compares a body with `OriginContent` in aligned 64 KiB windows as it arrives, without
        /// keeping it.
        struct StreamVerifier {
            static let window = 65_536
            let content: OriginContent
            var offset: Int64 = 0
            var received: [UInt8] = []
            var expected = [UInt8](repeating: 0, count: window)
            var firstMismatch: Int64?

            init(content: OriginContent, from offset: Int64 = 0) {
                self.content = content
                self.offset = offset
                received.reserveCapacity(Self.window)
            }

            mutating func consume(_ bytes: ArraySlice<UInt8>) {
                var rest = bytes[...]
                while !rest.isEmpty {
                    let take = min(rest.count, Self.window - received.count)
                    received.append(contentsOf: rest.prefix(take))
                    rest = rest.dropFirst(take)
                    if received.count == Self.window { check() }
                }
            }

            mutating func finish() { if !received.isEmpty { check() } }

            private mutating func check() {
                let count = received.count
                let start = offset
                expected.withUnsafeMutableBytes {
                    content.fill(UnsafeMutableRawBufferPointer(rebasing: $0[0..<count]), from: start)
                }
                if firstMismatch == nil, received[0..<count] != expected[0..<count] {
                    let index = (0..<count).first { received[$0] != expected[$0] } ?? 0
                    firstMismatch = offset + Int64(index)
                }
                offset += Int64(count)
                received.removeAll(keepingCapacity: true)
            }
        }

        @Test("a 64 MiB body streams correctly, with backpressure while the client does not read")
        func largeBody() async throws {
            try await withLoopbackOrigin { origin in
                let size: Int64 = 64 << 20
                let path = LoopbackOrigin.generatedPath(size: size, name: "large.bin")
                let connection = try origin.connect()
                defer { connection.close() }
                try connection.send("GET", path)
                let head = try connection.readHead()
                #expect(head.status == 200)
                #expect(head.contentLength == Int(size))

                var verifier = StreamVerifier(content: OriginContent(path: path))
                // Read 1 MiB, then pause: the origin must stop writing once the socket is full
                // instead of buffering the rest of the body.
                try connection.readBody(limit: 1 << 20) { verifier.consume($0) }
                // The origin fills the socket buffers, then must stop: its count comes to rest
                // (unchanged for 100 ms; only watching for a while shows it writes no more).
                let servedWhilePaused = await settledValue(within: .seconds(10), quiet: .milliseconds(100)) {
                    origin.bytesServed(for: path)
                }
                #expect(servedWhilePaused != nil, "the origin kept writing to a full socket")
                #expect((servedWhilePaused ?? .max) < 24 << 20, "served \(servedWhilePaused ?? -1) bytes while the client read 1 MiB")

                let rest = try connection.readBody(limit: Int(size) - (1 << 20)) { verifier.consume($0) }
                verifier.finish()
                #expect(Int64(rest) + (1 << 20) == size)
                #expect(verifier.offset == size)
                #expect(verifier.firstMismatch == nil, "first wrong byte at \(verifier.firstMismatch ?? -1)")
                #expect(origin.bytesServed(for: path) == size)

                // The connection is still good for another request.
                let next = try connection.request("GET", path, headers: [("Range", "bytes=67108860-")])
                #expect(next.status == 206)
                #expect(next.body == OriginContent(path: path).bytes((size - 4)..<size))
            }
        }

        @Test("a large range starting mid-block streams correctly")
        func largeRange() async throws {
            try await withLoopbackOrigin { origin in
                let size: Int64 = 8 << 20
                let path = LoopbackOrigin.generatedPath(size: size, name: "range.bin")
                let first: Int64 = 65_536 * 3 + 12_345
                let connection = try origin.connect()
                defer { connection.close() }
                try connection.send("GET", path, headers: [("Range", "bytes=\(first)-")])
                let head = try connection.readHead()
                #expect(head.status == 206)
                #expect(head.header("Content-Range") == "bytes \(first)-\(size - 1)/\(size)")
                var verifier = StreamVerifier(content: OriginContent(path: path), from: first)
                let read = try connection.readBody(limit: head.contentLength ?? 0) { verifier.consume($0) }
                verifier.finish()
                #expect(Int64(read) == size - first)
                #expect(verifier.firstMismatch == nil, "first wrong byte at \(verifier.firstMismatch ?? -1)")
            }
        }

        @Test("shutdown with connections still open completes, and connecting fails afterwards")
        func shutdownWithOpenConnections() async throws {
            let origin = try await LoopbackOrigin.start()
            let port = origin.port
            // An idle keep-alive connection…
            let idle = try origin.connect()
            defer { idle.close() }
            #expect(try idle.request("GET", "/bytes/10/idle.bin").status == 200)
            // …and one waiting on a response stalled for much longer than the test.
            origin.inject(.stall(.seconds(60), afterBytes: nil), at: "/bytes/10/stalled.bin")
            let stalled = try origin.connect()
            defer { stalled.close() }
            try stalled.send("GET", "/bytes/10/stalled.bin")
            #expect(await eventually { origin.requestCount(for: "/bytes/10/stalled.bin") == 1 })
            #expect(origin.openConnections == 2)

            let finished = Locked(false)
            let start = ContinuousClock.now
            let shutdown = Task {
                try await origin.shutdown()
                finished.value = true
            }
            let completed = await eventually(within: .seconds(10)) { finished.value }
            #expect(completed, "shutdown did not complete within 10 s")
            guard completed else { return }
            try await shutdown.value
            #expect(ContinuousClock.now - start < .seconds(5))

            // Both connections were closed by the origin.
            #expect(try idle.readUntilClose().isEmpty)
            #expect(throws: RawHTTPError.self) { try stalled.readHead() }

            // Nothing listens any more.
            #expect(throws: RawHTTPError.self) { _ = try RawHTTPConnection(port: port, timeout: .seconds(2)) }
        }

        @Test("shutdown of an idle origin completes and frees the port")
        func shutdownIdle() async throws {
            let origin = try await LoopbackOrigin.start(threads: 2)
            let port = origin.port
            #expect(port > 0 && port < 65_536)
            #expect(try origin.rawRequest("/bytes/1/x").status == 200)
            try await origin.shutdown()
            #expect(throws: RawHTTPError.self) { _ = try RawHTTPConnection(port: port, timeout: .seconds(2)) }
        }

        @Test("withLoopbackOrigin returns the body's value and shuts the origin down, also on error")
        func withOrigin() async throws {
            let port = try await withLoopbackOrigin { origin in
                let response = try origin.rawRequest("/bytes/1/x")
                #expect(response.status == 200)
                return origin.port
            }
            #expect(throws: RawHTTPError.self) { _ = try RawHTTPConnection(port: port, timeout: .seconds(2)) }

            struct Expected: Error {}
            let thrownPort = Locked(0)
            await #expect(throws: Expected.self) {
                try await withLoopbackOrigin { origin in
                    thrownPort.value = origin.port
                    throw Expected()
                }
            }
            let closedPort = thrownPort.value
            #expect(closedPort != 0)
            #expect(throws: RawHTTPError.self) { _ = try RawHTTPConnection(port: closedPort, timeout: .seconds(2)) }
        }

        @Test("origins started side by side get their own ports and counters")
        func independentOrigins() async throws {
            try await withLoopbackOrigin { a in
                try await withLoopbackOrigin { b in
                    #expect(a.port != b.port)
                    _ = try a.rawRequest("/bytes/5/x")
                    #expect(a.totalRequests == 1)
                    #expect(b.totalRequests == 0)
                }
            }
        }
    }
}
