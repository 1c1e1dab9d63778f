import Foundation
import Testing

@testable import Tessera
import TesseraTesting

// Plain URLs (`DirectEntity`) are fetched without a probe: `resolve` does no network I/O, and the
// manager's first GET (no `Range`) decides the name, the size, the version and whether more
// connections share the file. These tests drive that end to end through a `DownloadTaskManager`
// on a `LoopbackOrigin`, and assert what crossed the wire from the origin's request log.

private let oneMiB: Int64 = 1 << 20

/// Runs `body` with an origin and a resolve context over a fresh engine.
private func withResolveContext(_ body: (LoopbackOrigin, ResolveContext) async throws -> Void) async throws {
    try await withLoopbackOrigin { origin in
        let engine = try CurlEngine(configuration: .forTests())
        let context = ResolveContext(engine: engine)
        do {
            try await body(origin, context)
        } catch {
            await engine.shutdown()
            throw error
        }
        await engine.shutdown()
    }
}

/// The ETag `LoopbackOrigin` sends for generated content of `size` bytes at `path` (the current
/// version unless given).
private func originETag(_ origin: LoopbackOrigin, _ path: String, size: Int64, version: Int? = nil) -> String {
    let content = version.map { OriginContent(path: path, version: $0) } ?? origin.content(at: path)
    return "\"\(content.fingerprint)-\(size)\""
}

/// The `Last-Modified` `LoopbackOrigin` sends for `version` of a resource (an IMF-fixdate).
private func originLastModified(version: Int = 0) -> String {
    let formatter = DateFormatter()
    formatter.locale = Locale(identifier: "en_US_POSIX")
    formatter.timeZone = TimeZone(identifier: "GMT")
    formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
    return formatter.string(from: Date(timeIntervalSince1970: 1_700_000_000 + Double(version) * 86_400))
}

/// The first and last byte of a `Range: bytes=a-b` (or `bytes=a-`) header.
private func parseRange(_ header: String?) -> (first: Int64, last: Int64?)? {
    guard let header, header.hasPrefix("bytes=") else { return nil }
    let spec = header.dropFirst("bytes=".count)
    let parts = spec.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
    guard parts.count == 2, let first = Int64(parts[0]) else { return nil }
    if parts[1].isEmpty { return (first, nil) }
    guard let last = Int64(parts[1]) else { return nil }
    return (first, last)
}

/// The partial files in the manager's work directory.
private func workParts(_ harness: ManagerHarness) -> [String] {
    let work = harness.root.file(".tessera/work")
    return ((try? FileManager.default.contentsOfDirectory(atPath: work)) ?? []).filter { $0.hasSuffix(".part") }.sorted()
}

/// Waits until the task is in a final state; its info then.
private func waitForEnd(
    _ harness: ManagerHarness, _ id: DownloadTaskID, timeout: Duration = .seconds(50),
    sourceLocation: SourceLocation = #_sourceLocation
) async -> DownloadTaskInfo? {
    await harness.waitFor(id, timeout: timeout, sourceLocation: sourceLocation) { $0.state.isFinal }
}

/// What the origin's request log says about one download of `path`, checked the same way by
/// every test that expects exactly one whole-resource GET.
private func expectOneWholeGET(
    _ origin: LoopbackOrigin, _ path: String, sourceLocation: SourceLocation = #_sourceLocation
) {
    let requests = origin.requests(for: path)
    #expect(requests.map(\.method) == ["GET"], "exactly one GET: \(requests.map { "\($0.method) \($0.header("Range") ?? "-")" })",
        sourceLocation: sourceLocation)
    #expect(requests.first?.header("Range") == nil, sourceLocation: sourceLocation)
    #expect(requests.first?.header("If-Match") == nil, sourceLocation: sourceLocation)
    #expect(requests.first?.header("If-Unmodified-Since") == nil, sourceLocation: sourceLocation)
    #expect(origin.requests.allSatisfy { $0.method != "HEAD" }, "no HEAD probe", sourceLocation: sourceLocation)
}

/// The split policy of the multi-connection tests: small, so a few MiB are enough to split.
private func smallSplitting(
    minimumSize: Int64 = 4 * oneMiB, pieceSize: Int64 = oneMiB, maxConnections: Int = 8
) -> (inout DownloadTaskManager.Configuration) -> Void {
    { $0.splitting = SplitPolicy(minimumSize: minimumSize, pieceSize: pieceSize, maxConnections: maxConnections) }
}

