import Testing
@testable import Tessera

@Suite struct ContentRangeTests {
    @Test(arguments: [
        ("bytes 0-499/1234", 0...499, Int64(1234)),
        ("bytes 500-1233/1234", 500...1233, Int64(1234)),
        ("bytes 0-0/*", 0...0, nil),
        ("BYTES  7-9/10", 7...9, Int64(10)),
    ] as [(String, ClosedRange<Int64>, Int64?)])
    func parsesSatisfiedRanges(value: String, span: ClosedRange<Int64>, length: Int64?) throws {
        let range = try #require(ContentRange(value))
        #expect(range.span == span)
        #expect(range.completeLength == length)
    }

    @Test func parsesUnsatisfiedRange() throws {
        let range = try #require(ContentRange("bytes */1234"))
        #expect(range.span == nil)
        #expect(range.completeLength == 1234)
    }

    @Test(arguments: [
        "", "bytes", "bytes 5-4/10", "bytes 0-10/10", "bytes */*", "items 0-1/2", "bytes -1-5/10",
        "bytes 0-5", "bytes a-b/10", "bytes 0-5/99999999999999999999",
    ])
    func rejectsMalformedRanges(value: String) {
        #expect(ContentRange(value) == nil)
    }
}

@Suite struct HTTPDateTests {
    @Test func parsesTheThreeFormsOfRFC9110() {
        // RFC 9110 §5.6.7's own example, in its three spellings.
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT") == 784_111_777)
        #expect(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT") == 784_111_777)
        #expect(HTTPDate.parse("Sun Nov  6 08:49:37 1994") == 784_111_777)
    }

    @Test(arguments: ["", "yesterday", "Sun, 06 Nov 1994 08:49:37 PST", "Sun, 32 Nov 1994 08:49:37 GMT",
                      "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 06 Nov 1994 25:49:37 GMT"])
    func rejectsOtherText(value: String) {
        #expect(HTTPDate.parse(value) == nil)
    }
}

@Suite struct RetryAfterTests {
    @Test func delaySeconds() {
        #expect(RetryAfter.parse("120", responseDate: nil) == .seconds(120))
        #expect(RetryAfter.parse(" 0 ", responseDate: nil) == .seconds(0))
    }

    @Test func dateIsMeasuredFromTheResponseDate() {
        let delay = RetryAfter.parse("Sun, 06 Nov 1994 08:50:07 GMT", responseDate: "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(delay == .seconds(30))
    }

    @Test func pastDatesMeanNow() {
        #expect(RetryAfter.parse("Sun, 06 Nov 1994 08:49:37 GMT", responseDate: nil) == .seconds(0))
    }

    @Test func hugeDelaysAreCappedAtOneDay() {
        #expect(RetryAfter.parse("99999999", responseDate: nil) == .seconds(86_400))
    }

    @Test(arguments: ["-5", "soon", "1.5", ""])
    func rejectsGarbage(value: String) {
        #expect(RetryAfter.parse(value, responseDate: nil) == nil)
    }
}

@Suite struct ByteRangeTests {
    @Test func headerValues() {
        #expect(ByteRange(offset: 0, length: 1024).headerValue == "bytes=0-1023")
        #expect(ByteRange(offset: 512).headerValue == "bytes=512-")
        #expect(ByteRange(10...19).length == 10)
    }

    @Test func droppingForResume() {
        #expect(ByteRange(offset: 100, length: 50).dropping(20) == ByteRange(offset: 120, length: 30))
        #expect(ByteRange(offset: 100, length: 50).dropping(50) == nil)
        #expect(ByteRange(offset: 100).dropping(7) == ByteRange(offset: 107))
        #expect(ByteRange(offset: 3, length: 4).dropping(0) == ByteRange(offset: 3, length: 4))
    }
}

@Suite struct ResourceValidatorTests {
    @Test func ifRangePrefersAStrongETag() {
        let validator = ResourceValidator(etag: "\"abc\"", lastModified: "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(validator.ifRangeValue == "\"abc\"")
    }

