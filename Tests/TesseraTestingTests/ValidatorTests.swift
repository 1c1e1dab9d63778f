import Foundation
import Testing
import TesseraTesting

extension OriginTests {
    @Suite("Validators")
    struct ValidatorTests {
        static let path = "/bytes/100000/validated.bin"

        /// Parses an IMF-fixdate such as `Tue, 14 Nov 2023 22:13:20 GMT`.
        static func httpDate(_ text: String?) -> Date? {
            guard let text else { return nil }
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
            return formatter.date(from: text)
        }

        @Test("responses carry an ETag and a Last-Modified date")
        func present() async throws {
            try await withLoopbackOrigin { origin in
                let response = try origin.rawRequest(Self.path)
                let etag = try #require(response.header("ETag"))
                #expect(etag.hasPrefix("\"") && etag.hasSuffix("\"") && etag.count > 2)
                #expect(etag.contains(OriginContent(path: Self.path).fingerprint))
                let lastModified = try #require(response.header("Last-Modified"))
                #expect(Self.httpDate(lastModified) != nil, "not an HTTP date: \(lastModified)")
                // Stable across requests.
                let again = try origin.rawRequest(Self.path)
                #expect(again.header("ETag") == etag)
                #expect(again.header("Last-Modified") == lastModified)
                // Different resources have different ETags.
                let other = try origin.rawRequest("/bytes/100000/other.bin")
                #expect(other.header("ETag") != etag)
            }
        }

        @Test("ETag and Last-Modified are absent when the resource disables them")
        func absent() async throws {
            try await withLoopbackOrigin { origin in
                origin.serve("/no-etag", LoopbackOrigin.Resource(.generated(size: 100), sendsETag: false))
                origin.serve("/no-date", LoopbackOrigin.Resource(.generated(size: 100), sendsLastModified: false))
                origin.serve("/neither", LoopbackOrigin.Resource(.generated(size: 100), sendsETag: false, sendsLastModified: false))

                let noETag = try origin.rawRequest("/no-etag")
                #expect(noETag.header("ETag") == nil)
                #expect(noETag.header("Last-Modified") != nil)

                let noDate = try origin.rawRequest("/no-date")
                #expect(noDate.header("ETag") != nil)
                #expect(noDate.header("Last-Modified") == nil)

                let neither = try origin.rawRequest("/neither")
                #expect(neither.header("ETag") == nil)
                #expect(neither.header("Last-Modified") == nil)
                #expect(neither.body.count == 100)
            }
        }

        @Test("If-Range with the current ETag answers 206; with a stale ETag 200 and the full body")
        func ifRangeETag() async throws {
            try await withLoopbackOrigin { origin in
                let etag = try #require(try origin.rawRequest(Self.path).header("ETag"))
                let content = OriginContent(path: Self.path)

                let current = try origin.rawRequest(Self.path, headers: [("Range", "bytes=1000-1999"), ("If-Range", etag)])
                #expect(current.status == 206)
                #expect(current.header("Content-Range") == "bytes 1000-1999/100000")
                #expect(current.body == content.bytes(1000..<2000))

                let stale = try origin.rawRequest(Self.path, headers: [("Range", "bytes=1000-1999"), ("If-Range", "\"stale-100000\"")])
                #expect(stale.status == 200)
                #expect(stale.header("Content-Range") == nil)
                #expect(stale.body == content.bytes(0..<100_000))
            }
        }

        @Test("If-Range with the Last-Modified date answers 206; with another date 200")
        func ifRangeDate() async throws {
            try await withLoopbackOrigin { origin in
                let lastModified = try #require(try origin.rawRequest(Self.path).header("Last-Modified"))
                let content = OriginContent(path: Self.path)

                let current = try origin.rawRequest(Self.path, headers: [("Range", "bytes=-10"), ("If-Range", lastModified)])
                #expect(current.status == 206)
                #expect(current.body == content.bytes(99_990..<100_000))

                let other = try origin.rawRequest(Self.path, headers: [("Range", "bytes=-10"), ("If-Range", "Mon, 01 Jan 2001 00:00:00 GMT")])
                #expect(other.status == 200)
                #expect(other.body.count == 100_000)
            }
        }

        @Test("If-Range cannot match a validator the resource does not send")
        func ifRangeWithoutValidator() async throws {
            try await withLoopbackOrigin { origin in
                origin.serve("/plain", LoopbackOrigin.Resource(.generated(size: 100), sendsETag: false, sendsLastModified: false))
                let etag = "\"\(OriginContent(path: "/plain").fingerprint)-100\""
                let response = try origin.rawRequest("/plain", headers: [("Range", "bytes=0-9"), ("If-Range", etag)])
                #expect(response.status == 200)
                #expect(response.body.count == 100)
                // Without If-Range the range is honoured.
                #expect(try origin.rawRequest("/plain", headers: [("Range", "bytes=0-9")]).status == 206)
            }
        }

        @Test("changeContent changes ETag, Last-Modified and the bytes, which become version 1")
        func changeContent() async throws {
            try await withLoopbackOrigin { origin in
                let before = try origin.rawRequest(Self.path)
                let oldETag = try #require(before.header("ETag"))
                let oldDate = try #require(Self.httpDate(before.header("Last-Modified")))
                #expect(before.body == OriginContent(path: Self.path, version: 0).bytes(0..<100_000))

                origin.changeContent(at: Self.path)
                #expect(origin.content(at: Self.path) == OriginContent(path: Self.path, version: 1))

                let after = try origin.rawRequest(Self.path)
                let newETag = try #require(after.header("ETag"))
                let newDate = try #require(Self.httpDate(after.header("Last-Modified")))
                #expect(newETag != oldETag)
                #expect(newETag.contains(OriginContent(path: Self.path, version: 1).fingerprint))
                #expect(newDate > oldDate)
                #expect(after.body == OriginContent(path: Self.path, version: 1).bytes(0..<100_000))
                #expect(after.body != before.body)
                #expect(after.header("Content-Length") == "100000")

                // A resume with the old validator gets the whole new version.
                let resumed = try origin.rawRequest(Self.path, headers: [("Range", "bytes=50000-"), ("If-Range", oldETag)])
                #expect(resumed.status == 200)
                #expect(resumed.body == after.body)
                let resumedByDate = try origin.rawRequest(
                    Self.path, headers: [("Range", "bytes=50000-"), ("If-Range", try #require(before.header("Last-Modified")))])
                #expect(resumedByDate.status == 200)
                // With the new one, the range.
                let ranged = try origin.rawRequest(Self.path, headers: [("Range", "bytes=50000-"), ("If-Range", newETag)])
                #expect(ranged.status == 206)
                #expect(ranged.body == Array(after.body[50_000...]))

                // Other paths keep their version.
                #expect(origin.content(at: "/bytes/100000/other.bin").version == 0)

                origin.changeContent(at: Self.path)
                let third = try origin.rawRequest(Self.path)
                #expect(third.header("ETag") != newETag)
                #expect(third.body == OriginContent(path: Self.path, version: 2).bytes(0..<100_000))
            }
        }

        @Test("changeContent of a registered fixed-bytes resource changes its ETag")
        func changeContentOfFixedBytes() async throws {
            try await withLoopbackOrigin { origin in
                origin.serve("/manifest", .text("v"))
                let before = try #require(try origin.rawRequest("/manifest").header("ETag"))
                origin.changeContent(at: "/manifest")
                let after = try origin.rawRequest("/manifest")
                #expect(after.header("ETag") != before)
                #expect(after.body == Array("v".utf8))
            }
        }
    }
}
