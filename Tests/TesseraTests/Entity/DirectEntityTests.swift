import Foundation
import Testing

@testable import Tessera
import TesseraTesting

/// Runs `body` with an origin and a resolve context over a fresh engine.
private func withResolveContext(
    splitting: SplitPolicy = SplitPolicy(), _ body: (LoopbackOrigin, ResolveContext) async throws -> Void
) async throws {
    try await withLoopbackOrigin { origin in
        let engine = try CurlEngine(configuration: .forTests())
        let context = ResolveContext(engine: engine, splitting: splitting)
        do {
            try await body(origin, context)
        } catch {
            await engine.shutdown()
            throw error
        }
        await engine.shutdown()
    }
}

/// The ETag `LoopbackOrigin` sends for generated content of `size` bytes at `path` (version 0
/// unless given).
private func originETag(_ origin: LoopbackOrigin, _ path: String, size: Int64, version: Int? = nil) -> String {
    let content = version.map { OriginContent(path: path, version: $0) } ?? origin.content(at: path)
    return "\"\(content.fingerprint)-\(size)\""
}

private let oneMiB: Int64 = 1 << 20

/// Checks that `output` is pieces tiling `size` bytes in `pieceSize` steps.
private func expectPieces(
    _ output: DownloadOutput, size: Int64, pieceSize: Int64, urls: [URL], sourceLocation: SourceLocation = #_sourceLocation
) {
    #expect(output.assembly == .pieces, sourceLocation: sourceLocation)
    #expect(output.expectedSize == size, sourceLocation: sourceLocation)
    let count = Int((size + pieceSize - 1) / pieceSize)
    #expect(output.segments.count == count, sourceLocation: sourceLocation)
    var next: Int64 = 0
    for (index, segment) in output.segments.enumerated() {
        let length = min(pieceSize, size - next)
        #expect(segment.urls == urls, "piece \(index)", sourceLocation: sourceLocation)
        #expect(segment.offset == next, "piece \(index)", sourceLocation: sourceLocation)
        #expect(segment.range == ByteRange(offset: next, length: length), "piece \(index)", sourceLocation: sourceLocation)
        #expect(segment.expectedSize == length, "piece \(index)", sourceLocation: sourceLocation)
        #expect(segment.pieceOffset == next, sourceLocation: sourceLocation)
        next += length
    }
    #expect(next == size, "the pieces cover the file exactly", sourceLocation: sourceLocation)
    #expect(output.knownSize == size, sourceLocation: sourceLocation)
}

@Suite struct DirectEntityTests {
    // MARK: Resolving: sizes and splitting

    @Test func aSmallFileIsOneSegmentWithTheSizeFromHEAD() async throws {
        try await withResolveContext { origin, context in
            let path = "/bytes/1000/small.bin"
            let url = origin.url(path)
            let manifest = try await DirectEntity(url: url).resolve(in: context)
            try manifest.validate()
            #expect(manifest.title == "small.bin")
            #expect(manifest.sourceURL == url)
            #expect(manifest.expiresAt == nil)
            let output = try #require(manifest.outputs.first)
            #expect(manifest.outputs.count == 1)
            #expect(output.name == "small.bin")
            #expect(output.assembly == .concatenated)
            #expect(output.expectedSize == 1000)
            #expect(output.isSelected)
            #expect(output.checksum == nil)
            let segment = try #require(output.segments.first)
            #expect(output.segments.count == 1)
            #expect(segment.urls == [url])
            #expect(segment.range == nil)
            #expect(segment.expectedSize == 1000)
            #expect(segment.headers.isEmpty)
            #expect(segment.offset == nil)
            // One HEAD, no body fetched.
            #expect(origin.requests(for: path).map(\.method) == ["HEAD"])
            #expect(origin.bytesServed(for: path) == 0)
        }
    }