    @Test func weakETagsAreNeverUsedForRanges() {
        let weakOnly = ResourceValidator(etag: "W/\"abc\"")
        #expect(weakOnly.ifRangeValue == nil)
        let weakAndDate = ResourceValidator(etag: "W/\"abc\"", lastModified: "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(weakAndDate.ifRangeValue == "Sun, 06 Nov 1994 08:49:37 GMT")
    }

    @Test func aWeakDateIsNotUsed() {
        let validator = ResourceValidator(lastModified: "Sun, 06 Nov 1994 08:49:37 GMT", lastModifiedIsStrong: false)
        #expect(validator.ifRangeValue == nil)
    }

    @Test func strongComparison() {
        let a = ResourceValidator(etag: "\"1\"")
        #expect(a.matches(ResourceValidator(etag: "\"1\"")))
        #expect(!a.matches(ResourceValidator(etag: "\"2\"")))
        #expect(!a.matches(ResourceValidator(etag: "W/\"1\"")))
        #expect(!ResourceValidator(etag: "W/\"1\"").matches(ResourceValidator(etag: "W/\"1\"")))
        let date = ResourceValidator(lastModified: "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(date.matches(ResourceValidator(lastModified: "Sun, 06 Nov 1994 08:49:37 GMT")))
    }
}

@Suite struct HTTPHeadersTests {
    @Test func lookupIsCaseInsensitiveAndOrdered() {
        var headers: HTTPHeaders = ["Accept": "a", "X-Thing": "1"]
        headers.add(name: "x-thing", value: "2")
        #expect(headers["ACCEPT"] == "a")
        #expect(headers.values(for: "X-THING") == ["1", "2"])
        headers.replaceOrAdd(name: "X-Thing", value: "3")
        #expect(headers.values(for: "x-thing") == ["3"])
    }

    @Test func namesCompareWithoutCaseInTheirBytes() {
        #expect("Content-Length".caseInsensitiveEquals("content-LENGTH"))
        #expect("ETag".caseInsensitiveEquals("etag"))
        #expect(!"ETag".caseInsensitiveEquals("ETah"))
        #expect(!"ETag".caseInsensitiveEquals("ETags"))
        let long = "X-A-Rather-Long-Header-Name-Of-Thirty-Nine"
        #expect(long.caseInsensitiveEquals(long.uppercased()))
        #expect(!long.caseInsensitiveEquals(long.uppercased() + "!"))
        // Only ASCII letters fold: `[` (0x5B) is not `{` (0x7B), and other scripts compare as they are.
        #expect(!"a[".caseInsensitiveEquals("a{"))
        #expect(!"Größe".caseInsensitiveEquals("GRÖSSE"))
        #expect("Größe".caseInsensitiveEquals("GRößE"))
        #expect(String(Substring("x-Thing")).caseInsensitiveEquals("X-THING"))
        #expect("".caseInsensitiveEquals(""))
    }

    @Test func headerInjectionIsRefused() throws {
        let url = try #require(URLFor("http://127.0.0.1/x"))
        for (name, value) in [("X-A", "1\r\nEvil: yes"), ("X A", "1"), ("", "1"), ("X-B", "a\u{0}b")] {
            let request = TransferRequest(url: url, headers: [name: value], destination: .discard)
            #expect(throws: DownloadError.self) { try request.validate() }
        }
    }
}

@Suite struct TokenBucketTests {
    @Test func debtIsRepaidBeforeMoreIsTaken() {
        var bucket = TokenBucket(bytesPerSecond: 1_000_000, now: 0)
        #expect(bucket.hasTokens)
        bucket.consume(100_000)  // 50 KB of burst, 50 KB of debt
        #expect(!bucket.hasTokens)
        let wait = bucket.nanosecondsUntilAvailable
        #expect(wait > 45_000_000 && wait < 55_000_000)
        bucket.refill(now: 60_000_000)
        #expect(bucket.hasTokens)
    }

    @Test func savingsAreCapped() {
        var bucket = TokenBucket(bytesPerSecond: 1_000_000, now: 0)
        bucket.refill(now: 10_000_000_000)  // ten idle seconds
        bucket.consume(60_000)
        #expect(!bucket.hasTokens, "an idle bucket must not allow a ten-second burst")
    }
}

@Suite struct FIFOTests {
    @Test func keepsOrderAcrossCompaction() {
        var queue = FIFO<Int>()
        for value in 0..<5000 { queue.append(value) }
        for expected in 0..<3000 { #expect(queue.popFirst() == expected) }
        #expect(queue.remove(where: { $0 == 4000 }) == 4000)
        var rest: [Int] = []
        while let value = queue.popFirst() { rest.append(value) }
        #expect(rest == Array(3000..<4000) + Array(4001..<5000))
        #expect(queue.isEmpty)
    }
}

import Foundation

func URLFor(_ text: String) -> URL? { URL(string: text) }
