import Foundation
import Testing
import TesseraTesting

extension OriginTests {
    @Suite("Serving")
    struct ServingTests {
        @Test("GET /bytes/<n>/name serves n bytes of OriginContent(path:)")
        func generatedBytes() async throws {
            try await withLoopbackOrigin { origin in
                let path = LoopbackOrigin.generatedPath(size: 150_000, name: "a.bin")
                #expect(path == "/bytes/150000/a.bin")
                let response = try origin.rawRequest(path)
                #expect(response.status == 200)
                #expect(response.head.version == "HTTP/1.1")
                #expect(response.header("Content-Length") == "150000")
                #expect(response.header("Content-Type") == "application/octet-stream")
                #expect(response.header("Accept-Ranges") == "bytes")
                #expect(!response.closedEarly)
                #expect(response.body == OriginContent(path: path).bytes(0..<150_000))
                #expect(origin.content(at: path) == OriginContent(path: path))
                #expect(origin.size(of: path) == 150_000)
                #expect(origin.url(path).absoluteString == "http://127.0.0.1:\(origin.port)\(path)")
                #expect(origin.baseURL.absoluteString == "http://127.0.0.1:\(origin.port)")
            }
        }

        @Test("the name is part of the content: same size, different names, different bytes")
        func nameSelectsContent() async throws {
            try await withLoopbackOrigin { origin in
                let a = try origin.rawRequest("/bytes/4096/a.bin")
                let b = try origin.rawRequest("/bytes/4096/b.bin")
                #expect(a.body.count == 4096)
                #expect(b.body.count == 4096)
                #expect(a.body != b.body)
                #expect(b.body == OriginContent(path: "/bytes/4096/b.bin").bytes(0..<4096))
            }
        }

        @Test("a 0-byte resource answers 200 with an empty body, and the connection stays usable")
        func emptyResource() async throws {
            try await withLoopbackOrigin { origin in
                let connection = try origin.connect()
                defer { connection.close() }
                let empty = try connection.request("GET", "/bytes/0/empty.bin")
                #expect(empty.status == 200)
                #expect(empty.header("Content-Length") == "0")
                #expect(empty.body.isEmpty)
                #expect(origin.size(of: "/bytes/0/empty.bin") == 0)
                let next = try connection.request("GET", "/bytes/10/next.bin")
                #expect(next.status == 200)
                #expect(next.body == OriginContent(path: "/bytes/10/next.bin").bytes(0..<10))
            }
        }

        @Test(
            "unknown paths answer 404",
            arguments: ["/nothing", "/bytes", "/bytes/abc/x.bin", "/bytes/-1/x.bin", "/bytes/", "/other/10/x.bin"]
        )
        func unknownPath(path: String) async throws {
            try await withLoopbackOrigin { origin in
                let response = try origin.rawRequest(path)
                #expect(response.status == 404)
                #expect(response.header("Content-Length").flatMap(Int.init) == response.body.count)
                #expect(response.header("ETag") == nil)
                #expect(origin.size(of: path) == nil)
                #expect(origin.requestCount(for: path) == 1)
            }
        }

        @Test("registered .text and .bytes resources are served with their Content-Type")
        func registeredResources() async throws {
            try await withLoopbackOrigin { origin in
                let json = #"{"files": ["a", "b"]}"#
                origin.serve("/manifest.json", .text(json, contentType: "application/json"))
                origin.serve("/notes.txt", .text("héllo\n"))
                origin.serve("/blob", .bytes([0, 1, 2, 254, 255], contentType: "application/x-test"))
                origin.serve("/plain-blob", .bytes([9, 8, 7]))

                let manifest = try origin.rawRequest("/manifest.json")
                #expect(manifest.status == 200)
                #expect(manifest.header("Content-Type") == "application/json")
                #expect(manifest.body == Array(json.utf8))
                #expect(manifest.header("Content-Length") == String(json.utf8.count))

                let notes = try origin.rawRequest("/notes.txt")
                #expect(notes.header("Content-Type") == "text/plain; charset=utf-8")
                #expect(notes.body == Array("héllo\n".utf8))

                let blob = try origin.rawRequest("/blob")
                #expect(blob.header("Content-Type") == "application/x-test")
                #expect(blob.body == [0, 1, 2, 254, 255])
                #expect(origin.size(of: "/blob") == 5)

                let plain = try origin.rawRequest("/plain-blob")
                #expect(plain.header("Content-Type") == "application/octet-stream")
                #expect(plain.body == [9, 8, 7])

                // The query is not part of the path.
                let withQuery = try origin.rawRequest("/manifest.json?token=1")
                #expect(withQuery.status == 200)
                #expect(withQuery.body == Array(json.utf8))
            }
        }

        @Test("a registered generated resource serves OriginContent of its path; extra headers are sent")
        func registeredGenerated() async throws {
            try await withLoopbackOrigin { origin in
                origin.serve("/files/data.bin", .generated(size: 70_000, contentType: "application/x-data"))
                origin.serve("/extra", LoopbackOrigin.Resource(.data([1]), extraHeaders: [("X-Origin-Test", "yes"), ("Cache-Control", "no-store")]))

                let data = try origin.rawRequest("/files/data.bin")
                #expect(data.status == 200)
                #expect(data.header("Content-Type") == "application/x-data")
                #expect(data.body == OriginContent(path: "/files/data.bin").bytes(0..<70_000))

                let extra = try origin.rawRequest("/extra")
                #expect(extra.header("X-Origin-Test") == "yes")
                #expect(extra.header("Cache-Control") == "no-store")
            }
        }

        @Test("remove makes a registered path answer 404; a removed /bytes/ override falls back to generated bytes")
        func remove() async throws {
            try await withLoopbackOrigin { origin in
                origin.serve("/gone.txt", .text("here"))
                #expect(try origin.rawRequest("/gone.txt").status == 200)
                origin.remove("/gone.txt")
                #expect(try origin.rawRequest("/gone.txt").status == 404)
                #expect(origin.size(of: "/gone.txt") == nil)

                origin.serve("/bytes/10/override.bin", .text("overridden"))
                #expect(try origin.rawRequest("/bytes/10/override.bin").body == Array("overridden".utf8))
                origin.remove("/bytes/10/override.bin")
                let generated = try origin.rawRequest("/bytes/10/override.bin")
                #expect(generated.status == 200)
                #expect(generated.body == OriginContent(path: "/bytes/10/override.bin").bytes(0..<10))
            }
        }

        @Test("pipelined requests on one connection are answered in order")
        func pipelining() async throws {
            try await withLoopbackOrigin { origin in
                let connection = try origin.connect()
                defer { connection.close() }
                let paths = ["/bytes/70000/p1.bin", "/bytes/3/p2.bin", "/missing", "/bytes/100000/p3.bin"]
                for path in paths { try connection.send("GET", path) }
                for path in paths {
                    let response = try connection.readResponse()
                    if path == "/missing" {
                        #expect(response.status == 404)
                    } else {
                        let size = Int64(response.body.count)
                        #expect(response.status == 200)
                        #expect(response.body == OriginContent(path: path).bytes(0..<size), "\(path)")
                        #expect(response.header("Content-Length") == String(size))
                    }
                }
                #expect(origin.requests.map(\.path) == paths)
                #expect(origin.connectionsAccepted == 1)
            }
        }

        @Test("serve replaces what a path served")
        func serveReplaces() async throws {
            try await withLoopbackOrigin { origin in
                origin.serve("/r", .text("one"))
                origin.serve("/r", .text("two"))
                let response = try origin.rawRequest("/r")
                #expect(response.body == Array("two".utf8))
            }
        }
    }
}