    @Test func aLargeFileOnARangeServerIsSplitIntoPiecesWithIfMatch() async throws {
        try await withResolveContext(splitting: SplitPolicy(minimumSize: oneMiB, pieceSize: oneMiB)) { origin, context in
            let size: Int64 = 5_000_000
            let path = "/bytes/\(size)/big.bin"
            let url = origin.url(path)
            let manifest = try await DirectEntity(url: url).resolve(in: context)
            try manifest.validate()
            #expect(manifest.title == "big.bin")
            let output = try #require(manifest.outputs.first)
            #expect(output.name == "big.bin")
            expectPieces(output, size: size, pieceSize: oneMiB, urls: [url])
            #expect(output.segments.count == 5)
            #expect(output.segments.last?.expectedSize == size - 4 * oneMiB)
            let etag = originETag(origin, path, size: size)
            for segment in output.segments {
                #expect(segment.headers["If-Match"] == etag)
                #expect(segment.headers.values(for: "If-Match").count == 1)
                #expect(segment.headers["If-Unmodified-Since"] == nil)
            }
            #expect(origin.requests(for: path).map(\.method) == ["HEAD"])
        }
    }

    @Test func theSplitThresholdIsInclusive() async throws {
        try await withResolveContext(splitting: SplitPolicy(minimumSize: 3000, pieceSize: 1000)) { origin, context in
            let at = try await DirectEntity(url: origin.url("/bytes/3000/at.bin")).resolve(in: context)
            expectPieces(at.outputs[0], size: 3000, pieceSize: 1000, urls: [origin.url("/bytes/3000/at.bin")])
            let below = try await DirectEntity(url: origin.url("/bytes/2999/below.bin")).resolve(in: context)
            #expect(below.outputs[0].assembly == .concatenated)
            #expect(below.outputs[0].segments.count == 1)
            #expect(below.outputs[0].expectedSize == 2999)
        }
    }

    @Test func aPieceSizeLargerThanTheFileGivesOnePiece() async throws {
        try await withResolveContext(splitting: SplitPolicy(minimumSize: 100, pieceSize: 10_000)) { origin, context in
            let url = origin.url("/bytes/4321/one.bin")
            let manifest = try await DirectEntity(url: url).resolve(in: context)
            try manifest.validate()
            expectPieces(manifest.outputs[0], size: 4321, pieceSize: 10_000, urls: [url])
        }
    }

    @Test func aZeroPieceSizeNeverSplits() async throws {
        try await withResolveContext(splitting: SplitPolicy(minimumSize: 0, pieceSize: 0)) { origin, context in
            let manifest = try await DirectEntity(url: origin.url("/bytes/5000/a.bin")).resolve(in: context)
            try manifest.validate()
            #expect(manifest.outputs[0].assembly == .concatenated)
            #expect(manifest.outputs[0].segments.count == 1)
        }
    }

    @Test func anEmptyFileGivesAValidManifestEvenWithMinimumSizeZero() async throws {
        try await withResolveContext(splitting: SplitPolicy(minimumSize: 0, pieceSize: 1000)) { origin, context in
            let manifest = try await DirectEntity(url: origin.url("/bytes/0/empty.bin")).resolve(in: context)
            #expect(manifest.outputs[0].expectedSize == 0)
            try manifest.validate()
        }
    }

    @Test func withoutAnETagPiecesCarryIfUnmodifiedSince() async throws {
        try await withResolveContext(splitting: SplitPolicy(minimumSize: 1000, pieceSize: 1000)) { origin, context in
            origin.serve("/dated.bin", LoopbackOrigin.Resource(.generated(size: 2500), sendsETag: false))
            let url = origin.url("/dated.bin")
            let probe = try await context.probe(url)
            let lastModified = try #require(probe.validator?.lastModified)
            #expect(probe.validator?.lastModifiedIsStrong == true)
            let manifest = try await DirectEntity(url: url).resolve(in: context)
            try manifest.validate()
            expectPieces(manifest.outputs[0], size: 2500, pieceSize: 1000, urls: [url])
            for segment in manifest.outputs[0].segments {
                #expect(segment.headers["If-Unmodified-Since"] == lastModified)
                #expect(segment.headers["If-Match"] == nil)
            }
        }
    }

