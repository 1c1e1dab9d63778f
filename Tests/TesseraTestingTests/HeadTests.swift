import Testing
import TesseraTesting

extension OriginTests {
    @Suite("HEAD")
    struct HeadTests {
        @Test("HEAD answers the GET headers with the full Content-Length and no body bytes")
        func head() async throws {
            try await withLoopbackOrigin { origin in
                let path = "/bytes/100000/head.bin"
                let connection = try origin.connect()
                defer { connection.close() }
                let head = try connection.request("HEAD", path)
                #expect(head.status == 200)
                #expect(head.header("Content-Length") == "100000")
                #expect(head.header("Accept-Ranges") == "bytes")
                #expect(head.header("ETag") != nil)
                #expect(head.header("Last-Modified") != nil)
                // No body followed: the next response on the connection parses from its first byte.
                let next = try connection.request("GET", "/bytes/20/next.bin")
                #expect(next.status == 200)
                #expect(next.body == OriginContent(path: "/bytes/20/next.bin").bytes(0..<20))
                #expect(origin.bytesServed(for: path) == 0)
                #expect(origin.requests(for: path).map(\.method) == ["HEAD"])
                #expect(origin.connectionsAccepted == 1)
            }
        }

        @Test("HEAD with a Range answers 206 with the range's Content-Length and no body bytes")
        func headRange() async throws {
            try await withLoopbackOrigin { origin in
                let path = "/bytes/100000/head.bin"
                let connection = try origin.connect()
                defer { connection.close() }
                let head = try connection.request("HEAD", path, headers: [("Range", "bytes=10-19")])
                #expect(head.status == 206)
                #expect(head.header("Content-Length") == "10")
                #expect(head.header("Content-Range") == "bytes 10-19/100000")
                let next = try connection.request("GET", path, headers: [("Range", "bytes=10-19")])
                #expect(next.status == 206)
                #expect(next.body == OriginContent(path: path).bytes(10..<20))
                #expect(origin.bytesServed(for: path) == 10)
            }
        }

        @Test("HEAD of a missing path or an injected status sends no body and counts no body bytes")
        func headOfTextResponses() async throws {
            try await withLoopbackOrigin { origin in
                let connection = try origin.connect()
                defer { connection.close() }
                let missing = try connection.request("HEAD", "/missing")
                #expect(missing.status == 404)
                origin.inject(.status(503, retryAfter: "1"), at: "/bytes/10/busy.bin")
                let busy = try connection.request("HEAD", "/bytes/10/busy.bin")
                #expect(busy.status == 503)
                // The wire stayed in sync: nothing was sent after those heads.
                let next = try connection.request("GET", "/bytes/10/next.bin")
                #expect(next.status == 200)
                #expect(next.body == OriginContent(path: "/bytes/10/next.bin").bytes(0..<10))

                #expect(origin.bytesServed(for: "/missing") == 0)
                #expect(origin.bytesServed(for: "/bytes/10/busy.bin") == 0)
                #expect(origin.totalBytesServed == 10)
            }
        }
    }
}
