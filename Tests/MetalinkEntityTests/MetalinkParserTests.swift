import Foundation
import MetalinkEntity
import Tessera
import Testing
import TesseraTestSupport

/// Hand-written documents in the shapes of RFC 5854 and Metalink 3.0, with exact expectations.
@Suite struct MetalinkParserTests {
    /// The first example of RFC 5854 §1.1: an ftp and an http mirror of equal priority, a torrent.
    @Test func readsTheRFC5854Example() throws {
        let hash = sha256("example.ext")
        let xml = meta4("""
              <file name="example.ext">
                <size>14471447</size>
                <identity>Example</identity>
                <version>1.0</version>
                <language>en</language>
                <description>A description of the example file for download.</description>
                <hash type="sha-256">\(hash)</hash>
                <url location="de" priority="1">ftp://ftp.example.com/example.ext</url>
                <url location="fr" priority="1">http://example.com/example.ext</url>
                <metaurl mediatype="torrent" priority="2">http://example.com/example.ext.torrent</metaurl>
              </file>
            """)
        let document = try parse(xml)
        #expect(document.version == .v4)
        #expect(document.entries.map(\.name) == ["example.ext"])
        #expect(document.entries[0].line == 3)
        let file = try document.file(named: "example.ext")
        #expect(file.size == 14_471_447)
        #expect(file.mirrors.map(\.url.absoluteString) == ["http://example.com/example.ext"])
        #expect(file.mirrors[0].location == "fr")
        #expect(file.mirrors[0].priority == 1)
        #expect(file.skippedMirrors.count == 1)
        #expect(file.skippedMirrors[0].contains("ftp://ftp.example.com/example.ext"))
        #expect(file.notes.contains { $0.contains("metaurl") })
        #expect(file.checksum == (try Checksum(.sha256, hex: hash)))
        #expect(file.metadata == [
            "identity": "Example", "version": "1.0", "language": "en",
            "description": "A description of the example file for download.",
        ])

        let manifest = try MetalinkEntity.manifest(for: file, in: document)
        try manifest.validate()
        #expect(manifest.title == "example.ext")
        #expect(manifest.sourceURL?.absoluteString == "https://example.com/files/example.meta4")
        #expect(manifest.outputs.count == 1)
        let output = manifest.outputs[0]
        #expect(output.name == "example.ext")
        #expect(output.assembly == .concatenated)
        #expect(output.expectedSize == 14_471_447)
        #expect(output.checksum == file.checksum)
        #expect(output.segments == [DownloadSegment(
            urls: [URL(string: "http://example.com/example.ext")!], expectedSize: 14_471_447, checksum: file.checksum)])
        #expect(manifest.metadata["metalink"] == "4.0")
        #expect(manifest.metadata["mirrors"] == "1")
        #expect(manifest.metadata["skippedMirrors"] == "1")
    }

    /// The second example of RFC 5854 §1.1: 14471447 bytes in pieces of 256 KiB are 56 pieces,
    /// the last of 53527 bytes.
    @Test func piecesBecomeVerifiedByteRanges() throws {
        let pieceHashes = (0..<56).map { sha256("piece \($0)") }
        let xml = meta4("""
              <published>2009-05-15T12:23:23Z</published>
              <file name="example.ext">
                <size>14471447</size>
                <hash type="sha-256">\(sha256("whole"))</hash>
                <pieces length="262144" type="sha-256">
            \(pieceHashes.map { "      <hash>\($0)</hash>" }.joined(separator: "\n"))
                </pieces>
                <url location="de" priority="1">ftp://ftp.example.com/example.ext</url>
                <url location="fr" priority="1">http://example.com/example.ext</url>
                <url location="us" priority="2">https://mirror.example.org/pub/example.ext</url>
                <metaurl mediatype="torrent" priority="2">http://example.com/example.ext.torrent</metaurl>
              </file>
            """)
        let manifest = try manifest(xml)
        try manifest.validate()
        let output = manifest.outputs[0]
        #expect(output.assembly == .pieces)
        #expect(output.expectedSize == 14_471_447)
        #expect(output.checksum == (try Checksum(.sha256, hex: sha256("whole"))))
        #expect(output.segments.count == 56)
        let urls = [URL(string: "http://example.com/example.ext")!, URL(string: "https://mirror.example.org/pub/example.ext")!]
        #expect(output.segments[0] == DownloadSegment(
            urls: urls, range: ByteRange(offset: 0, length: 262_144), expectedSize: 262_144,
            checksum: try Checksum(.sha256, hex: pieceHashes[0]), offset: 0))
        #expect(output.segments[1].range == ByteRange(offset: 262_144, length: 262_144))
        #expect(output.segments[55] == DownloadSegment(
            urls: urls, range: ByteRange(offset: 14_417_920, length: 53_527), expectedSize: 53_527,
            checksum: try Checksum(.sha256, hex: pieceHashes[55]), offset: 14_417_920))
        for (index, segment) in output.segments.enumerated() {
            #expect(segment.checksum?.hexDigest == pieceHashes[index])
            #expect(segment.offset == Int64(index) * 262_144)
        }
        #expect(output.segments.reduce(0) { $0 + ($1.expectedSize ?? 0) } == 14_471_447)
        #expect(manifest.metadata["pieces"] == "56 × 262144 bytes, sha-256")
    }

    /// Lower priority first; none, or an invalid one, counts as 999999; ties keep document order.
    @Test func mirrorsAreOrderedByPriority() throws {
        let xml = meta4("""
              <file name="f">
                <url priority="3">http://c.example/f</url>
                <url>http://none.example/f</url>
                <url priority="1">http://a.example/f</url>
                <url priority="3">http://c2.example/f</url>
                <url priority="999999">http://last.example/f</url>
                <url priority="zero">http://bad.example/f</url>
                <url priority="0">http://zero.example/f</url>
                <url priority="2">https://b.example/f</url>
              </file>
            """)
        let file = try parse(xml).file(named: "f")
        #expect(file.mirrors.map(\.url.host) == [
            "a.example", "b.example", "c.example", "c2.example", "none.example", "last.example", "bad.example", "zero.example",
        ])
        #expect(file.mirrors.map(\.priority) == [1, 2, 3, 3, nil, 999_999, nil, nil])
        #expect(file.notes.filter { $0.contains("priority") }.count == 2)
        let manifest = try manifest(xml)
        #expect(manifest.outputs[0].segments[0].urls == file.mirrors.map(\.url))
    }

    /// A file with a flood of mirrors keeps the first ones in priority order.
    @Test func mirrorsAreCapped() throws {
        let urls = (0..<200).map { #"<url priority="\#(200 - $0)">http://m\#(200 - $0).example/f</url>"# }.joined()
        let file = try parse(meta4(#"<file name="f">\#(urls)</file>"#)).file(named: "f")
        #expect(file.mirrors.count == MetalinkDocument.maxMirrorsPerFile)
        #expect(file.mirrors.map(\.priority) == (1...MetalinkDocument.maxMirrorsPerFile).map { $0 })
        #expect(file.notes.contains { $0.contains("136 more <url> ignored") })
    }

    /// Relative references are resolved against the document's URL (after redirects), refined
    /// by `xml:base`.
    @Test func relativeURLsAreResolvedAgainstTheDocument() throws {
        let xml = """
            <?xml version="1.0"?>
            <metalink xmlns="urn:ietf:params:xml:ns:metalink">
              <file name="a">
                <url priority="1">a.bin</url>
                <url priority="2">../mirror/a.bin</url>
                <url priority="3">/root/a.bin</url>
                <url priority="4">//other.example.org/a.bin</url>
                <url priority="5">  https://abs.example.net/a.bin  </url>
              </file>
              <file name="b" xml:base="https://base.example.net/dir/">
                <url>sub/b.bin</url>
              </file>
            </metalink>
            """
        let document = try parse(xml, url: "https://cdn.example.com/releases/1.0/latest.meta4")
        #expect(try document.file(named: "a").mirrors.map(\.url.absoluteString) == [
            "https://cdn.example.com/releases/1.0/a.bin",
            "https://cdn.example.com/releases/mirror/a.bin",
            "https://cdn.example.com/root/a.bin",
            "https://other.example.org/a.bin",
            "https://abs.example.net/a.bin",
        ])
        #expect(try document.file(named: "b").mirrors.map(\.url.absoluteString) == ["https://base.example.net/dir/sub/b.bin"])

        let nested = """
            <metalink xmlns="urn:ietf:params:xml:ns:metalink" xml:base="http://root.example/pub/">
              <file name="c" xml:base="files/"><url>c.bin</url></file>
            </metalink>
            """
        #expect(try parse(nested).file(named: "c").mirrors.map(\.url.absoluteString) == ["http://root.example/pub/files/c.bin"])
    }

    /// The strongest known whole-file hash wins; unknown types are ignored; hex is case-insensitive.
    @Test func theStrongestHashIsTheChecksum() throws {
        let bytes = Array("content".utf8)
        let xml = meta4("""
              <file name="f">
                <hash type="md5">\(checksum(.md5, bytes).hexDigest)</hash>
                <hash type="sha-224">90a3ed9e32b2aaf4c61c410eb925426119e1a9dc53d4286ade99a809</hash>
                <hash type="SHA-512">\(checksum(.sha512, bytes).hexDigest.uppercased())</hash>
                <hash type="sha-1">\(checksum(.sha1, bytes).hexDigest)</hash>
                <hash type="sha-384">\(checksum(.sha384, bytes).hexDigest)</hash>
                <hash type="sha-256">\(checksum(.sha256, bytes).hexDigest)</hash>
                <url>http://example.com/f</url>
              </file>
            """)
        let file = try parse(xml).file(named: "f")
        #expect(file.hashes.map(\.algorithm) == [.md5, .sha512, .sha1, .sha384, .sha256])
        #expect(file.checksum == checksum(.sha512, bytes))
        #expect(file.notes.contains { $0.contains("sha-224") })
        #expect(try manifest(xml).outputs[0].checksum == checksum(.sha512, bytes))
        #expect(try manifest(xml).outputs[0].segments[0].checksum == checksum(.sha512, bytes))
    }

    /// Of several `<pieces>`, the strongest known type is used (its own length).
    @Test func theStrongestPiecesAreUsed() throws {
        let xml = meta4("""
              <file name="f">
                <size>3000</size>
                <pieces length="1024" type="sha-1">
                  <hash>\(checksum(.sha1, [1]).hexDigest)</hash>
                  <hash>\(checksum(.sha1, [2]).hexDigest)</hash>
                  <hash>\(checksum(.sha1, [3]).hexDigest)</hash>
                </pieces>
                <pieces length="2048" type="sha-256">
                  <hash>\(checksum(.sha256, [1]).hexDigest)</hash>
                  <hash>\(checksum(.sha256, [2]).hexDigest)</hash>
                </pieces>
                <pieces length="100" type="tiger">
                  <hash>00</hash>
                </pieces>
                <url>http://example.com/f</url>
              </file>
            """)
        let file = try parse(xml).file(named: "f")
        #expect(file.pieces?.algorithm == .sha256)
        #expect(file.pieces?.length == 2048)
        #expect(file.notes.contains { $0.contains("tiger") })
        let output = try manifest(xml).outputs[0]
        #expect(output.segments.map(\.range) == [ByteRange(offset: 0, length: 2048), ByteRange(offset: 2048, length: 952)])
        #expect(output.segments.map(\.checksum) == [checksum(.sha256, [1]), checksum(.sha256, [2])])
        #expect(output.checksum == nil)
    }

    /// Pieces spread over the mirrors of the best rank, as aria2c's do: piece i starts at the
    /// i-th of them; worse mirrors stay behind as fallbacks for every piece.
    @Test func piecesSpreadOverTheMirrorsOfTheBestPriority() throws {
        let hashes = (1...5).map { "<hash>\(sha256("\($0)"))</hash>" }.joined()
        let xml = meta4("""
              <file name="f"><size>5000</size>
                <pieces length="1000" type="sha-256">\(hashes)</pieces>
                <url priority="1">http://a.example/f</url>
                <url priority="2">http://c.example/f</url>
                <url priority="1">http://b.example/f</url>
              </file>
            """)
        let segments = try manifest(xml).outputs[0].segments
        #expect(segments.map { $0.urls.map { $0.host ?? "" } } == [
            ["a.example", "b.example", "c.example"], ["b.example", "a.example", "c.example"],
            ["a.example", "b.example", "c.example"], ["b.example", "a.example", "c.example"],
            ["a.example", "b.example", "c.example"],
        ])
        // One best mirror: every piece starts there.
        let single = xml.replacingOccurrences(of: #"<url priority="1">http://b.example/f</url>"#, with: "")
        #expect(try manifest(single).outputs[0].segments.allSatisfy { $0.urls.first?.host == "a.example" })
    }

    /// A size that is a whole number of pieces has no short last piece.
    @Test func aSizeOfWholePiecesHasNoShortPiece() throws {
        let xml = meta4("""
              <file name="f"><size>4096</size>
                <pieces length="2048" type="sha-256"><hash>\(sha256("1"))</hash><hash>\(sha256("2"))</hash></pieces>
                <url>http://example.com/f</url></file>
            """)
        #expect(try manifest(xml).outputs[0].segments.map(\.range) == [
            ByteRange(offset: 0, length: 2048), ByteRange(offset: 2048, length: 2048),
        ])
    }

    /// Without pieces: one segment, or, at and above the split policy's minimum size, ranges
    /// without checksums (the whole-file hash checks them).
    @Test func withoutPiecesLargeFilesAreSplit() throws {
        func xml(size: Int) -> String {
            meta4(#"<file name="big.iso"><size>\#(size)</size><hash type="sha-256">\#(sha256("big"))</hash><url>http://example.com/big.iso</url></file>"#)
        }
        let policy = SplitPolicy(minimumSize: 1000, pieceSize: 400)
        let split = try manifest(xml(size: 1000), splitting: policy).outputs[0]
        #expect(split.assembly == .pieces)
        #expect(split.segments.map(\.range) == [
            ByteRange(offset: 0, length: 400), ByteRange(offset: 400, length: 400), ByteRange(offset: 800, length: 200),
        ])
        #expect(split.segments.map(\.offset) == [0, 400, 800])
        #expect(split.segments.allSatisfy { $0.checksum == nil })
        #expect(split.checksum == (try Checksum(.sha256, hex: sha256("big"))))
        #expect(split.expectedSize == 1000)

        let whole = try manifest(xml(size: 999), splitting: policy).outputs[0]
        #expect(whole.assembly == .concatenated)
        #expect(whole.segments.count == 1)
        #expect(whole.segments[0].range == nil)
        #expect(whole.segments[0].expectedSize == 999)
    }

    /// Pieces need a size to be placed: without one the file is downloaded whole.
    @Test func piecesWithoutASizeAreIgnored() throws {
        let xml = meta4("""
              <file name="f">
                <hash type="sha-256">\(sha256("f"))</hash>
                <pieces length="1024" type="sha-256"><hash>\(sha256("1"))</hash></pieces>
                <url>http://example.com/f</url>
              </file>
            """)
        let file = try parse(xml).file(named: "f")
        #expect(file.notes.contains { $0.contains("no <size>") })
        let output = try manifest(xml).outputs[0]
        #expect(output.segments == [DownloadSegment(
            urls: [URL(string: "http://example.com/f")!], checksum: try Checksum(.sha256, hex: sha256("f")))])
        #expect(output.expectedSize == nil)
    }

    /// An empty file is one empty segment.
    @Test func anEmptyFileIsOneEmptySegment() throws {
        let xml = meta4("""
              <file name="empty"><size>0</size><hash type="sha-256">\(checksum(.sha256, []).hexDigest)</hash>
                <url>http://example.com/empty</url></file>
            """)
        let manifest = try manifest(xml, splitting: SplitPolicy(minimumSize: 0, pieceSize: 10))
        try manifest.validate()
        #expect(manifest.outputs[0].segments.count == 1)
        #expect(manifest.outputs[0].segments[0].expectedSize == 0)
        #expect(manifest.outputs[0].expectedSize == 0)
    }

    /// Sub-directories in names are kept (normalised); the entity's destination directory holds them.
    @Test func namesKeepTheirDirectories() throws {
        let xml = meta4("""
              <file name="dir/sub/file.bin"><url>http://example.com/1</url></file>
              <file name="./a//b.txt"><url>http://example.com/2</url></file>
            """)
        #expect(try manifest(xml, name: "dir/sub/file.bin").outputs[0].name == "dir/sub/file.bin")
        #expect(try manifest(xml, name: "./a//b.txt").outputs[0].name == "a/b.txt")
        let entity = MetalinkEntity(
            metalinkURL: URL(string: "https://example.com/x.meta4")!, fileName: "dir/sub/file.bin", destinationDirectory: "isos")
        #expect(entity.destinationDirectory == "isos")
        #expect(entity.title == "dir/sub/file.bin")
    }

    /// Several files: listed in document order, each read on its own.
    @Test func severalFilesAreListedInOrder() throws {
        let xml = meta4("""
              <file name="one"><size>1</size><url>http://example.com/1</url></file>
              <file name="two"><size>2</size><url>http://example.com/2</url></file>
              <file name="one"><size>3</size><url>http://example.com/3</url></file>
              <file name="three"><size>3</size><url>http://example.com/3</url></file>
            """)
        let document = try parse(xml)
        #expect(document.entries.map(\.name) == ["one", "two", "one", "three"])
        #expect(try document.file(named: "two").size == 2)
        #expect(try document.file(named: "one").size == 1, "the first of two files with one name")
        #expect(try document.file(at: 2).size == 3)
    }

    /// Metalink 3.0 (metalinker.org): <files>, <verification>, <resources>, `preference` (higher
    /// first), `type` (only http and https), numbered piece hashes.
    @Test func readsMetalink3() throws {
        let bytes = Array("v3".utf8)
        let xml = """
            <?xml version="1.0" encoding="UTF-8"?>
            <metalink version="3.0" xmlns="http://www.metalinker.org/" type="static" generator="Metalink Editor/2.0">
              <publisher><name>Example</name><url>http://www.example.com</url></publisher>
              <files>
                <file name="example.ext">
                  <version>1.0</version>
                  <language>en-US</language>
                  <os>Linux-x86</os>
                  <size>600000</size>
                  <verification>
                    <hash type="md5">\(checksum(.md5, bytes).hexDigest)</hash>
                    <hash type="sha1">\(checksum(.sha1, bytes).hexDigest)</hash>
                    <hash type="sha256">\(checksum(.sha256, bytes).hexDigest)</hash>
                    <pieces length="262144" type="sha1">
                      <hash piece="2">\(checksum(.sha1, [2]).hexDigest)</hash>
                      <hash piece="0">\(checksum(.sha1, [0]).hexDigest)</hash>
                      <hash piece="1">\(checksum(.sha1, [1]).hexDigest)</hash>
                    </pieces>
                    <signature type="pgp" file="example.ext.asc">-----BEGIN PGP SIGNATURE-----</signature>
                  </verification>
                  <resources maxconnections="1">
                    <url type="ftp" location="us" preference="90">ftp://ftp.example.com/example.ext</url>
                    <url type="http" location="us" preference="90">http://www.example.com/example.ext</url>
                    <url type="http" location="de" preference="100">http://www.example.de/example.ext</url>
                    <url type="bittorrent" preference="100">http://www.example.com/example.ext.torrent</url>
                    <url>http://nopref.example.com/example.ext</url>
                    <url type="https" preference="95">https://secure.example.com/example.ext</url>
                  </resources>
                </file>
              </files>
            </metalink>
            """
        let document = try parse(xml, url: "http://www.example.com/example.metalink")
        #expect(document.version == .v3)
        let file = try document.file(named: "example.ext")
        #expect(file.mirrors.map(\.url.absoluteString) == [
            "http://www.example.de/example.ext", "https://secure.example.com/example.ext",
            "http://www.example.com/example.ext", "http://nopref.example.com/example.ext",
        ])
        #expect(file.mirrors.map(\.preference) == [100, 95, 90, nil])
        #expect(file.mirrors.map(\.location) == ["de", nil, "us", nil])
        #expect(file.skippedMirrors.count == 2)
        #expect(file.checksum == checksum(.sha256, bytes))
        #expect(file.pieces?.algorithm == .sha1)
        #expect(file.pieces?.hashes == [checksum(.sha1, [0]), checksum(.sha1, [1]), checksum(.sha1, [2])])
        #expect(file.metadata["os"] == "Linux-x86")
        let manifest = try MetalinkEntity.manifest(for: file, in: document)
        try manifest.validate()
        #expect(manifest.metadata["metalink"] == "3.0")
        #expect(manifest.outputs[0].segments.map(\.range) == [
            ByteRange(offset: 0, length: 262_144), ByteRange(offset: 262_144, length: 262_144),
            ByteRange(offset: 524_288, length: 75_712),
        ])
        #expect(manifest.outputs[0].segments.map(\.checksum) == [checksum(.sha1, [0]), checksum(.sha1, [1]), checksum(.sha1, [2])])
    }

    /// Metalink 3 piece hashes without numbers are in document order.
    @Test func metalink3PiecesWithoutNumbersKeepTheirOrder() throws {
        let xml = """
            <metalink version="3.0" xmlns="http://www.metalinker.org/"><files><file name="f"><size>3</size>
              <verification><pieces length="2" type="sha1"><hash>\(checksum(.sha1, [7]).hexDigest)</hash><hash>\(checksum(.sha1, [8]).hexDigest)</hash></pieces></verification>
              <resources><url type="http">http://example.com/f</url></resources></file></files></metalink>
            """
        #expect(try parse(xml).file(named: "f").pieces?.hashes == [checksum(.sha1, [7]), checksum(.sha1, [8])])
    }

    /// `metalink:location=…` moves mirrors in those countries first, keeping the order otherwise.
    @Test func preferredLocationsComeFirst() throws {
        let xml = meta4("""
              <file name="f">
                <url location="de" priority="1">http://de.example/f</url>
                <url location="FR" priority="2">http://fr.example/f</url>
                <url priority="3">http://none.example/f</url>
                <url location="us" priority="4">http://us.example/f</url>
              </file>
            """)
        #expect(try manifest(xml, preferredLocations: ["us", "fr"]).outputs[0].segments[0].urls.map(\.host) == [
            "fr.example", "us.example", "de.example", "none.example",
        ])
        #expect(try manifest(xml).outputs[0].segments[0].urls.map(\.host) == [
            "de.example", "fr.example", "none.example", "us.example",
        ])
    }

    /// Unknown elements and attributes, and elements in other namespaces, are ignored.
    @Test func unknownElementsAndAttributesAreIgnored() throws {
        let xml = """
            <metalink xmlns="urn:ietf:params:xml:ns:metalink" xmlns:x="urn:example:extension" future="yes">
              <x:notice>ignored</x:notice>
              <file name="f" x:colour="blue" flavour="mint">
                <x:mirrors><url>http://foreign.example/f</url></x:mirrors>
                <size unit="bytes">10</size>
                <signature mediatype="application/pgp-signature">-----BEGIN PGP SIGNATURE-----</signature>
                <url priority="1" type="ftp" x:weight="2">http://a.example/f</url>
                <copyright>none</copyright>
                <origin dynamic="true">http://example.com/f.meta4</origin>
                <something-new><url>http://nested.example/f</url></something-new>
              </file>
            </metalink>
            """
        let file = try parse(xml).file(named: "f")
        #expect(file.size == 10)
        #expect(file.mirrors.map(\.url.absoluteString) == ["http://a.example/f"])
        #expect(file.skippedMirrors.isEmpty)
    }

    /// Entity keys are `<metalink URL>|<file name>` (fragment dropped; `%`, `#` and control
    /// characters escaped), the group is the Metalink URL, and the record rebuilds the entity.
    @Test func entityIdentityAndRecord() throws {
        let entity = MetalinkEntity(
            metalinkURL: URL(string: "https://example.com/r/release.meta4?sig=1#top")!, fileName: "dir/a#1%.bin",
            preferredLocations: ["de"], destinationDirectory: "out")
        #expect(MetalinkEntity.entityType == "metalink")
        #expect(entity.entityKey == "https://example.com/r/release.meta4?sig=1|dir/a%231%25.bin")
        #expect(entity.aggregationKey == "https://example.com/r/release.meta4?sig=1")
        #expect(entity.variantKey == "")
        #expect(entity.payload.metalinkURL.absoluteString == "https://example.com/r/release.meta4?sig=1")
        #expect(entity.payload.fileName == "dir/a#1%.bin")
        #expect(DownloadTaskID(entity.taskID.description) == entity.taskID)
        let control = MetalinkEntity(metalinkURL: URL(string: "https://example.com/a.meta4")!, fileName: "a\u{1}b")
        #expect(control.entityKey == "https://example.com/a.meta4|a%01b")
        #expect(control.title == "a?b")

        let registry = EntityRegistry()
        MetalinkEntity.register(in: registry)
        let rebuilt = try #require(try registry.rebuild(entity.record()) as? MetalinkEntity)
        #expect(rebuilt.payload == entity.payload)
        #expect(rebuilt.taskID == entity.taskID)
        #expect(rebuilt.aggregationKey == entity.aggregationKey)
        #expect(rebuilt.destinationDirectory == "out")
    }

    /// `.meta4` and `.metalink` URLs (any case, with a query) and Metalink content types match;
    /// other URLs fall through to the plain-file plugin; `makeEntity` explains it cannot fetch.
    @Test func matchers() throws {
        let registry = EntityRegistry()
        MetalinkEntity.register(in: registry)
        func plugin(_ text: String, contentType: String? = nil) -> String? {
            registry.match(EntityInput(text, contentType: contentType))?.matcher.plugin
        }
        #expect(plugin("https://example.com/release.meta4") == "metalink")
        #expect(plugin("http://example.com/dir/Release.META4?token=abc") == "metalink")
        #expect(plugin("https://example.com/old.metalink") == "metalink")
        #expect(plugin("https://example.com/old.metalink#frag") == "metalink")
        #expect(plugin("https://example.com/release.meta4.sig") == "direct")
        #expect(plugin("https://example.com/download?file=a.meta4") == "direct")
        #expect(plugin("https://example.com/release.xml") == "direct")
        #expect(plugin("ftp://example.com/release.meta4") == nil)
        #expect(plugin("https://example.com/get?id=3", contentType: "application/metalink4+xml; charset=utf-8") == "metalink")
        #expect(plugin("https://example.com/get?id=3", contentType: "application/metalink+xml") == "metalink")
        #expect(plugin("https://example.com/get?id=3", contentType: "application/xml") == "direct")
        #expect(MetalinkEntity.matchers.count == 1)

        let error = downloadError { _ = try registry.makeEntity(for: EntityInput("https://example.com/release.meta4")) }
        #expect(error?.code == .invalidRequest)
        #expect(error?.message.contains("makeEntities") == true)
    }
}