@Suite(.timeLimit(.minutes(1))) struct DirectEntityTests {
    // MARK: - Resolving: no I/O

    @Test func resolveSendsNoRequestAndNamesTheOutputFromTheURL() async throws {
        try await withResolveContext { origin, context in
            let path = "/bytes/1000/small.bin"
            let url = origin.url(path)
            let entity = DirectEntity(url: url)
            let manifest = try await entity.resolve(in: context)
            #expect(origin.totalRequests == 0, "resolve does no network I/O: \(origin.requests.map { "\($0.method) \($0.uri)" })")
            #expect(origin.connectionsAccepted == 0)
            try manifest.validate()
            #expect(manifest.title == "small.bin")
            #expect(manifest.sourceURL == url)
            #expect(manifest.expiresAt == nil)
            #expect(manifest.outputs.count == 1)
            let output = try #require(manifest.outputs.first)
            #expect(output.name == "small.bin")
            #expect(output.isNamedByResponse, "the first response may rename it")
            #expect(output.assembly == .concatenated)
            #expect(output.expectedSize == nil, "the size is the first response's to tell")
            #expect(output.isSelected)
            #expect(output.checksum == nil)
            #expect(output.segments.count == 1)
            let segment = try #require(output.segments.first)
            #expect(segment.urls == [url])
            #expect(segment.range == nil)
            #expect(segment.expectedSize == nil)
            #expect(segment.offset == nil)
            #expect(segment.headers.isEmpty, "no If-Match before any response was seen")
        }
    }

    @Test func resolveOfAMissingResourceStillSendsNothing() async throws {
        // The old design's HEAD failed the resolve of a 404; now nothing is asked before the GET.
        try await withResolveContext { origin, context in
            origin.inject(.status(404), at: "/gone.bin")
            let manifest = try await DirectEntity(url: origin.url("/gone.bin?x=1")).resolve(in: context)
            #expect(manifest.outputs.map(\.name) == ["gone.bin"])
            #expect(origin.totalRequests == 0)
        }
    }

    @Test func thePayloadNameWinsAndIsNotNamedByTheResponse() async throws {
        try await withResolveContext { origin, context in
            let url = origin.url("/cd.bin")
            let manifest = try await DirectEntity(url: url, fileName: "mine.bin").resolve(in: context)
            try manifest.validate()
            #expect(manifest.outputs.map(\.name) == ["mine.bin"])
            #expect(manifest.outputs[0].isNamedByResponse == false)
            #expect(manifest.title == "mine.bin")
            // A payload name is sanitized too.
            let hostile = try await DirectEntity(url: url, fileName: "../../etc/passwd").resolve(in: context)
            #expect(hostile.outputs[0].name == "_.._etc_passwd")
            #expect(hostile.outputs[0].isNamedByResponse == false)
            try hostile.validate()
            #expect(origin.totalRequests == 0)
        }
    }

    @Test func aNonHTTPURLIsRefusedByResolve() async throws {
        try await withResolveContext { origin, context in
            for text in ["ftp://127.0.0.1:\(origin.port)/x", "file:///etc/passwd"] {
                let error = await #expect(throws: DownloadError.self) {
                    try await DirectEntity(url: URL(string: text)!).resolve(in: context)
                }
                #expect(error?.code == .unsafeInput, "\(text)")
            }
            #expect(origin.totalRequests == 0)
        }
    }

    // MARK: - Names (pure)

    @Test(arguments: [
        ("https://h/a/report.pdf", "report.pdf"),
        ("https://h/a/na%C3%AFve%20file.txt", "naïve file.txt"),
        ("https://h/a/file.bin?name=other.txt#frag", "file.bin"),
        ("https://h/", "index.html"),
        ("https://h", "index.html"),
        ("https://h/dir/", "index.html"),
        ("https://h/..%2F..%2Fetc%2Fpasswd", "_.._etc_passwd"),
        ("https://h/x/a%2Fb", "a_b"),
        ("https://h/x/a%5Cb", "a_b"),
        ("https://h/x/a%0Ab%00c", "a_b_c"),
        ("https://h/x/.hidden", "hidden"),
        ("https://h/x/%2E%2E", "index.html"),
        ("https://h/x/...", "index.html"),
        ("https://h/x/.", "index.html"),
        ("https://h/x/..", "index.html"),
        ("https://h/a//", "index.html"),
        ("https://h/a/b.bin/", "index.html"),
    ])
    func namesFromTheURL(_ text: String, _ expected: String) throws {
        let url = try #require(URL(string: text))
        let name = ResponseNaming.fileName(url: url)
        #expect(name == expected)
        #expect(try SafePath.relative(name) == name)
        #expect(!name.contains("/"))
        // Without a Content-Disposition the response names it the same way.
        #expect(ResponseNaming.fileName(url: url, headers: HTTPHeaders()) == expected)
    }

    /// A URL made relative to a base is named from its resolved path, a directory as such.
    @Test func aURLRelativeToABaseIsNamedFromItsResolvedPath() throws {
        let base = try #require(URL(string: "https://h/dir/"))
        #expect(ResponseNaming.fileName(url: try #require(URL(string: "file.bin", relativeTo: base))) == "file.bin")
        #expect(ResponseNaming.fileName(url: try #require(URL(string: "sub/", relativeTo: base))) == "index.html")
        #expect(ResponseNaming.fileName(url: try #require(URL(string: "?page=2", relativeTo: base))) == "index.html")
    }

    @Test func percentEncodingIsDecodedOnlyOnce() throws {
        // "%2525" is an encoded "%25": the saved name is "100%25.txt".
        #expect(ResponseNaming.fileName(url: URL(string: "https://h/100%2525.txt")!) == "100%25.txt")
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
        let headers: HTTPHeaders = ["Content-Disposition": header]
        let name = ResponseNaming.fileName(url: URL(string: "https://h/fallback.bin")!, headers: headers)
        #expect(name == expected)
        #expect(try SafePath.relative(name) == name)
        #expect(!name.contains("/"))
        #expect(!name.hasPrefix("."))
    }

    @Test func contentDispositionNamesBeforeTheURL() {
        let url = URL(string: "https://h/download.php?id=7")!
        #expect(ResponseNaming.fileName(url: url, headers: ["Content-Disposition": #"attachment; filename="report.pdf""#]) == "report.pdf")
        #expect(ResponseNaming.fileName(url: url, headers: [
            "Content-Disposition": #"attachment; filename="plain.txt"; filename*=UTF-8''na%C3%AFve%20file.txt"#,
        ]) == "naïve file.txt", "the extended name wins")
        #expect(ResponseNaming.fileName(url: url, headers: ["Content-Disposition": "inline"]) == "download.php",
            "a disposition without a name falls back to the URL")
    }

    @Test func entityIdentityAndTitle() {
        let url = URL(string: "https://h/dir/a.bin?x=1")!
        let entity = DirectEntity(url: url, destinationDirectory: "d")
        #expect(entity.entityKey == url.absoluteString)
        #expect(entity.variantKey == "")
        #expect(entity.title == "a.bin")
        #expect(entity.taskID == DownloadTaskID(entityType: "direct", entityKey: url.absoluteString))
        #expect(DirectEntity(url: URL(string: "https://h")!).title == "https://h")
        #expect(DirectEntity(url: url, fileName: "n.bin").title == "n.bin")
        // The fragment, which no server sees, is not part of the identity.
        #expect(DirectEntity(url: URL(string: "https://h/dir/a.bin?x=1#part")!).entityKey == url.absoluteString)
    }

    // MARK: - A small file: one GET

    @Test func aSmallFileIsOneGETWithoutRangeAndNoHEAD() async throws {
        try await withManager { harness in
            let size: Int64 = 100_000
            let path = "/bytes/\(size)/small.bin"
            let entity = DirectEntity(url: harness.origin.url(path))
            try await harness.manager.start(entity)
            let done = try #require(await harness.waitForState(entity.taskID, .completed))
            #expect(harness.origin.totalRequests == 1, "\(harness.origin.requests.map { "\($0.method) \($0.uri)" })")
            expectOneWholeGET(harness.origin, path)
            #expect(harness.origin.bytesServed(for: path) == size, "the body crossed the wire once")
            #expect(done.bytesDone == size)
            #expect(done.bytesTotal == size)
            #expect(done.outputs.map(\.path) == [harness.root.file("small.bin")])
            #expect(done.outputs.first?.isComplete == true)
            #expect(await harness.origin.content(at: path).verifyFile(atPath: harness.root.file("small.bin"), size: size))
            #expect(harness.root.files == ["small.bin"])
            #expect(await eventually { workParts(harness).isEmpty }, "no partial file is left (it goes once the store has the completion)")
        }
    }

    @Test func theFirstResponsesSizeBecomesTheTasksTotal() async throws {
        // The manifest has no size (nothing was probed); the first response's Content-Length is
        // the size, so the task's total is known from then on: while it downloads and after.
        try await withManager(configure: smallSplitting()) { harness in
            let origin = harness.origin
            let small: Int64 = 1_500_000, large: Int64 = 12 * oneMiB
            let smallPath = "/bytes/\(small)/total-small.bin", largePath = "/bytes/\(large)/total-large.bin"
            // The small file's first response stops after its first bytes until the test has seen
            // it in the middle (then it is paused and resumed: the rest comes with a range); the
            // large one's responses stop after their first bytes until the test has seen it in
            // the middle (it is split).
            origin.inject(.stall(.seconds(60), afterBytes: 300_000), at: smallPath, times: 1)
            let largeGate = LoopbackOrigin.Gate()
            origin.inject(.hold(largeGate, afterBytes: 300_000), at: largePath)
            for (path, size) in [(smallPath, small), (largePath, large)] {
                let entity = DirectEntity(url: origin.url(path))
                try await harness.manager.start(entity)
                let midway = try #require(await harness.waitFor(entity.taskID) { $0.state == .downloading && $0.bytesDone > 0 })
                if path == smallPath {
                    _ = await harness.manager.stop(entity.taskID)
                    _ = try #require(await harness.waitForState(entity.taskID, .paused))
                    _ = try await harness.manager.resume(entity.taskID)
                } else {
                    largeGate.open()
                }
                let done = try #require(await harness.waitForState(entity.taskID, .completed))
                #expect(done.bytesDone == size)
                #expect(await origin.content(at: path).verifyFile(atPath: done.outputs[0].path, size: size))
                #expect(midway.bytesTotal == size, "\(path) while downloading")
                #expect(done.bytesTotal == size, "\(path) when completed")
                #expect(done.bytesTotalIsEstimate == false)
                #expect(done.fractionDone == 1)
            }
        }
    }

    @Test func aFileBelowTheDefaultSplitSizeIsOneGETEvenWhenSlow() async throws {
        // 5 MB with ranges and an ETag, but below the default 20 MiB: one connection.
        try await withManager { harness in
            let size: Int64 = 5_000_000
            let path = "/bytes/\(size)/medium.bin"
            harness.origin.inject(.throttle(bytesPerSecond: 20_000_000), at: path)
            let entity = DirectEntity(url: harness.origin.url(path))
            try await harness.manager.start(entity)
            _ = try #require(await harness.waitForState(entity.taskID, .completed))
            expectOneWholeGET(harness.origin, path)
            #expect(await harness.origin.content(at: path).verifyFile(atPath: harness.root.file("medium.bin"), size: size))
        }
    }

    @Test func anEmptyFileIsOneGETAndAnEmptyOutput() async throws {
        try await withManager { harness in
            let path = "/bytes/0/empty.bin"
            let entity = DirectEntity(url: harness.origin.url(path))
            try await harness.manager.start(entity)
            let done = try #require(await harness.waitForState(entity.taskID, .completed))
            expectOneWholeGET(harness.origin, path)
            #expect(done.outputs.map(\.path) == [harness.root.file("empty.bin")])
            #expect(fileSize(harness.root.file("empty.bin")) == 0)
        }
    }

    @Test func theBytesGoToAPartialFileInTheWorkDirectoryUntilTheEnd() async throws {
        try await withManager { harness in
            let size: Int64 = 1_500_000
            let path = "/bytes/\(size)/slow.bin"
            // The first response stops a third of the way until the test has seen the download
            // in the middle, however loaded the machine (a small file is moved into place as its
            // transfer ends); then it is paused and resumed, and the rest comes with a range.
            harness.origin.inject(.stall(.seconds(60), afterBytes: 500_000), at: path, times: 1)
            let entity = DirectEntity(url: harness.origin.url(path))
            try await harness.manager.start(entity)
            _ = try #require(await harness.waitFor(entity.taskID) { $0.bytesDone > 0 && $0.state == .downloading })
            // Mid-download: the bytes are in the work directory, nothing under the final name.
            #expect(workParts(harness).count == 1, "\(workParts(harness))")
            #expect(harness.root.files.isEmpty, "nothing in the download root yet: \(harness.root.files)")
            _ = await harness.manager.stop(entity.taskID)
            _ = try #require(await harness.waitForState(entity.taskID, .paused))
            #expect(workParts(harness).count == 1, "the bytes kept are in the work directory: \(workParts(harness))")
            _ = try await harness.manager.resume(entity.taskID)
            _ = try #require(await harness.waitForState(entity.taskID, .completed))
            #expect(harness.root.files == ["slow.bin"])
            #expect(await eventually { workParts(harness).isEmpty })
            #expect(await harness.origin.content(at: path).verifyFile(atPath: harness.root.file("slow.bin"), size: size))
        }
    }

    // MARK: - Names from the response

    @Test func withoutContentDispositionTheURLNamesTheFile() async throws {
        try await withManager { harness in
            let origin = harness.origin
            origin.serve("/files/na%C3%AFve%20file.txt", .generated(size: 10))
            origin.serve("/", .text("<html></html>", contentType: "text/html"))
            let decoded = DirectEntity(url: origin.url("/files/na%C3%AFve%20file.txt?x=1"))
            let root = DirectEntity(url: origin.baseURL)
            try await harness.manager.start(decoded)
            try await harness.manager.start(root)
            let one = try #require(await harness.waitForState(decoded.taskID, .completed))
            let two = try #require(await harness.waitForState(root.taskID, .completed))
            #expect(one.outputs.map(\.path) == [harness.root.file("naïve file.txt")], "percent-decoded, query dropped")
            #expect(two.outputs.map(\.path) == [harness.root.file("index.html")])
            #expect(fileBytes(harness.root.file("index.html")) == Array("<html></html>".utf8))
            #expect(await origin.content(at: "/files/na%C3%AFve%20file.txt").verifyFile(atPath: harness.root.file("naïve file.txt"), size: 10))
            #expect(origin.requests.allSatisfy { $0.method == "GET" && $0.header("Range") == nil })
            #expect(origin.totalRequests == 2)
        }
    }

    @Test func contentDispositionNamesTheFile() async throws {
        try await withManager { harness in
            let size: Int64 = 10_000
            harness.origin.serve("/download", LoopbackOrigin.Resource(
                .generated(size: size), extraHeaders: [("Content-Disposition", #"attachment; filename="report.pdf""#)]))
            let entity = DirectEntity(url: harness.origin.url("/download?id=7"))
            try await harness.manager.start(entity)
            let done = try #require(await harness.waitForState(entity.taskID, .completed))
            expectOneWholeGET(harness.origin, "/download")
            #expect(done.outputs.map(\.path) == [harness.root.file("report.pdf")])
            #expect(done.outputs.map(\.name) == ["report.pdf"])
            #expect(done.title == "report.pdf")
            #expect(harness.root.files == ["report.pdf"], "nothing saved under the URL's name")
            #expect(await harness.origin.content(at: "/download").verifyFile(atPath: harness.root.file("report.pdf"), size: size))
        }
    }

    @Test func theExtendedContentDispositionNameWinsOverThePlainOne() async throws {
        try await withManager { harness in
            let size: Int64 = 300_000
            harness.origin.serve("/get", LoopbackOrigin.Resource(
                .generated(size: size),
                extraHeaders: [("Content-Disposition", #"attachment; filename="plain.txt"; filename*=UTF-8''na%C3%AFve%20file.txt"#)]))
            let entity = DirectEntity(url: harness.origin.url("/get?id=1"))
            try await harness.manager.start(entity)
            let done = try #require(await harness.waitForState(entity.taskID, .completed))
            expectOneWholeGET(harness.origin, "/get")
            #expect(done.outputs.map(\.path) == [harness.root.file("naïve file.txt")])
            #expect(harness.root.files == ["naïve file.txt"])
            #expect(await harness.origin.content(at: "/get").verifyFile(atPath: harness.root.file("naïve file.txt"), size: size))
        }
    }

    @Test func thePayloadNameWinsOverContentDisposition() async throws {
        try await withManager { harness in
            harness.origin.serve("/cd.bin", LoopbackOrigin.Resource(
                .generated(size: 1000), extraHeaders: [("Content-Disposition", #"attachment; filename="server.bin""#)]))
            let entity = DirectEntity(url: harness.origin.url("/cd.bin"), fileName: "mine.bin")
            try await harness.manager.start(entity)
            let done = try #require(await harness.waitForState(entity.taskID, .completed))
            expectOneWholeGET(harness.origin, "/cd.bin")
            #expect(done.outputs.map(\.path) == [harness.root.file("mine.bin")])
            #expect(harness.root.files == ["mine.bin"])
            #expect(await harness.origin.content(at: "/cd.bin").verifyFile(atPath: harness.root.file("mine.bin"), size: 1000))
        }
    }

    @Test func aRedirectNamesTheFileAfterTheRedirectedURL() async throws {
        try await withManager { harness in
            let start = "/download.php"
            let target = "/bytes/2000/final.bin"
            harness.origin.inject(.redirect(to: target), at: start)
            let entity = DirectEntity(url: harness.origin.url(start + "?id=3"))
            try await harness.manager.start(entity)
            let done = try #require(await harness.waitForState(entity.taskID, .completed))
            let requests = harness.origin.requests
            #expect(requests.map { "\($0.method) \($0.path)" } == ["GET \(start)", "GET \(target)"])
            #expect(requests.allSatisfy { $0.header("Range") == nil })
            #expect(done.outputs.map(\.path) == [harness.root.file("final.bin")])
            #expect(harness.root.files == ["final.bin"])
            #expect(await harness.origin.content(at: target).verifyFile(atPath: harness.root.file("final.bin"), size: 2000))
        }
    }

    @Test func aHostileContentDispositionNameStaysInTheDownloadRoot() async throws {
        try await withManager { harness in
            let cases: [(path: String, header: String, expected: String)] = [
                ("/h1", #"attachment; filename="../../etc/passwd""#, "passwd"),
                ("/h2", "attachment; filename*=UTF-8''..%2F..%2Froot%2F.ssh%2Fauthorized_keys", "authorized_keys"),
                ("/h3", #"attachment; filename=".bashrc""#, "bashrc"),
                ("/h4", #"attachment; filename="..""#, "download"),
            ]
            for item in cases {
                harness.origin.serve(item.path, LoopbackOrigin.Resource(.generated(size: 500), extraHeaders: [("Content-Disposition", item.header)]))
                let entity = DirectEntity(url: harness.origin.url(item.path))
                try await harness.manager.start(entity)
                let done = try #require(await harness.waitForState(entity.taskID, .completed))
                #expect(done.outputs.map(\.path) == [harness.root.file(item.expected)], "\(item.header)")
                #expect(await harness.origin.content(at: item.path).verifyFile(atPath: harness.root.file(item.expected), size: 500))
            }
            #expect(harness.root.files == ["authorized_keys", "bashrc", "download", "passwd"])
            #expect(!FileManager.default.fileExists(atPath: (harness.root.path as NSString).deletingLastPathComponent + "/etc/passwd"))
        }
    }

    @Test func aNameTakenByAnExistingFileGetsANumber() async throws {
        try await withManager { harness in
            try Data("mine".utf8).write(to: URL(fileURLWithPath: harness.root.file("report.pdf")))
            try Data("mine too".utf8).write(to: URL(fileURLWithPath: harness.root.file("plain.bin")))
            // Named by Content-Disposition …
            harness.origin.serve("/dl", LoopbackOrigin.Resource(
                .generated(size: 5000), extraHeaders: [("Content-Disposition", #"attachment; filename="report.pdf""#)]))
            let byServer = DirectEntity(url: harness.origin.url("/dl"))
            try await harness.manager.start(byServer)
            let one = try #require(await harness.waitForState(byServer.taskID, .completed))
            #expect(one.outputs.map(\.path) == [harness.root.file("report.1.pdf")])
            // … and by the URL.
            let byURL = DirectEntity(url: harness.origin.url("/bytes/3000/plain.bin"))
            try await harness.manager.start(byURL)
            let two = try #require(await harness.waitForState(byURL.taskID, .completed))
            #expect(two.outputs.map(\.path) == [harness.root.file("plain.1.bin")])
            // The existing files are untouched.
            #expect(fileBytes(harness.root.file("report.pdf")) == Array("mine".utf8))
            #expect(fileBytes(harness.root.file("plain.bin")) == Array("mine too".utf8))
            #expect(await harness.origin.content(at: "/dl").verifyFile(atPath: harness.root.file("report.1.pdf"), size: 5000))
            #expect(await harness.origin.content(at: "/bytes/3000/plain.bin").verifyFile(atPath: harness.root.file("plain.1.bin"), size: 3000))
        }
    }

    @Test func twoTasksNamedAlikeByTheServerNeverShareAnOutput() async throws {
        try await withManager { harness in
            for (path, size) in [("/one", Int64(400_000)), ("/two", Int64(600_000))] {
                harness.origin.serve(path, LoopbackOrigin.Resource(
                    .generated(size: size), extraHeaders: [("Content-Disposition", #"attachment; filename="same.bin""#)]))
                harness.origin.inject(.throttle(bytesPerSecond: 2_000_000), at: path)
            }
            let first = DirectEntity(url: harness.origin.url("/one"))
            let second = DirectEntity(url: harness.origin.url("/two"))
            try await harness.manager.start(first)
            try await harness.manager.start(second)
            let one = try #require(await harness.waitForState(first.taskID, .completed))
            let two = try #require(await harness.waitForState(second.taskID, .completed))
            let paths = [one.outputs[0].path, two.outputs[0].path]
            #expect(Set(paths) == [harness.root.file("same.bin"), harness.root.file("same.1.bin")])
            #expect(await harness.origin.content(at: "/one").verifyFile(atPath: one.outputs[0].path, size: 400_000))
            #expect(await harness.origin.content(at: "/two").verifyFile(atPath: two.outputs[0].path, size: 600_000))
        }
    }

    @Test func aFileThatAppearsUnderTheNameDuringTheDownloadIsNeverReplaced() async throws {
        try await withManager { harness in
            let size: Int64 = 1_500_000
            let path = "/bytes/\(size)/late.bin"
            // Every response stops after its first bytes until the test has put its own file
            // there, however late the test hears of the progress (a throttle, then a stall of
            // 4 s, were not enough on a loaded machine).
            let gate = LoopbackOrigin.Gate()
            harness.origin.inject(.hold(gate, afterBytes: 64 * 1024), at: path)
            let entity = DirectEntity(url: harness.origin.url(path))
            try await harness.manager.start(entity)
            _ = try #require(await harness.waitFor(entity.taskID) {
                $0.state == .downloading && $0.bytesDone > 0 && $0.outputs.first?.path == harness.root.file("late.bin")
            })
            try Data("mine".utf8).write(to: URL(fileURLWithPath: harness.root.file("late.bin")))
            gate.open()
            let done = try #require(await harness.waitForState(entity.taskID, .completed))
            #expect(fileBytes(harness.root.file("late.bin")) == Array("mine".utf8), "the existing file is untouched")
            #expect(done.outputs.map(\.path) == [harness.root.file("late.1.bin")])
            #expect(await harness.origin.content(at: path).verifyFile(atPath: harness.root.file("late.1.bin"), size: size))
        }
    }

}

/// Splitting, decided by the first response: these tests steer connections with throttled
/// responses, so they run in `make test`'s timing phase, on a quiet machine.
@Suite(.timeLimit(.minutes(1))) struct DirectEntitySplitTimingTests {
    // MARK: - A large file: several connections

    @Test func aLargeFileIsSharedOverSeveralConnectionsWithIfMatch() async throws {
        try await withManager(configure: smallSplitting()) { harness in
            let size: Int64 = 48 * oneMiB
            let path = "/bytes/\(size)/big.bin"
            let origin = harness.origin
            origin.inject(.throttle(bytesPerSecond: 8_000_000), at: path)
            let entity = DirectEntity(url: origin.url(path))
            try await harness.manager.start(entity)
            let done = try #require(await harness.waitForState(entity.taskID, .completed, timeout: .seconds(50)))
            #expect(done.bytesDone == size)
            #expect(done.bytesTotal == size)
            #expect(done.outputs.map(\.path) == [harness.root.file("big.bin")])
            #expect(await origin.content(at: path).verifyFile(atPath: harness.root.file("big.bin"), size: size))

            #expect(origin.requests.allSatisfy { $0.method != "HEAD" }, "no HEAD probe")
            let gets = origin.requests(for: path)
            #expect(gets.allSatisfy { $0.method == "GET" })
            // The first request asks for everything, unconditionally.
            let first = try #require(gets.first)
            #expect(first.header("Range") == nil)
            #expect(first.header("If-Match") == nil)
            // The others take ranges of that version.
            let later = gets.dropFirst()
            #expect(later.count >= 2, "the file was split: \(gets.count) requests")
            let etag = originETag(origin, path, size: size)
            #expect(later.allSatisfy { $0.header("If-Match") == etag }, "\(later.map { $0.header("If-Match") ?? "-" })")
            #expect(later.allSatisfy { $0.header("If-Unmodified-Since") == nil }, "an ETag is there: If-Match only")
            let ranges = later.compactMap { parseRange($0.header("Range")) }
            #expect(ranges.count == later.count, "every later request has a Range: \(later.map { $0.header("Range") ?? "-" })")
            for range in ranges {
                #expect(range.first > 0 && range.first < size, "\(range)")
                let last = range.last ?? size - 1
                #expect(last < size)
                #expect(last - range.first + 1 >= oneMiB, "no range below the piece size: \(range)")
            }
            #expect(Set(ranges.map(\.first)).count == ranges.count, "no range asked for twice: \(ranges)")
            // Connections were cut where the next began: the bytes crossed the wire about once.
            let served = origin.bytesServed(for: path)
            #expect(served >= size)
            #expect(served <= size + Int64(gets.count) * 512 * 1024, "served \(served) for \(size)")
            // Several connections at once, no more than the policy's.
            #expect(Set(gets.map(\.connection)).count >= 2)
            #expect(origin.maxConcurrentConnections >= 2)
            #expect(origin.maxConcurrentConnections <= 8, "at most maxConnections: \(origin.maxConcurrentConnections)")
            #expect(await eventually { workParts(harness).isEmpty })
        }
    }

    @Test func aConnectionThatFinishesTakesTheEndOfTheBusiestOnesRest() async throws {
        // Two connections: the whole GET is slow (400 kB/s), ranges are fast (2 MB/s). The second
        // connection takes the second half; when it finishes it takes the end of what the first
        // one has left, the part that makes both end together at their speeds (five sixths), so
        // every range ends where the previous one began, and the first is cut each time.
        let pieceSize: Int64 = 256 * 1024
        try await withManager(configure: smallSplitting(minimumSize: oneMiB, pieceSize: pieceSize, maxConnections: 2)) { harness in
            let origin = harness.origin
            let size: Int64 = 8 * oneMiB
            let path = "/bytes/\(size)/steal.bin"
            // Faults combine in order, the last throttle winning: the first request is the slow one.
            origin.inject(.throttle(bytesPerSecond: 2_000_000), at: path)
            origin.inject(.throttle(bytesPerSecond: 400_000), at: path, times: 1)
            let entity = DirectEntity(url: origin.url(path))
            try await harness.manager.start(entity)
            _ = try #require(await harness.waitForState(entity.taskID, .completed))
            #expect(await origin.content(at: path).verifyFile(atPath: harness.root.file("steal.bin"), size: size))
            let gets = origin.requests(for: path)
            #expect(gets.first?.header("Range") == nil)
            let ranges = gets.dropFirst().compactMap { parseRange($0.header("Range")) }
            #expect(ranges.count == gets.count - 1)
            #expect(ranges.count >= 2, "the second connection came back for more: \(ranges)")
            // The first range is the second half (64 KiB aligned), to the end of the file.
            if let second = ranges.first {
                #expect(second.last == size - 1)
                #expect(abs(second.first - size / 2) <= 256 * 1024, "\(second)")
                #expect(second.first % (64 * 1024) == 0)
            }
            // Every later range is the tail of the first connection's rest: it ends where the
            // previous one began, and is at least a piece.
            for (previous, next) in zip(ranges, ranges.dropFirst()) {
                #expect(next.last == previous.first - 1, "\(previous) then \(next)")
                #expect(next.first >= pieceSize)
                #expect((next.last ?? size) - next.first + 1 >= pieceSize, "\(next)")
            }
            // The first taking of the rest took five sixths of it, not half: where the first
            // connection stood then (at 400 kB/s since its start), it kept under a third.
            if let first = gets.first, gets.count > 2, let taken = parseRange(gets[2].header("Range")), let end = taken.last {
                let elapsed = first.receivedAt.duration(to: gets[2].receivedAt)
                let position = Int64(elapsed.secondsValue * 400_000)
                #expect(taken.first - position < (end + 1 - position) / 3, "cut at \(taken.first), the first connection near \(position)")
            }
            #expect(gets.dropFirst().allSatisfy { $0.header("If-Match") == originETag(origin, path, size: size) })
            // The first connection was cut every time: the bytes crossed the wire about once.
            let served = origin.bytesServed(for: path)
            #expect(served <= size + Int64(gets.count) * 256 * 1024, "served \(served) for \(size)")
        }
    }

    // MARK: - Under a rate limit: one range at a time

    @Test func underARateLimitAFileIsAskedForInRangesOfAtMostTheChunk() async throws {
        var engine = CurlEngine.Configuration.forTests()
        engine.globalRateLimit = 200 * oneMiB
        try await withManager(engine: engine) { harness in
            let size: Int64 = 5 * oneMiB + 12_345
            let path = "/bytes/\(size)/limited.bin"
            let origin = harness.origin
            let entity = DirectEntity(url: origin.url(path))
            try await harness.manager.start(entity)
            let done = try #require(await harness.waitForState(entity.taskID, .completed, timeout: .seconds(30)))
            #expect(done.bytesDone == size)
            #expect(done.bytesTotal == size)
            #expect(await origin.content(at: path).verifyFile(atPath: harness.root.file("limited.bin"), size: size))
            let gets = origin.requests(for: path)
            // The first request already asks for a range (its answer tells the length), the
            // others for the next ranges of the same version: never more than a chunk ahead, so a
            // stop loses at most what one range holds, not what the server's socket took.
            let ranges = gets.compactMap { parseRange($0.header("Range")) }
            #expect(ranges.count == gets.count, "\(gets.map { $0.header("Range") ?? "-" })")
            #expect(ranges.first?.first == 0)
            #expect(ranges.first?.last == oneMiB - 1)
            let minimum = SplitPolicy().minimumChunk
            for range in ranges { #expect((range.last ?? size - 1) - range.first + 1 <= minimum, "\(range)") }
            #expect(ranges.map(\.first) == ranges.map(\.first).sorted(), "in order, one after the other")
            #expect(gets.dropFirst().allSatisfy { $0.header("If-Match") == originETag(origin, path, size: size) })
            #expect(origin.bytesServed(for: path) == size, "every byte once")
            #expect(Set(gets.map(\.connection)).count == 1, "one connection, kept")
        }
    }

    @Test(arguments: [Int64(0), 1, 1_000_000, 1_048_576, 1_048_577])
    func underARateLimitAFileOfAnySizeAroundTheFirstRangeCompletes(size: Int64) async throws {
        var engine = CurlEngine.Configuration.forTests()
        engine.globalRateLimit = 200 * oneMiB
        try await withManager(engine: engine) { harness in
            let path = "/sized-\(size).bin"
            let origin = harness.origin
            origin.serve(path, .generated(size: size))
            let entity = DirectEntity(url: origin.url(path))
            try await harness.manager.start(entity)
            let done = try #require(await harness.waitForState(entity.taskID, .completed, timeout: .seconds(30)))
            #expect(done.bytesDone == size)
            #expect(await origin.content(at: path).verifyFile(atPath: harness.root.file("sized-\(size).bin"), size: size))
            // The first range (1 MiB) is asked for before the length is known: a shorter file
            // ends it, and nothing is asked for twice.
            let gets = origin.requests(for: path)
            #expect(gets.first?.header("Range") == "bytes=0-1048575")
            #expect(gets.count == (size > oneMiB ? 2 : 1), "\(gets.map { $0.header("Range") ?? "-" })")
            #expect(origin.bytesServed(for: path) == size, "every byte once")
        }
    }

    @Test func underARateLimitAServerWithoutRangesSendsTheWholeFileOnce() async throws {
        var engine = CurlEngine.Configuration.forTests()
        engine.globalRateLimit = 200 * oneMiB
        try await withManager(engine: engine) { harness in
            let size: Int64 = 3 * oneMiB
            let path = "/whole.bin"
            let origin = harness.origin
            origin.serve(path, .generated(size: size))
            origin.inject(.ignoreRange, at: path)
            let entity = DirectEntity(url: origin.url(path))
            try await harness.manager.start(entity)
            let done = try #require(await harness.waitForState(entity.taskID, .completed, timeout: .seconds(30)))
            #expect(done.bytesDone == size)
            #expect(await origin.content(at: path).verifyFile(atPath: harness.root.file("whole.bin"), size: size))
            // The first range was answered with the whole file: the next request asks for
            // everything (and nothing is asked for in ranges again).
            let gets = origin.requests(for: path)
            #expect(gets.count == 2, "\(gets.map { $0.header("Range") ?? "-" })")
            #expect(gets.last?.header("Range") == nil)
        }
    }

    @Test func underARateLimitAFileWithoutAStrongValidatorIsFetchedWhole() async throws {
        var engine = CurlEngine.Configuration.forTests()
        engine.globalRateLimit = 200 * oneMiB
        try await withManager(engine: engine) { harness in
            let size: Int64 = 3 * oneMiB
            let path = "/unversioned.bin"
            let origin = harness.origin
            origin.serve(path, .init(.generated(size: size), sendsETag: false, sendsLastModified: false))
            let entity = DirectEntity(url: origin.url(path))
            try await harness.manager.start(entity)
            let done = try #require(await harness.waitForState(entity.taskID, .completed, timeout: .seconds(30)))
            #expect(done.bytesDone == size)
            #expect(await origin.content(at: path).verifyFile(atPath: harness.root.file("unversioned.bin"), size: size))
            // Ranges of an unversioned file could splice two versions: after the first range,
            // one request for the whole file.
            let gets = origin.requests(for: path)
            #expect(gets.map { $0.header("Range") ?? "-" } == ["bytes=0-1048575", "-"])
        }
    }

    @Test func theChunkGrowsWithTheRateAndTheRoundTrip() {
        let policy = SplitPolicy()
        #expect(policy.chunk(rate: 40 << 20, roundTrip: nil) == policy.minimumChunk)
        #expect(policy.chunk(rate: 40 << 20, roundTrip: .microseconds(50)) == policy.minimumChunk, "loopback")
        #expect(policy.chunk(rate: 10 << 20, roundTrip: .milliseconds(50)) == 8 << 20, "16 round trips at the rate")
        #expect(policy.chunk(rate: 1 << 40, roundTrip: .seconds(1)) == 64 << 20, "at most 64 MiB")
        #expect(policy.chunk(rate: .max, roundTrip: .seconds(10_000)) == 64 << 20, "no overflow")
        #expect(policy.chunk(rate: -5, roundTrip: .seconds(1)) == policy.minimumChunk)
    }

    @Test func theSplitThresholdIsInclusive() async throws {
        try await withManager(configure: smallSplitting(minimumSize: 2 * oneMiB, pieceSize: 256 * 1024)) { harness in
            let origin = harness.origin
            let below = "/bytes/\(2 * oneMiB - 1)/below.bin"
            let at = "/bytes/\(2 * oneMiB)/at.bin"
            for path in [below, at] { origin.inject(.throttle(bytesPerSecond: 1_000_000), at: path) }
            let belowEntity = DirectEntity(url: origin.url(below))
            let atEntity = DirectEntity(url: origin.url(at))
            try await harness.manager.start(belowEntity)
            try await harness.manager.start(atEntity)
            _ = try #require(await harness.waitForState(belowEntity.taskID, .completed))
            _ = try #require(await harness.waitForState(atEntity.taskID, .completed))
            expectOneWholeGET(origin, below)
            #expect(origin.requests(for: at).count >= 2, "a file of exactly minimumSize is split")
            #expect(await origin.content(at: below).verifyFile(atPath: harness.root.file("below.bin"), size: 2 * oneMiB - 1))
            #expect(await origin.content(at: at).verifyFile(atPath: harness.root.file("at.bin"), size: 2 * oneMiB))
        }
    }

    @Test func oneConnectionPerFileNeverSplits() async throws {
        try await withManager(configure: smallSplitting(maxConnections: 1)) { harness in
            let size: Int64 = 6 * oneMiB
            let path = "/bytes/\(size)/alone.bin"
            harness.origin.inject(.throttle(bytesPerSecond: 8_000_000), at: path)
            let entity = DirectEntity(url: harness.origin.url(path))
            try await harness.manager.start(entity)
            _ = try #require(await harness.waitForState(entity.taskID, .completed))
            expectOneWholeGET(harness.origin, path)
            #expect(await harness.origin.content(at: path).verifyFile(atPath: harness.root.file("alone.bin"), size: size))
        }
    }

    @Test func aRedirectedLargeFileSplitsAndIsNamedAfterTheTarget() async throws {
        try await withManager(configure: smallSplitting()) { harness in
            let origin = harness.origin
            let size: Int64 = 12 * oneMiB
            let start = "/get/latest"
            let target = "/bytes/\(size)/target.bin"
            origin.inject(.redirect(to: target), at: start)
            origin.inject(.throttle(bytesPerSecond: 4_000_000), at: target)
            let entity = DirectEntity(url: origin.url(start))
            try await harness.manager.start(entity)
            let done = try #require(await harness.waitForState(entity.taskID, .completed))
            #expect(done.outputs.map(\.path) == [harness.root.file("target.bin")])
            #expect(await origin.content(at: target).verifyFile(atPath: harness.root.file("target.bin"), size: size))
            let gets = origin.requests(for: target)
            #expect(gets.first?.header("Range") == nil)
            #expect(gets.count >= 2, "split after the redirect")
            let etag = originETag(origin, target, size: size)
            #expect(gets.dropFirst().allSatisfy { $0.header("If-Match") == etag && $0.header("Range") != nil })
            #expect(origin.requests.allSatisfy { $0.method == "GET" })
        }
    }

    // MARK: - Validators and ranges decide the split

    @Test func withoutAnETagRangesCarryIfUnmodifiedSince() async throws {
        try await withManager(configure: smallSplitting()) { harness in
            let origin = harness.origin
            let size: Int64 = 12 * oneMiB
            origin.serve("/dated.bin", LoopbackOrigin.Resource(.generated(size: size), sendsETag: false))
            origin.inject(.throttle(bytesPerSecond: 4_000_000), at: "/dated.bin")
            let entity = DirectEntity(url: origin.url("/dated.bin"))
            try await harness.manager.start(entity)
            _ = try #require(await harness.waitForState(entity.taskID, .completed))
            #expect(await origin.content(at: "/dated.bin").verifyFile(atPath: harness.root.file("dated.bin"), size: size))
            let gets = origin.requests(for: "/dated.bin")
            #expect(gets.allSatisfy { $0.method == "GET" })
            #expect(gets.first?.header("Range") == nil)
            #expect(gets.first?.header("If-Unmodified-Since") == nil)
            #expect(gets.count >= 2, "a strong Last-Modified is enough to split")
            let lastModified = originLastModified()
            for request in gets.dropFirst() {
                #expect(request.header("Range") != nil)
                #expect(request.header("If-Unmodified-Since") == lastModified)
                #expect(request.header("If-Match") == nil)
            }
        }
    }

    @Test func aWeakETagWithAStrongDateUsesTheDate() async throws {
        try await withManager(configure: smallSplitting()) { harness in
            let origin = harness.origin
            let size: Int64 = 12 * oneMiB
            origin.serve("/weakdated.bin", LoopbackOrigin.Resource(
                .generated(size: size), sendsETag: false, extraHeaders: [("ETag", #"W/"weak-1""#)]))
            origin.inject(.throttle(bytesPerSecond: 4_000_000), at: "/weakdated.bin")
            let entity = DirectEntity(url: origin.url("/weakdated.bin"))
            try await harness.manager.start(entity)
            _ = try #require(await harness.waitForState(entity.taskID, .completed))
            #expect(await origin.content(at: "/weakdated.bin").verifyFile(atPath: harness.root.file("weakdated.bin"), size: size))
            let gets = origin.requests(for: "/weakdated.bin")
            #expect(gets.count >= 2)
            #expect(gets.dropFirst().allSatisfy { $0.header("If-Match") == nil && $0.header("If-Unmodified-Since") == originLastModified() },
                "a weak ETag is never used for If-Match")
        }
    }

    /// Resources that must be fetched over exactly one connection although large and slow.
    enum Unsplittable: String, CaseIterable, Sendable {
        case weakETagOnly, noValidator, lastModifiedNotOlderThanDate, serverIgnoresRanges, serverWithoutRanges
    }

    @Test(arguments: Unsplittable.allCases)
    func withoutRangesOrAStrongValidatorItStaysOneConnection(_ kind: Unsplittable) async throws {
        try await withManager(configure: smallSplitting()) { harness in
            let origin = harness.origin
            let size: Int64 = 8 * oneMiB
            let path = "/\(kind.rawValue).bin"
            let resource: LoopbackOrigin.Resource
            switch kind {
            case .weakETagOnly:
                resource = .init(.generated(size: size), sendsETag: false, sendsLastModified: false, extraHeaders: [("ETag", #"W/"weak-1""#)])
            case .noValidator:
                resource = .init(.generated(size: size), sendsETag: false, sendsLastModified: false)
            case .lastModifiedNotOlderThanDate:
                // A date an hour ahead of the response's Date is no validator for ranges.
                let future = Date().addingTimeInterval(3600)
                let formatter = DateFormatter()
                formatter.locale = Locale(identifier: "en_US_POSIX")
                formatter.timeZone = TimeZone(identifier: "GMT")
                formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
                resource = .init(.generated(size: size), sendsETag: false, sendsLastModified: false,
                    extraHeaders: [("Last-Modified", formatter.string(from: future))])
            case .serverIgnoresRanges:
                resource = .generated(size: size)
                origin.inject(.ignoreRange, at: path)
            case .serverWithoutRanges:
                resource = .init(.generated(size: size), acceptsRanges: false)
            }
            origin.serve(path, resource)
            origin.inject(.throttle(bytesPerSecond: 8_000_000), at: path)
            let entity = DirectEntity(url: origin.url(path))
            try await harness.manager.start(entity)
            let done = try #require(await harness.waitForState(entity.taskID, .completed))
            expectOneWholeGET(origin, path)
            #expect(origin.bytesServed(for: path) == size)
            #expect(done.bytesDone == size)
            #expect(await origin.content(at: path).verifyFile(atPath: harness.root.file("\(kind.rawValue).bin"), size: size))
        }
    }

    // MARK: - A file that changes while it downloads

    static let changeSize: Int64 = 8 * oneMiB

    /// Starts a download of `path` over two connections and changes the file once the second
    /// connection's range has been asked for. The first (whole) GET is slow and the ranges fast,
    /// so the second connection finishes first and takes half of the first one's rest: a range
    /// asked for after the change, with the old version's `If-Match`. Returns the final info and
    /// the origin's requests from the change on.
    private func downloadWhileChanging(
        _ harness: ManagerHarness, path: String
    ) async throws -> (info: DownloadTaskInfo?, afterChange: [LoopbackOrigin.RecordedRequest]) {
        let origin = harness.origin
        // Faults combine in the order given, the last throttle winning: the first request gets
        // 400 kB/s, every later one 2 MB/s.
        origin.inject(.throttle(bytesPerSecond: 2_000_000), at: path)
        origin.inject(.throttle(bytesPerSecond: 400_000), at: path, times: 1)
        let entity = DirectEntity(url: origin.url(path))
        try await harness.manager.start(entity)
        // The split has begun: a ranged request went out.
        // Checked every 2 ms: the content must change before the fast second connection is done.
        let split = await eventually(within: .seconds(20), every: .milliseconds(2)) {
            origin.requests(for: path).contains { $0.header("Range") != nil }
        }
        try #require(split, "the download was split")
        let before = origin.requests(for: path).count
        origin.changeContent(at: path)
        let final = await waitForEnd(harness, entity.taskID)
        return (final, Array(origin.requests(for: path).dropFirst(before)))
    }

    /// Two connections, small pieces.
    static func changeSplitting(_ configuration: inout DownloadTaskManager.Configuration) {
        configuration.splitting = SplitPolicy(minimumSize: oneMiB, pieceSize: 256 * 1024, maxConnections: 2)
    }

    /// Which version each 64 KiB block of `bytes` holds: 0, 1, or -1 for neither (torn).
    private func blockVersions(_ bytes: [UInt8], path: String) -> [Int] {
        let v0 = OriginContent(path: path, version: 0), v1 = OriginContent(path: path, version: 1)
        let block: Int64 = 64 * 1024
        return stride(from: Int64(0), to: Int64(bytes.count), by: Int(block)).map { offset -> Int in
            let range = offset..<min(offset + block, Int64(bytes.count))
            let piece = Array(bytes[Int(range.lowerBound)..<Int(range.upperBound)])
            if piece == v0.bytes(range) { return 0 }
            if piece == v1.bytes(range) { return 1 }
            return -1
        }
    }

    @Test func aFileThatChangesUnderAServerIgnoringIfMatchIsNeverSpliced() async throws {
        try await withManager(configure: { Self.changeSplitting(&$0) }) { harness in
            let path = "/bytes/\(Self.changeSize)/careless.bin"
            harness.origin.inject(.ignoreConditions, at: path)
            let (info, afterChange) = try await downloadWhileChanging(harness, path: path)
            let staleETag = originETag(harness.origin, path, size: Self.changeSize, version: 0)
            let freshETag = originETag(harness.origin, path, size: Self.changeSize, version: 1)
            // The scenario happened: a range was asked for the old version after the change, and
            // this server answered it with the new one.
            #expect(afterChange.contains { $0.header("If-Match") == staleETag && $0.header("Range") != nil },
                "requests after the change: \(afterChange.map { "\($0.header("Range") ?? "whole") \($0.header("If-Match") ?? "-")" })")
            let done = try #require(info)
            #expect(done.state == .completed, "error: \(String(describing: done.error))")
            #expect(done.resolveCount == 2, "the output started over once")
            let bytes = fileBytes(harness.root.file("careless.bin"))
            #expect(bytes.count == Int(Self.changeSize))
            let versions = blockVersions(bytes, path: path)
            #expect(!versions.contains(-1), "no block is torn")
            #expect(Set(versions).count == 1, "one version only: \(versions.filter { $0 == 0 }.count) blocks of v0, \(versions.filter { $0 == 1 }.count) of v1")
            #expect(Set(versions) == [1], "the change was seen, so the file is the new version")
            // Started over: a whole GET for the new version, then ranges of it.
            let restart = afterChange.firstIndex { $0.header("Range") == nil }
            #expect(restart != nil, "the new version was fetched from a whole GET")
            if let restart {
                #expect(afterChange[(restart + 1)...].allSatisfy { $0.header("If-Match") == freshETag })
            }
            #expect(harness.origin.requests.allSatisfy { $0.method == "GET" })
        }
    }

    @Test func aFileThatChangesUnderAServerHonouringIfMatchGets412AndIsOneVersion() async throws {
        try await withManager(configure: { Self.changeSplitting(&$0) }) { harness in
            let path = "/bytes/\(Self.changeSize)/honoured.bin"
            let (info, afterChange) = try await downloadWhileChanging(harness, path: path)
            let staleETag = originETag(harness.origin, path, size: Self.changeSize, version: 0)
            let freshETag = originETag(harness.origin, path, size: Self.changeSize, version: 1)
            let log = afterChange.map { "\($0.header("Range") ?? "whole") \($0.header("If-Match") ?? "-")" }
            // A range asked for the old version after the change: this origin answered 412.
            let stale = afterChange.firstIndex { $0.header("If-Match") == staleETag }
            #expect(stale != nil, "a stale If-Match met the 412: \(log)")
            #expect(await harness.sawEvent {
                if case .taskError(_, let error, true) = $0 { return error.httpStatus == 412 } else { return false }
            }, "the 412 was reported and retried")
            let done = try #require(info)
            #expect(done.state == .completed, "error: \(String(describing: done.error))")
            #expect(done.resolveCount == 2, "the output started over once")
            let bytes = fileBytes(harness.root.file("honoured.bin"))
            #expect(bytes.count == Int(Self.changeSize))
            let versions = blockVersions(bytes, path: path)
            #expect(Set(versions) == [1], "every block is of the new version: \(versions)")
            // The output started over with a whole GET of the new version; its ranges name it.
            let restart = afterChange.firstIndex { $0.header("Range") == nil }
            #expect(restart != nil, "a whole GET after the change: \(log)")
            if let restart {
                let rest = afterChange[(restart + 1)...]
                #expect(rest.allSatisfy { $0.header("If-Match") == freshETag }, "\(log)")
            }
            #expect(harness.origin.requests.allSatisfy { $0.method == "GET" })
        }
    }

}

extension DirectEntityTests {
    // MARK: - Errors

    @Test(arguments: [404, 410])
    func aGoneResourceEndsTheTaskInvalidWithTheStatus(_ status: Int) async throws {
        try await withManager { harness in
            let path = "/bytes/100/gone-\(status).bin"
            harness.origin.inject(.status(status), at: path)
            let entity = DirectEntity(url: harness.origin.url(path))
            try await harness.manager.start(entity)
            let done = try #require(await waitForEnd(harness, entity.taskID))
            #expect(done.state == .invalid)
            #expect(done.error?.code == .httpStatus)
            #expect(done.error?.httpStatus == status)
            let requests = harness.origin.requests
            #expect(requests.allSatisfy { $0.method == "GET" && $0.header("Range") == nil }, "no HEAD, no range")
            #expect(!requests.isEmpty && requests.count <= 1 + RetryPolicy().maxReResolves,
                "\(requests.count) GETs")
            #expect(harness.root.files.isEmpty, "no output")
            #expect(await eventually { workParts(harness).isEmpty }, "no partial file left")
        }
    }

    @Test func aNonHTTPURLIsRefusedWithoutARequest() async throws {
        try await withManager { harness in
            let entities = ["ftp://127.0.0.1:\(harness.origin.port)/x", "file:///etc/passwd"].map { DirectEntity(url: URL(string: $0)!) }
            for entity in entities {
                do {
                    try await harness.manager.start(entity)
                } catch let error as DownloadError {
                    // Refused at once is as good as refused by the task.
                    #expect(error.code == .unsafeInput)
                    continue
                }
                let done = try #require(await waitForEnd(harness, entity.taskID))
                #expect(done.state == .invalid)
                #expect(done.error?.code == .unsafeInput)
            }
            #expect(harness.origin.totalRequests == 0)
            #expect(harness.origin.connectionsAccepted == 0)
            #expect(harness.root.files.isEmpty)
        }
    }

    @Test func a503WithRetryAfterIsWaitedOutThenTheFileCompletes() async throws {
        try await withManager(configure: { $0.sleeper = ContinuousSleeper() }) { harness in
            let size: Int64 = 50_000
            let path = "/bytes/\(size)/busy.bin"
            harness.origin.inject(.status(503, retryAfter: "1"), at: path, times: 1)
            let entity = DirectEntity(url: harness.origin.url(path))
            let started = ContinuousClock.now
            try await harness.manager.start(entity)
            let done = try #require(await harness.waitForState(entity.taskID, .completed))
            let elapsed = ContinuousClock.now - started
            let requests = harness.origin.requests(for: path)
            #expect(requests.map(\.method) == ["GET", "GET"])
            #expect(requests.allSatisfy { $0.header("Range") == nil })
            if requests.count >= 2 {
                let gap = requests[1].receivedAt - requests[0].receivedAt
                #expect(gap >= .seconds(1), "the second request went out \(gap) after the first")
                // Not the default backoff's minute either (a loaded machine has delayed it by 9 s).
                #expect(gap < .seconds(30), "and not much later: \(gap)")
            }
            #expect(elapsed >= .seconds(1))
            #expect(done.outputs.map(\.path) == [harness.root.file("busy.bin")])
            #expect(await harness.origin.content(at: path).verifyFile(atPath: harness.root.file("busy.bin"), size: size))
            #expect(await harness.sawEvent {
                if case .taskError(_, let error, true) = $0 { return error.httpStatus == 503 } else { return false }
            })
        }
    }
}
