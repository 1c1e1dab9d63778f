import Foundation
import MetalinkEntity
import Tessera
import Testing
import TesseraTestSupport

/// Hostile and broken documents: each is refused with a precise error, or the bad part is left out.
@Suite struct MetalinkBadInputTests {
    private static let good = #"<file name="f"><size>3</size><url>http://example.com/f</url></file>"#

    @Test func malformedXMLNamesTheLine() {
        let error = downloadError { _ = try parse("<?xml version=\"1.0\"?>\n<metalink xmlns=\"urn:ietf:params:xml:ns:metalink\">\n<file name=\"a\"><size>1</file>\n</metalink>") }
        #expect(error?.code == .manifestInvalid)
        #expect(error?.message.contains("line 3") == true)
    }

    @Test func aTruncatedDocumentIsRefused() {
        let full = meta4(Self.good + Self.good.replacingOccurrences(of: "\"f\"", with: "\"g\""))
        for length in [10, full.count / 2, full.count - 3] {
            let error = downloadError { _ = try parse(String(full.prefix(length))) }
            #expect(error?.code == .manifestInvalid, "cut at \(length)")
        }
        #expect(downloadError { _ = try parse("") }?.code == .manifestInvalid)
    }

    @Test func anotherRootElementIsRefused() {
        let error = downloadError { _ = try parse(#"<feed xmlns="http://www.w3.org/2005/Atom"><entry/></feed>"#) }
        #expect(error?.code == .manifestInvalid)
        #expect(error?.message.contains("not a Metalink") == true)
        #expect(error?.message.contains("<feed>") == true)
    }

    @Test func anotherNamespaceIsRefused() {
        let other = downloadError { _ = try parse(#"<metalink xmlns="urn:example:other">\#(Self.good)</metalink>"#) }
        #expect(other?.code == .manifestInvalid)
        #expect(other?.message.contains("urn:example:other") == true)
        let none = downloadError { _ = try parse("<metalink>\(Self.good)</metalink>") }
        #expect(none?.code == .manifestInvalid)
        #expect(none?.message.contains("no namespace") == true)
        // Metalink 4 elements under a Metalink 3 root are not files.
        let mixed = downloadError { _ = try parse(#"<metalink xmlns="http://www.metalinker.org/"><file xmlns="urn:ietf:params:xml:ns:metalink" name="f"/></metalink>"#) }
        #expect(mixed?.code == .manifestInvalid)
    }

    @Test func aDocumentWithoutFilesIsRefused() {
        let error = downloadError { _ = try parse(meta4("<published>2024-01-01T00:00:00Z</published>")) }
        #expect(error?.code == .manifestInvalid)
        #expect(error?.message.contains("no <file>") == true)
    }

    @Test func missingRequiredAttributesAreNamed() {
        let noName = downloadError { _ = try parse(meta4("  <file><url>http://example.com/f</url></file>")) }
        #expect(noName?.code == .manifestInvalid)
        #expect(noName?.message.contains("<file> element at line 3 has no name") == true)

        func fileError(_ body: String) -> DownloadError? {
            downloadError { _ = try parse(meta4(body)).file(named: "f") }
        }
        let noLength = fileError(#"  <file name="f"><size>3</size><pieces type="sha-256"><hash>00</hash></pieces></file>"#)
        #expect(noLength?.code == .manifestInvalid)
        #expect(noLength?.message.contains("<pieces> at line 3 has no length") == true)
        let noType = fileError(#"  <file name="f"><size>3</size><pieces length="2"><hash>00</hash></pieces></file>"#)
        #expect(noType?.message.contains("<pieces> at line 3 has no type") == true)
        let badLength = fileError(#"  <file name="f"><size>3</size><pieces length="-2" type="sha-256"><hash>00</hash></pieces></file>"#)
        #expect(badLength?.message.contains("not a positive number") == true)
        let hashType = fileError("  <file name=\"f\">\n<hash>\(sha256("x"))</hash></file>")
        #expect(hashType?.code == .manifestInvalid)
        #expect(hashType?.message.contains("<hash> at line 4 has no type") == true)
    }

    @Test func badValuesAreNamedWithTheirLine() {
        func fileError(_ body: String) -> DownloadError? {
            downloadError { _ = try parse(meta4(body)).file(named: "f") }
        }
        let size = fileError("  <file name=\"f\">\n    <size>12 MB</size></file>")
        #expect(size?.code == .manifestInvalid)
        #expect(size?.message.contains("<size> at line 4") == true)
        #expect(size?.message.contains("12 MB") == true)
        #expect(fileError(#"<file name="f"><size>-1</size></file>"#)?.code == .manifestInvalid)
        let hash = fileError(#"<file name="f"><hash type="sha-256">not-hex</hash></file>"#)
        #expect(hash?.code == .manifestInvalid)
        #expect(hash?.message.contains("hex") == true)
        let short = fileError(#"<file name="f"><hash type="md5">abcd</hash></file>"#)
        #expect(short?.code == .manifestInvalid)
        let piece = fileError(#"<file name="f"><size>4</size><pieces length="2" type="sha-256"><hash>\#(sha256("1"))</hash><hash>zz</hash></pieces></file>"#)
        #expect(piece?.code == .manifestInvalid)
        #expect(piece?.message.contains("piece hash 2") == true)
        let empty = fileError(#"<file name="f"><pieces length="2" type="sha-256"/></file>"#)
        #expect(empty?.message.contains("lists no <hash>") == true)
    }

    @Test func aPieceCountThatDoesNotMatchTheSizeIsRefused() {
        let error = downloadError {
            _ = try parse(meta4(#"<file name="f"><size>5000</size><pieces length="2048" type="sha-256"><hash>\#(sha256("1"))</hash><hash>\#(sha256("2"))</hash></pieces></file>"#)).file(named: "f")
        }
        #expect(error?.code == .manifestInvalid)
        #expect(error?.message.contains("lists 2 hashes, but 5000 bytes in pieces of 2048 bytes are 3") == true)
    }

    @Test func badMetalink3PieceNumbersAreRefused() {
        func v3(_ hashes: String) -> DownloadError? {
            downloadError {
                _ = try parse(#"<metalink xmlns="http://www.metalinker.org/"><files><file name="f"><size>4</size><verification><pieces length="2" type="sha1">\#(hashes)</pieces></verification></file></files></metalink>"#).file(named: "f")
            }
        }
        let a = checksum(.sha1, [1]).hexDigest, b = checksum(.sha1, [2]).hexDigest
        #expect(v3(#"<hash piece="0">\#(a)</hash><hash>\#(b)</hash>"#)?.message.contains("not all") == true)
        #expect(v3(#"<hash piece="0">\#(a)</hash><hash piece="0">\#(b)</hash>"#)?.message.contains("exactly once") == true)
        #expect(v3(#"<hash piece="1">\#(a)</hash><hash piece="2">\#(b)</hash>"#)?.code == .manifestInvalid)
    }

    @Test func entityBombsAreRefused() {
        let bomb = """
            <?xml version="1.0"?>
            <!DOCTYPE metalink [
             <!ENTITY lol "lol">
             <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
             <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
             <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
             <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
             <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
             <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
             <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
             <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
             <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
            ]>
            <metalink xmlns="urn:ietf:params:xml:ns:metalink"><file name="&lol9;"><url>http://example.com/f</url></file></metalink>
            """
        #expect(downloadError { _ = try parse(bomb) }?.code == .unsafeInput)
    }

    @Test func externalEntitiesAreRefused() {
        let external = """
            <?xml version="1.0"?>
            <!DOCTYPE metalink [ <!ENTITY secret SYSTEM "file:///etc/passwd"> ]>
            <metalink xmlns="urn:ietf:params:xml:ns:metalink"><file name="f"><description>&secret;</description><url>http://example.com/f</url></file></metalink>
            """
        #expect(downloadError { _ = try parse(external) }?.code == .unsafeInput)
        let dtd = """
            <?xml version="1.0"?>
            <!DOCTYPE metalink SYSTEM "http://127.0.0.1:9/metalink.dtd">
            <metalink xmlns="urn:ietf:params:xml:ns:metalink"><file name="f"><url>http://example.com/f</url></file></metalink>
            """
        #expect(downloadError { _ = try parse(dtd) }?.code == .unsafeInput)
    }

    /// Names that would leave the destination directory are refused for their file.
    @Test func hostileNamesAreRefused() throws {
        for name in ["../x", "a/../../x", "..", "/etc/passwd", "~/x", #"a\b"#, "", "./", "a/./../../b"] {
            let escaped = name.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "\"", with: "&quot;")
            let xml = meta4("<file name=\"\(escaped)\"><url>http://example.com/f</url></file>\n" + Self.good)
            let document = try parse(xml)
            #expect(document.entries.count == 2)
            let error = downloadError { _ = try MetalinkEntity.manifest(for: document.file(at: 0), in: document) }
            #expect(error?.code == .unsafePath, "\(name)")
            // The other file is fine.
            #expect(try MetalinkEntity.manifest(for: document.file(named: "f"), in: document).outputs[0].name == "f")
        }
        // XML cannot carry a NUL: the document itself is refused.
        #expect(downloadError { _ = try parse(meta4(#"<file name="a&#0;b"><url>http://example.com/f</url></file>"#)) }?.code == .manifestInvalid)
    }

    /// An entity whose name is unsafe refuses before fetching anything.
    @Test func anEntityWithAnUnsafeNameRefusesBeforeFetching() async throws {
        var configuration = CurlEngine.Configuration.forTests()
        configuration.connectTimeout = .seconds(1)
        let engine = try CurlEngine(configuration: configuration)
        for name in ["a\u{0}b", "../../etc/passwd", "/abs"] {
            let entity = MetalinkEntity(metalinkURL: URL(string: "http://127.0.0.1:9/never.meta4")!, fileName: name)
            do {
                _ = try await entity.resolve(in: ResolveContext(engine: engine))
                Issue.record("\(name) was accepted")
            } catch let error as DownloadError {
                #expect(error.code == .unsafePath, "\(name): \(error)")
            }
        }
        await engine.shutdown()
    }

    /// Mirrors with other schemes or control characters are skipped; none left is an error.
    @Test func hostileSchemesAreRefused() throws {
        for url in ["file:///etc/passwd", "ftp://example.com/f", "javascript:alert(1)", "data:text/plain,hi", "gopher://example.com/f"] {
            let xml = meta4(#"<file name="f"><url>\#(url)</url></file>"#)
            let file = try parse(xml).file(named: "f")
            #expect(file.mirrors.isEmpty)
            #expect(file.skippedMirrors.count == 1)
            let error = downloadError { _ = try manifest(xml) }
            #expect(error?.code == .unsafeInput, "\(url)")
            #expect(error?.message.contains("no http or https mirror") == true)
        }
        let mixed = meta4("""
              <file name="f">
                <url priority="1">file:///etc/passwd</url>
                <url priority="2">javascript:alert(1)</url>
                <url priority="3">http://example.com/a&#9;b</url>
                <url priority="4">http://exa mple.com/f</url>
                <url priority="5">http:///nohost</url>
                <url priority="6">https://ok.example.com/f</url>
              </file>
            """)
        let file = try parse(mixed).file(named: "f")
        #expect(file.mirrors.map(\.url.absoluteString) == ["https://ok.example.com/f"])
        #expect(file.skippedMirrors.count == 5)
        #expect(try manifest(mixed).outputs[0].segments[0].urls == [URL(string: "https://ok.example.com/f")!])
    }

    @Test func aFileWithoutURLsIsRefused() {
        let error = downloadError { _ = try manifest(meta4(#"<file name="f"><size>1</size><metaurl mediatype="torrent">http://example.com/f.torrent</metaurl></file>"#)) }
        #expect(error?.code == .manifestInvalid)
        #expect(error?.message.contains("no <url>") == true)
    }

    @Test func aFileNoLongerListedIsReported() throws {
        let error = downloadError { _ = try parse(meta4(Self.good)).file(named: "gone.bin") }
        #expect(error?.code == .manifestInvalid)
        #expect(error?.message.contains("gone.bin") == true)
    }

    /// Over the segment limit: refused with `manifestTooLarge`, counted before anything is built.
    @Test func overTheSegmentLimitIsRefused() throws {
        let hashes = (0..<5).map { "<hash>\(sha256("\($0)"))</hash>" }.joined()
        let five = meta4(#"<file name="f"><size>10</size><pieces length="2" type="sha-256">\#(hashes)</pieces><url>http://example.com/f</url></file>"#)
        #expect(downloadError { _ = try manifest(five, maxSegments: 4) }?.code == .manifestTooLarge)
        #expect(try manifest(five, maxSegments: 5).outputs[0].segments.count == 5)

        // A terabyte in one-byte pieces is refused by its count, not read hash by hash.
        let huge = meta4(#"<file name="f"><size>1000000000000</size><pieces length="1" type="sha-256"><hash>\#(sha256("1"))</hash></pieces><url>http://example.com/f</url></file>"#)
        let error = downloadError { _ = try manifest(huge, maxSegments: 1_000_000) }
        #expect(error?.code == .manifestTooLarge)
        #expect(error?.message.contains("1000000000000 pieces") == true)

        // More hashes than the limit, without a size.
        #expect(downloadError { _ = try parse(meta4(#"<file name="f"><pieces length="2" type="sha-256">\#(hashes)</pieces></file>"#)).file(named: "f", maxPieces: 4) }?.code == .manifestTooLarge)

        // Split ranges count too.
        let big = meta4(#"<file name="f"><size>1000000</size><url>http://example.com/f</url></file>"#)
        #expect(downloadError { _ = try manifest(big, maxSegments: 9, splitting: SplitPolicy(minimumSize: 1, pieceSize: 100_000)) }?.code == .manifestTooLarge)
        #expect(try manifest(big, maxSegments: 10, splitting: SplitPolicy(minimumSize: 1, pieceSize: 100_000)).outputs[0].segments.count == 10)

        // And files.
        let three = meta4(Self.good + Self.good + Self.good)
        #expect(downloadError { _ = try parse(three, maxFiles: 2) }?.code == .manifestTooLarge)
    }
}