    @Test func aWeakETagIsNotUsedForIfMatch() async throws {
        try await withResolveContext(splitting: SplitPolicy(minimumSize: 1000, pieceSize: 1000)) { origin, context in
            origin.serve("/weak.bin", LoopbackOrigin.Resource(
                .generated(size: 2000), sendsETag: false, extraHeaders: [("ETag", #"W/"weak-1""#)]))
            let manifest = try await DirectEntity(url: origin.url("/weak.bin")).resolve(in: context)
            for segment in manifest.outputs[0].segments {
                #expect(segment.headers["If-Match"] == nil)
                #expect(segment.headers["If-Unmodified-Since"] != nil)
            }
        }
    }

    @Test func withoutAnyValidatorPiecesAreUnconditional() async throws {
        try await withResolveContext(splitting: SplitPolicy(minimumSize: 1000, pieceSize: 1000)) { origin, context in
            origin.serve("/bare.bin", LoopbackOrigin.Resource(.generated(size: 2000), sendsETag: false, sendsLastModified: false))
            let manifest = try await DirectEntity(url: origin.url("/bare.bin")).resolve(in: context)
            expectPieces(manifest.outputs[0], size: 2000, pieceSize: 1000, urls: [origin.url("/bare.bin")])
            #expect(manifest.outputs[0].segments.allSatisfy { $0.headers.isEmpty })
        }
    }

    @Test func aServerWithoutRangesGetsOneSegmentEvenWhenLarge() async throws {
        try await withResolveContext(splitting: SplitPolicy(minimumSize: oneMiB, pieceSize: oneMiB)) { origin, context in
            let size: Int64 = 5_000_000
            origin.serve("/norange.bin", LoopbackOrigin.Resource(.generated(size: size), acceptsRanges: false))
            let url = origin.url("/norange.bin")
            let manifest = try await DirectEntity(url: url).resolve(in: context)
            try manifest.validate()
            let output = manifest.outputs[0]
            #expect(output.assembly == .concatenated)
            #expect(output.segments.count == 1)
            #expect(output.segments[0].range == nil)
            #expect(output.segments[0].expectedSize == size)
            #expect(output.segments[0].headers.isEmpty)
            #expect(output.expectedSize == size)
        }
    }

    // MARK: Resolving: probe fallbacks

    @Test func aHEADRefusedWith405FallsBackToAOneByteGET() async throws {
        try await withResolveContext(splitting: SplitPolicy(minimumSize: oneMiB, pieceSize: oneMiB)) { origin, context in
            let size: Int64 = 3 * oneMiB + 17
            let path = "/bytes/\(size)/nohead.bin"
            origin.inject(.status(405), at: path, times: 1)
            let url = origin.url(path)
            let manifest = try await DirectEntity(url: url).resolve(in: context)
            try manifest.validate()
            let requests = origin.requests(for: path)
            #expect(requests.map(\.method) == ["HEAD", "GET"])
            #expect(requests.last?.header("Range") == "bytes=0-0")
            #expect(origin.bytesServed(for: path) == 1)
            // The size came from Content-Range, and ranges are known to work: pieces.
            expectPieces(manifest.outputs[0], size: size, pieceSize: oneMiB, urls: [url])
            #expect(manifest.outputs[0].segments.allSatisfy { $0.headers["If-Match"] == originETag(origin, path, size: size) })
        }
    }

    @Test(arguments: [400, 403, 501])
    func otherHEADRefusalsAlsoFallBack(_ status: Int) async throws {
        try await withResolveContext { origin, context in
            let path = "/bytes/777/refused-\(status).bin"
            origin.inject(.status(status), at: path, times: 1)
            let manifest = try await DirectEntity(url: origin.url(path)).resolve(in: context)
            #expect(origin.requests(for: path).map(\.method) == ["HEAD", "GET"])
            #expect(manifest.outputs[0].expectedSize == 777)
            #expect(manifest.outputs[0].segments[0].expectedSize == 777)
        }
    }

    @Test func aHEADRefusalOnAServerWithoutRangesStillResolves() async throws {
        try await withResolveContext(splitting: SplitPolicy(minimumSize: 1000, pieceSize: 1000)) { origin, context in
            let size: Int64 = 100_000
            origin.serve("/plain.bin", LoopbackOrigin.Resource(.generated(size: size), acceptsRanges: false))
            origin.inject(.status(405), at: "/plain.bin", times: 1)
            // ResolveContext.probe expects a 200 to its one-byte GET (it then takes the size from
            // the bytes received), but the engine refuses a whole body sent for a range with
            // rangeNotSupported, which DirectEntity does not catch.
            let manifest = try await DirectEntity(url: origin.url("/plain.bin")).resolve(in: context)
            try manifest.validate()
            #expect(manifest.outputs[0].assembly == .concatenated)
            #expect(manifest.outputs[0].segments.count == 1)
            #expect(manifest.outputs[0].expectedSize == nil || manifest.outputs[0].expectedSize == size)
            #expect(origin.requests(for: "/plain.bin").map(\.method) == ["HEAD", "GET"])
        }
    }

    @Test func aServerErrorOnHEADLeavesTheSizeToTheDownload() async throws {
        try await withResolveContext(splitting: SplitPolicy(minimumSize: 100, pieceSize: 100)) { origin, context in
            let path = "/bytes/5000/flaky.bin"
            origin.inject(.status(500), at: path, times: 1)
            let url = origin.url(path)
            let manifest = try await DirectEntity(url: url).resolve(in: context)
            try manifest.validate()
            let output = manifest.outputs[0]
            #expect(output.name == "flaky.bin")
            #expect(output.assembly == .concatenated)
            #expect(output.expectedSize == nil)
            #expect(output.segments.map(\.urls) == [[url]])
            #expect(output.segments[0].expectedSize == nil)
        }
    }

    @Test(arguments: [404, 410])
    func aGoneResourceFailsTheResolve(_ status: Int) async throws {
        try await withResolveContext { origin, context in
            let path = "/bytes/100/gone-\(status).bin"
            origin.inject(.status(status), at: path)
            let error = await #expect(throws: DownloadError.self) {
                try await DirectEntity(url: origin.url(path)).resolve(in: context)
            }
            #expect(error?.code == .httpStatus)
            #expect(error?.httpStatus == status)
        }
    }

    @Test func aNonHTTPURLIsRefusedBeforeAnyRequest() async throws {
        try await withResolveContext { _, context in
            for text in ["ftp://127.0.0.1/x", "file:///etc/passwd"] {
                let error = await #expect(throws: DownloadError.self) {
                    try await DirectEntity(url: URL(string: text)!).resolve(in: context)
                }
                #expect(error?.code == .unsafeInput)
            }
        }
    }

    // MARK: Resolving: redirects

    @Test func aRedirectListsTheEffectiveURLThenTheOriginal() async throws {
        try await withResolveContext { origin, context in
            let start = "/bytes/2000/start.bin"
            let target = "/bytes/2000/final.bin"
            origin.inject(.redirect(to: target), at: start, times: 1)
            let original = origin.url(start)
            let manifest = try await DirectEntity(url: original).resolve(in: context)
            try manifest.validate()
            #expect(manifest.sourceURL == origin.url(target))
            #expect(manifest.outputs[0].segments[0].urls == [origin.url(target), original])
            #expect(manifest.outputs[0].expectedSize == 2000)
            // The name is the effective URL's.
            #expect(manifest.outputs[0].name == "final.bin")
        }
    }

    @Test func aRedirectedLargeFileSplitsOverBothURLs() async throws {
        try await withResolveContext(splitting: SplitPolicy(minimumSize: 1000, pieceSize: 1000)) { origin, context in
            let start = "/redirect/me"
            let target = "/bytes/2500/target.bin"
            origin.inject(.redirect(to: origin.url(target).absoluteString, status: 301), at: start, times: 1)
            let manifest = try await DirectEntity(url: origin.url(start)).resolve(in: context)
            try manifest.validate()
            expectPieces(manifest.outputs[0], size: 2500, pieceSize: 1000, urls: [origin.url(target), origin.url(start)])
            #expect(manifest.outputs[0].segments.allSatisfy { $0.headers["If-Match"] == originETag(origin, target, size: 2500) })
        }
    }

    // MARK: File names

    @Test func thePayloadNameWins() async throws {
        try await withResolveContext { origin, context in
            origin.serve("/cd.bin", LoopbackOrigin.Resource(
                .generated(size: 10), extraHeaders: [("Content-Disposition", #"attachment; filename="server.bin""#)]))
            let manifest = try await DirectEntity(url: origin.url("/cd.bin"), fileName: "mine.bin").resolve(in: context)
            #expect(manifest.outputs[0].name == "mine.bin")
            #expect(manifest.title == "mine.bin")
            // A payload name is sanitized too.
            let hostile = try await DirectEntity(url: origin.url("/cd.bin"), fileName: "../../etc/passwd").resolve(in: context)
            #expect(hostile.outputs[0].name == "_.._etc_passwd")
            try hostile.validate()
        }
    }

    @Test func contentDispositionNamesTheFile() async throws {
        try await withResolveContext { origin, context in
            origin.serve("/download", LoopbackOrigin.Resource(
                .generated(size: 10), extraHeaders: [("Content-Disposition", #"attachment; filename="report.pdf""#)]))
            let manifest = try await DirectEntity(url: origin.url("/download?id=7")).resolve(in: context)
            #expect(manifest.outputs[0].name == "report.pdf")
            #expect(manifest.title == "report.pdf")
        }
    }

    @Test func contentDispositionExtendedNameWinsOverThePlainOne() async throws {
        try await withResolveContext { origin, context in
            origin.serve("/download", LoopbackOrigin.Resource(
                .generated(size: 10),
                extraHeaders: [("Content-Disposition", #"attachment; filename="plain.txt"; filename*=UTF-8''na%C3%AFve%20file.txt"#)]))
            let manifest = try await DirectEntity(url: origin.url("/download")).resolve(in: context)
            #expect(manifest.outputs[0].name == "naïve file.txt")
            try manifest.validate()
        }
    }

    @Test func contentDispositionComesFromTheFallbackGETToo() async throws {
        try await withResolveContext { origin, context in
            origin.serve("/dl", LoopbackOrigin.Resource(
                .generated(size: 10), extraHeaders: [("Content-Disposition", "attachment; filename=from-get.bin")]))
            origin.inject(.status(405), at: "/dl", times: 1)
            let manifest = try await DirectEntity(url: origin.url("/dl")).resolve(in: context)
            #expect(manifest.outputs[0].name == "from-get.bin")
            #expect(manifest.outputs[0].expectedSize == 10)
        }
    }

    @Test func theURLsLastComponentIsPercentDecoded() async throws {
        try await withResolveContext { origin, context in
            origin.serve("/files/na%C3%AFve%20file.txt", .generated(size: 10))
            let manifest = try await DirectEntity(url: origin.url("/files/na%C3%AFve%20file.txt?x=1")).resolve(in: context)
            #expect(manifest.outputs[0].name == "naïve file.txt")
            #expect(manifest.outputs[0].expectedSize == 10)
        }
    }

    @Test func theRootIsIndexHTML() async throws {
        try await withResolveContext { origin, context in
            origin.serve("/", .text("<html></html>", contentType: "text/html"))
            let slash = try await DirectEntity(url: origin.url("/")).resolve(in: context)
            #expect(slash.outputs[0].name == "index.html")
            let bare = try await DirectEntity(url: origin.baseURL).resolve(in: context)
            #expect(bare.outputs[0].name == "index.html")
            #expect(bare.outputs[0].expectedSize == 13)
        }
    }

    @Test(arguments: [
        ("https://h/a/report.pdf", "report.pdf"),
        ("https://h/a/na%C3%AFve%20file.txt", "naïve file.txt"),
        ("https://h/a/file.bin?name=other.txt#frag", "file.bin"),
        ("https://h/", "index.html"),
        ("https://h", "index.html"),
        ("https://h/..%2F..%2Fetc%2Fpasswd", "_.._etc_passwd"),
        ("https://h/x/a%2Fb", "a_b"),
        ("https://h/x/a%5Cb", "a_b"),
        ("https://h/x/a%0Ab%00c", "a_b_c"),
        ("https://h/x/.hidden", "hidden"),
        ("https://h/x/%2E%2E", "index.html"),
        ("https://h/x/...", "index.html"),
    ])
    func namesFromTheURL(_ text: String, _ expected: String) throws {
        let url = try #require(URL(string: text))
        let name = DirectEntity.fileName(for: url, probe: nil)
        #expect(name == expected)
        #expect(try SafePath.relative(name) == name)
        #expect(!name.contains("/"))
    }

    @Test func percentEncodingIsDecodedOnlyOnce() throws {
        // "%2525" is an encoded "%25": the saved name should be "100%25.txt".
        let name = DirectEntity.fileName(for: URL(string: "https://h/100%2525.txt")!, probe: nil)
        #expect(name == "100%25.txt")
    }

    @Test(arguments: [
        (#"attachment; filename="../../etc/passwd""#, "passwd"),
        (#"attachment; filename="a\\b""#, "b"),
        (#"attachment; filename=".bashrc""#, "bashrc"),
        (#"attachment; filename="..""#, "download"),
        ("attachment; filename*=UTF-8''..%2F..%2Froot%2F.ssh%2Fauthorized_keys", "authorized_keys"),
        ("attachment; filename*=UTF-8''a%0Ab%00c%1B.txt", "a_b_c_.txt"),
        ("attachment; filename*=UTF-8''%2E%2E%2F%2E%2E", "download"),
        (#"attachment; filename="evil\#u{7F}name""#, "evil_name"),
    ])
    func hostileContentDispositionNamesAreSanitized(_ header: String, _ expected: String) throws {
        let url = URL(string: "https://h/fallback.bin")!
        let probe = ProbeResult(url: url, size: 1, acceptsRanges: false, validator: nil, headers: ["Content-Disposition": header])
        let name = DirectEntity.fileName(for: url, probe: probe)
        #expect(name == expected)
        #expect(try SafePath.relative(name) == name)
        #expect(!name.contains("/"))
        #expect(!name.hasPrefix("."))
    }

    @Test func aDispositionWithoutNameFallsBackToTheURL() {
        let url = URL(string: "https://h/dir/fallback.bin")!
        let probe = ProbeResult(url: url, size: 1, acceptsRanges: false, validator: nil, headers: ["Content-Disposition": "inline"])
        #expect(DirectEntity.fileName(for: url, probe: probe) == "fallback.bin")
    }

    @Test func theProbedURLNamesTheFileAfterARedirect() {
        let probe = ProbeResult(
            url: URL(string: "https://cdn/real-name.zip")!, size: 1, acceptsRanges: false, validator: nil, headers: HTTPHeaders())
        #expect(DirectEntity.fileName(for: URL(string: "https://h/download.php")!, probe: probe) == "real-name.zip")
    }

    // MARK: The entity itself

    @Test func entityIdentityAndTitle() {
        let url = URL(string: "https://h/dir/a.bin?x=1")!
        let entity = DirectEntity(url: url, destinationDirectory: "d")
        #expect(entity.entityKey == url.absoluteString)
        #expect(entity.variantKey == "")
        #expect(entity.title == "a.bin")
        #expect(entity.taskID == DownloadTaskID(entityType: "direct", entityKey: url.absoluteString))
        #expect(DirectEntity(url: URL(string: "https://h")!).title == "https://h")
        #expect(DirectEntity(url: url, fileName: "n.bin").title == "n.bin")
    }

    // MARK: End to end through the manager

    @Test func aSplitDownloadAssemblesTheOriginsBytes() async throws {
        try await withManager(configure: { $0.splitting = SplitPolicy(minimumSize: oneMiB, pieceSize: oneMiB) }) { harness in
            let size: Int64 = 5_000_000
            let path = "/bytes/\(size)/big.bin"
            let entity = DirectEntity(url: harness.origin.url(path))
            try await harness.manager.start(entity)
            let done = try #require(await harness.waitForState(entity.taskID, .completed, timeout: .seconds(60)))
            #expect(done.bytesDone == size)
            #expect(done.bytesTotal == size)
            #expect(done.segmentsTotal == 5)
            #expect(done.segmentsDone == 5)
            let file = harness.root.file("big.bin")
            #expect(await harness.origin.content(at: path).verifyFile(atPath: file, size: size))

            let requests = harness.origin.requests(for: path)
            #expect(requests.filter { $0.method == "HEAD" }.count == 1)
            let gets = requests.filter { $0.method == "GET" }
            #expect(gets.count == 5)
            let expectedRanges = (0..<5).map { index -> String in
                let first = Int64(index) * oneMiB
                return "bytes=\(first)-\(min(first + oneMiB, size) - 1)"
            }
            #expect(gets.compactMap { $0.header("Range") }.sorted() == expectedRanges.sorted())
            #expect(Set(gets.compactMap { $0.header("Range") }).count == 5, "each piece exactly once")
            let etag = originETag(harness.origin, path, size: size)
            #expect(gets.allSatisfy { $0.header("If-Match") == etag })
            #expect(harness.origin.bytesServed(for: path) == size)
            let leftovers = try FileManager.default.subpathsOfDirectory(atPath: harness.root.path)
                .filter { $0.hasSuffix(".part") || $0.hasSuffix(".seg") }
            #expect(leftovers.isEmpty)
        }
    }

    @Test func anUnsplitDownloadUsesTheServersName() async throws {
        try await withManager(configure: { $0.splitting = SplitPolicy(minimumSize: 1000, pieceSize: 1000) }) { harness in
            let size: Int64 = 300_000
            harness.origin.serve("/get", LoopbackOrigin.Resource(
                .generated(size: size), acceptsRanges: false,
                extraHeaders: [("Content-Disposition", "attachment; filename*=UTF-8''na%C3%AFve%20file.txt")]))
            let entity = DirectEntity(url: harness.origin.url("/get?id=1"))
            try await harness.manager.start(entity)
            let done = try #require(await harness.waitForState(entity.taskID, .completed))
            #expect(done.segmentsTotal == 1)
            #expect(await harness.origin.content(at: "/get").verifyFile(atPath: harness.root.file("naïve file.txt"), size: size))
            let gets = harness.origin.requests(for: "/get").filter { $0.method == "GET" }
            #expect(gets.count == 1)
            #expect(gets.first?.header("Range") == nil)
        }
    }

    /// Pieces of `pieceSize` bytes; the task fetches them one at a time, slowly enough for the
    /// test to change the file between two of them.
    static let changeSize: Int64 = 5 * 256 * 1024
    static let changePiece: Int64 = 256 * 1024

    /// Starts a split download of a file that changes once the second piece has been asked
    /// for; `afterChange` runs right after the change. Returns the final file's bytes (or nil)
    /// and the final state.
    private func downloadWhileChanging(
        _ harness: ManagerHarness, path: String, afterChange: (LoopbackOrigin) -> Void
    ) async throws -> (state: DownloadTaskState, bytes: [UInt8]?, info: DownloadTaskInfo?) {
        let origin = harness.origin
        origin.inject(.throttle(bytesPerSecond: 1_000_000), at: path)
        let entity = DirectEntity(url: origin.url(path))
        try await harness.manager.start(entity)
        // Wait for the second piece's request, then change the file while it downloads.
        let deadline = ContinuousClock.now + .seconds(20)
        while origin.requests(for: path).filter({ $0.method == "GET" }).count < 2, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(2))
        }
        origin.changeContent(at: path)
        afterChange(origin)
        let final = await harness.waitFor(entity.taskID, timeout: .seconds(60)) {
            $0.state == .completed || $0.state == .failed || $0.state == .invalid
        }
        let state = final?.state ?? .idle
        let file = harness.root.file((path as NSString).lastPathComponent)
        return (state, state == .completed ? fileBytes(file) : nil, final)
    }

    /// Which version each piece of `bytes` holds: 0, 1, or -1 for neither (torn).
    private func pieceVersions(_ bytes: [UInt8], path: String) -> [Int] {
        let v0 = OriginContent(path: path, version: 0), v1 = OriginContent(path: path, version: 1)
        return stride(from: Int64(0), to: Self.changeSize, by: Int(Self.changePiece)).map { offset -> Int in
            let range = offset..<min(offset + Self.changePiece, Self.changeSize)
            let piece = Array(bytes[Int(range.lowerBound)..<Int(range.upperBound)])
            if piece == v0.bytes(range) { return 0 }
            if piece == v1.bytes(range) { return 1 }
            return -1
        }
    }

    @Test func aFileThatChangesDuringAnOriginIgnoringIfMatchIsNeverSpliced() async throws {
        // An origin that ignores If-Match: pieces asked for after the change come back 206
        // from the new version. The engine must notice the ETag is not the one asked for.
        try await withManager(configure: {
            $0.splitting = SplitPolicy(minimumSize: Self.changePiece, pieceSize: Self.changePiece)
            $0.maxConcurrentSegments = 1
        }) { harness in
            let path = "/bytes/\(Self.changeSize)/changing.bin"
            harness.origin.inject(.ignoreConditions, at: path)
            let result = try await downloadWhileChanging(harness, path: path) { _ in }
            let gets = harness.origin.requests(for: path).filter { $0.method == "GET" }
            let staleETag = originETag(harness.origin, path, size: Self.changeSize, version: 0)
            // The pieces asked for the version the first resolve saw, until the change showed.
            #expect(gets.count >= 5)
            #expect(gets.first?.header("If-Match") == staleETag)
            #expect(result.state == .completed || result.state == .failed || result.state == .invalid)
            if let bytes = result.bytes {
                #expect(bytes.count == Int(Self.changeSize))
                let versions = pieceVersions(bytes, path: path)
                #expect(!versions.contains(-1), "no piece is torn: \(versions)")
                #expect(Set(versions).count == 1, "pieces from versions \(versions)")
            }
        }
    }

    @Test func a412OnAPieceNeverLeavesASplicedFile() async throws {
        // What an origin that honours If-Match would do: answer the first piece asked for with
        // the stale ETag after the change with 412 (the task fetches one piece at a time, so
        // only one request carries the stale ETag).
        try await withManager(configure: {
            $0.splitting = SplitPolicy(minimumSize: Self.changePiece, pieceSize: Self.changePiece)
            $0.maxConcurrentSegments = 1
        }) { harness in
            let path = "/bytes/\(Self.changeSize)/precondition.bin"
            let result = try await downloadWhileChanging(harness, path: path) { origin in
                origin.inject(.status(412), at: path, times: 1)
            }
            let requests = harness.origin.requests(for: path)
            // The 412 made the manager resolve again: a second HEAD.
            #expect(requests.filter { $0.method == "HEAD" }.count == 2)
            let freshETag = originETag(harness.origin, path, size: Self.changeSize, version: 1)
            let afterResolve = requests.drop { $0.method != "HEAD" }.dropFirst().drop { $0.method != "HEAD" }.dropFirst()
            #expect(!afterResolve.isEmpty)
            #expect(afterResolve.allSatisfy { $0.header("If-Match") == freshETag })
            #expect(result.state == .completed || result.state == .failed || result.state == .invalid)
            if let bytes = result.bytes {
                let versions = pieceVersions(bytes, path: path)
                #expect(!versions.contains(-1), "no piece is torn: \(versions)")
                #expect(Set(versions).count == 1, "pieces from versions \(versions)")
            }
        }
    }

    @Test func anOriginHonouringIfMatchAnswers412AndTheFileIsOneVersion() async throws {
        try await withManager(configure: {
            $0.splitting = SplitPolicy(minimumSize: Self.changePiece, pieceSize: Self.changePiece)
            $0.maxConcurrentSegments = 1
        }) { harness in
            let path = "/bytes/\(Self.changeSize)/honoured.bin"
            let result = try await downloadWhileChanging(harness, path: path) { _ in }
            let requests = harness.origin.requests(for: path)
            #expect(requests.filter { $0.method == "HEAD" }.count == 2, "the 412 made the manager resolve again")
            #expect(result.state == .completed)
            let bytes = try #require(result.bytes)
            let versions = pieceVersions(bytes, path: path)
            #expect(Set(versions) == [1], "every piece is of the new version: \(versions)")
        }
    }
}
