import Testing
import TesseraTesting

extension OriginTests {
    @Suite("Range")
    struct RangeTests {
        static let size: Int64 = 200_000
        static let path = "/bytes/200000/range.bin"

        struct Case: Sendable, CustomTestStringConvertible {
            var header: String
            var expected: Range<Int64>
            var testDescription: String { header }
        }

        @Test(
            "a satisfiable single range answers 206 with the bytes, Content-Range and Content-Length",
            arguments: [
                Case(header: "bytes=100-199", expected: 100..<200),
                Case(header: "bytes=0-0", expected: 0..<1),
                Case(header: "bytes=65530-65545", expected: 65_530..<65_546),
                Case(header: "bytes=199999-199999", expected: 199_999..<200_000),
                Case(header: "bytes=199990-", expected: 199_990..<200_000),
                Case(header: "bytes=70000-", expected: 70_000..<200_000),
                Case(header: "bytes=-500", expected: 199_500..<200_000),
                Case(header: "bytes=-1", expected: 199_999..<200_000),
                Case(header: "bytes=-300000", expected: 0..<200_000),
                Case(header: "bytes=199000-999999", expected: 199_000..<200_000),
                Case(header: "bytes=0-199999", expected: 0..<200_000),
            ]
        )
        func satisfiable(_ range: Case) async throws {
            try await withLoopbackOrigin { origin in
                let response = try origin.rawRequest(Self.path, headers: [("Range", range.header)])
                #expect(response.status == 206)
                let last = range.expected.upperBound - 1
                #expect(response.header("Content-Range") == "bytes \(range.expected.lowerBound)-\(last)/\(Self.size)")
                #expect(response.header("Content-Length") == String(range.expected.count))
                #expect(response.header("Accept-Ranges") == "bytes")
                #expect(response.body == OriginContent(path: Self.path).bytes(range.expected))
                #expect(origin.bytesServed(for: Self.path) == Int64(range.expected.count))
            }
        }

        @Test(
            "a range starting at or after the end answers 416 with Content-Range bytes */size",
            arguments: ["bytes=200000-200010", "bytes=200000-", "bytes=500000-600000"]
        )
        func unsatisfiable(header: String) async throws {
            try await withLoopbackOrigin { origin in
                let connection = try origin.connect()
                defer { connection.close() }
                let response = try connection.request("GET", Self.path, headers: [("Range", header)])
                #expect(response.status == 416)
                #expect(response.header("Content-Range") == "bytes */\(Self.size)")
                #expect(response.header("Content-Length").flatMap(Int.init) == response.body.count)
                // The connection stays usable.
                let next = try connection.request("GET", "/bytes/5/after.bin")
                #expect(next.status == 200)
                #expect(next.body.count == 5)
            }
        }

        @Test("any range of an empty resource is unsatisfiable")
        func emptyResourceRange() async throws {
            try await withLoopbackOrigin { origin in
                let response = try origin.rawRequest("/bytes/0/empty.bin", headers: [("Range", "bytes=0-")])
                #expect(response.status == 416)
                #expect(response.header("Content-Range") == "bytes */0")
            }
        }

        @Test(
            "several ranges, or a malformed Range, answer 200 with the full body",
            arguments: [
                "bytes=0-1,5-6", "bytes=0-1, 5-6", "bytes=abc", "bytes=5-2", "items=0-5", "bytes=", "bytes=-",
                "0-5", "bytes=1-x",
            ]
        )
        func ignoredRange(header: String) async throws {
            try await withLoopbackOrigin { origin in
                let path = "/bytes/70000/ignored.bin"
                let response = try origin.rawRequest(path, headers: [("Range", header)])
                #expect(response.status == 200)
                #expect(response.header("Content-Range") == nil)
                #expect(response.header("Content-Length") == "70000")
                #expect(response.body == OriginContent(path: path).bytes(0..<70_000))
            }
        }

        @Test("a resource with acceptsRanges false answers 200 to a Range request and says Accept-Ranges: none")
        func rangesNotAccepted() async throws {
            try await withLoopbackOrigin { origin in
                let path = "/no-ranges.bin"
                origin.serve(path, LoopbackOrigin.Resource(.generated(size: 1000), acceptsRanges: false))
                let response = try origin.rawRequest(path, headers: [("Range", "bytes=0-9")])
                #expect(response.status == 200)
                #expect(response.header("Accept-Ranges") == "none")
                #expect(response.header("Content-Range") == nil)
                #expect(response.body == OriginContent(path: path).bytes(0..<1000))
            }
        }

        @Test("a range of registered fixed bytes is served from those bytes")
        func rangeOfFixedBytes() async throws {
            try await withLoopbackOrigin { origin in
                origin.serve("/alphabet", .text("abcdefghijklmnopqrstuvwxyz"))
                let response = try origin.rawRequest("/alphabet", headers: [("Range", "bytes=3-6")])
                #expect(response.status == 206)
                #expect(response.header("Content-Range") == "bytes 3-6/26")
                #expect(response.body == Array("defg".utf8))
            }
        }
    }
}
