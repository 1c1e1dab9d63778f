import Foundation
import MetalinkEntity
import Tessera
import TesseraTestSupport
import TesseraTesting
import Testing

/// ``MetalinkStreamReader`` reads every document as ``MetalinkDocument`` does: the same files
/// (names, sizes, hashes, pieces, mirrors, notes, metadata, lines) and the same errors (codes,
/// messages, URLs). Every document the other suites parse is checked too (`parse` in
/// Support.swift reads it both ways); here, the fuzz corpus, the fixture, generated documents,
/// and every prefix of a few documents (each a different malformed input).
@Suite struct MetalinkStreamEquivalenceTests {
    /// Tests/Fuzz/Corpus/metalink, from this file's place.
    static let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fuzz/Corpus/metalink")
    static let url = URL(string: "https://example.com/releases/1.0/example.meta4")!

    static func corpusFiles() throws -> [URL] {
        try FileManager.default.contentsOfDirectory(at: corpus, includingPropertiesForKeys: nil).sorted { $0.path < $1.path }
    }

    @Test func theFuzzCorpusReadsAlike() throws {
        let files = try Self.corpusFiles()
        #expect(files.count >= 6)
        for file in files {
            let data = try Data(contentsOf: file)
            // With the fuzzing harness's limits, and with the defaults.
            let url = URL(string: "http://127.0.0.1:8080/fuzz/dir/input?x=1")!
            expectStreamReadsLikeTree(data, url: url, maxFiles: 1_000, maxPieces: 20_000)
            expectStreamReadsLikeTree(data, url: Self.url)
            // Tight limits: files and pieces over them.
            expectStreamReadsLikeTree(data, url: Self.url, maxFiles: 1, maxPieces: 2)
            #expect(MetalinkReading.stream(data, url: Self.url).failure == nil, "\(file.lastPathComponent)")
        }
    }

    @Test func theFixtureReadsAlike() async throws {
        try await withLoopbackOrigin { origin in
            let fixture = MetalinkFixture.install(on: origin)
            let data = Data(fixture.document.utf8)
            expectStreamReadsLikeTree(data, url: fixture.metalinkURL)
            let reading = MetalinkReading.stream(data, url: fixture.metalinkURL)
            #expect(reading.entries.map(\.name) == fixture.expectedFiles)
        }
    }

    /// Every prefix of a document is a truncated, malformed document: refused alike, with
    /// libxml2's same line, column and words; every file listed before the cut is irrelevant.
    @Test func everyTruncationIsRefusedAlike() throws {
        let v4 = meta4("""
              <file name="a.bin" xml:base="sub/">
                <size>3</size><hash type="sha-256">\(sha256("a"))</hash>
                <url priority="2" location="de">a.bin</url><url priority="1"><![CDATA[http://x.example/a?b=1&c=2]]></url>
              </file>
              <file name="b.bin"><url>http://b.example/b.bin</url></file>
            """)
        let v3 = try String(contentsOf: Self.corpus.appendingPathComponent("legacy-v3.metalink"), encoding: .utf8)
        for document in [v4, v3] {
            let bytes = Array(document.utf8)
            for length in stride(from: 1, to: bytes.count, by: 1) {
                let data = Data(bytes[..<length])
                let tree = MetalinkReading.tree(data, url: Self.url)
                let stream = MetalinkReading.stream(data, url: Self.url)
                #expect(stream == tree, "cut at \(length) of \(bytes.count)")
            }
        }
    }

    /// What is wrong with the document as a whole is found after files that read well: the
    /// stream gives those files, then the document's error, which is the tree's.
    @Test func aDocumentErrorAfterGoodFilesIsTheTreesError() throws {
        let good = #"<file name="ok"><size>1</size><url>http://example.com/ok</url></file>"#
        for xml in [
            meta4(good + "\n<file><url>http://example.com/x</url></file>"),  // no name
            meta4(good + good.replacingOccurrences(of: "\"ok\"", with: "\"ok2\"") + "<file name=\"ok3\"/>"),  // over maxFiles
            meta4(good + "\n<file name=\"b\"><size>1</file>"),  // malformed
            meta4(good + "\n<file name=\"b\">&undeclared;</file>"),
            meta4(good + "\n<file name=\"b\"><x:size/></file>"),  // an undeclared prefix
            meta4(good) + "<extra/>",
            meta4(good).replacingOccurrences(of: "<metalink ", with: "<feed ").replacingOccurrences(of: "</metalink>", with: "</feed>"),
            meta4(good).replacingOccurrences(of: "</metalink>", with: "</metalink") ,
        ] {
            let data = Data(xml.utf8)
            expectStreamReadsLikeTree(data, url: Self.url, maxFiles: 2)
            #expect(MetalinkReading.tree(data, url: Self.url, maxFiles: 2).failure != nil, "\(xml)")
            let reader = try MetalinkStreamReader(data: data, url: Self.url, maxFiles: 2)
            let error = downloadError { while try reader.next() != nil {} }
            // The error stays.
            #expect(downloadError { _ = try reader.next() }?.message == error?.message)
        }
    }

    /// A resolve reads up to its file: what follows is not read (past the few hundred bytes
    /// libxml2 reads ahead), so a document broken after the file still gives it (the tree, which
    /// reads everything, refuses the document).
    @Test func aFileIsReadUpToItsEnd() throws {
        let xml = meta4("""
              <file name="a"><size>1</size><url>http://example.com/a</url></file>
              <file name="b"><size>2</size><url>http://example.com/b</url></file>
              <!-- \(String(repeating: "-.", count: 4096)) -->
              <file><url>http://example.com/nameless</url></file>
              <file name="c"><size>1</size></fil>
            """)
        let data = Data(xml.utf8)
        #expect(MetalinkReading.tree(data, url: Self.url).failure?.code == .manifestInvalid)
        let file = try MetalinkStreamReader(data: data, url: Self.url).file(named: "b")
        #expect(file.size == 2)
        #expect(file.line == 4)
        // A file after the break, or none: the document's error.
        let after = downloadError { _ = try MetalinkStreamReader(data: data, url: Self.url).file(named: "c") }
        #expect(after?.message == MetalinkReading.tree(data, url: Self.url).failure?.message)
        let valid = Data(meta4(#"<file name="a"><url>http://example.com/a</url></file>"#).utf8)
        let missing = downloadError { _ = try MetalinkStreamReader(data: valid, url: Self.url).file(named: "zz") }
        #expect(missing?.message == "the Metalink at \(Self.url.absoluteString) no longer lists a file named \"zz\"")
        // A nameless file before it is the document's error, as in the tree.
        let nameless = Data(meta4("<file><url>http://example.com/x</url></file>\n" + #"<file name="a"><url>http://example.com/a</url></file>"#).utf8)
        let error = downloadError { _ = try MetalinkStreamReader(data: nameless, url: Self.url).file(named: "a") }
        #expect(error?.message == MetalinkReading.tree(nameless, url: Self.url).failure?.message)
        #expect(error?.message.contains("<file> element at line 3 has no name") == true)
        // The file itself broken: its own error.
        let broken = Data(meta4(#"<file name="a"><size>x</size></file>"#).utf8)
        let own = downloadError { _ = try MetalinkStreamReader(data: broken, url: Self.url).file(named: "a") }
        #expect(own?.message.contains("the <size> at line 3 is not a number of bytes") == true)
    }

    /// Piece hashes over the limit are counted, not kept: the file is refused as the tree refuses it.
    @Test func piecesOverTheLimitAreCountedNotKept() throws {
        let hashes = (0..<50).map { "<hash>\(sha256("\($0)"))</hash>" }.joined()
        for size in ["", "<size>100</size>", "<size>98</size>"] {
            let xml = meta4(#"<file name="f">\#(size)<pieces length="2" type="sha-256">\#(hashes)</pieces><url>http://e.example/f</url></file>"#)
            for limit in [1, 49, 50, 51] {
                expectStreamReadsLikeTree(Data(xml.utf8), url: Self.url, maxPieces: limit)
            }
        }
    }

    /// Generated documents of every shape the reader knows, with namespaces and prefixes, nested
    /// unknown elements, `xml:base` at every level, CDATA, comments and whitespace in text.
    @Test func generatedDocumentsReadAlike() throws {
        var files: [String] = []
        for index in 0..<300 {
            let base = index.isMultiple(of: 7) ? #" xml:base="d\#(index)/""# : ""
            let hash = index.isMultiple(of: 5) ? "<hash>\(sha256("\(index)"))</hash>" : #"<hash type="sha-256">\#(sha256("\(index)"))</hash>"#
            let pieces = index.isMultiple(of: 3)
                ? #"<pieces length="2" type="sha-1"><hash>\#(checksum(.sha1, [UInt8(index % 256)]).hexDigest)</hash><!-- c --><hash>\#(checksum(.sha1, [1]).hexDigest)</hash></pieces>"#
                : ""
            let size = index.isMultiple(of: 4) ? "<size> 4 <!-- c --></size>" : "<size>\(index)</size>"
            files.append("""
                  <file name="dir/f\(index).bin"\(base)>
                    \(size)\(hash)\(pieces)
                    <url priority="\(index % 4)" location=" De ">m\(index).bin</url>
                    <m:url xmlns:m="urn:ietf:params:xml:ns:metalink" priority="1">http://e.example/<x:b xmlns:x="urn:x">f</x:b>\(index)</m:url>
                    <url priority="3"><![CDATA[ftp://e.example/f]]></url>
                    <x:unknown xmlns:x="urn:x"><url>http://no.example/f</url></x:unknown>
                    <description>  line one
                line two <b>bold</b> </description>
                    <metaurl mediatype="torrent">http://e.example/f.torrent</metaurl>
                  </file>
                """)
        }
        let xml = """
            <?xml version="1.0" encoding="UTF-8"?>
            <!-- a comment -->
            <ml:metalink xmlns:ml="urn:ietf:params:xml:ns:metalink" xml:base="http://root.example/pub/">
            \(files.joined(separator: "\n").replacingOccurrences(of: "<", with: "<ml:").replacingOccurrences(of: "<ml:/", with: "</ml:").replacingOccurrences(of: "<ml:!", with: "<!").replacingOccurrences(of: "<ml:m:", with: "<m:").replacingOccurrences(of: "</ml:m:", with: "</m:").replacingOccurrences(of: "<ml:x:", with: "<x:").replacingOccurrences(of: "</ml:x:", with: "</x:"))
            </ml:metalink>
            """
        let data = Data(xml.utf8)
        expectStreamReadsLikeTree(data, url: Self.url)
        let reading = MetalinkReading.stream(data, url: Self.url)
        #expect(reading.failure == nil, "\(reading.failure.map(\.description) ?? "")")
        #expect(reading.entries.count == 300)
        guard reading.files.count == 300, case .read(let second) = reading.files[1] else {
            Issue.record("the second file was not read: \(reading)")
            return
        }
        #expect(second.mirrors.map(\.url.absoluteString) == ["http://root.example/pub/m1.bin", "http://e.example/f1"])
        #expect(second.skippedMirrors.count == 1)
        #expect(second.metadata["description"]?.hasPrefix("line one\n") == true)
        #expect(second.metadata["description"]?.hasSuffix("line two bold") == true)
        // Some files are broken (a <hash> without a type, pieces that do not match the size): each alone.
        let failures = reading.files.compactMap { if case .failed(let failure) = $0 { failure } else { nil } }
        #expect(failures.count > 60)
        #expect(failures.allSatisfy { $0.code == .manifestInvalid && $0.message.hasPrefix("the file \"dir/f") })
    }

    /// Past line 65535 libxml2 keeps no line for an element: both readers take it from the text
    /// that follows (`SafeXMLElement.line`), which the stream may not have read yet when the
    /// element starts (then it says 65535, as the tree does when no text follows). Everything
    /// else reads alike.
    @Test func linesPast65535AreTakenFromNearbyText() throws {
        let padding = String(repeating: "\n", count: 65_600)
        var files: [String] = []
        for index in 0..<200 {
            switch index % 4 {
            case 0: files.append(#"<file name="a\#(index)"><size>1</size><url>http://e.example/\#(index)</url></file>"#)
            case 1: files.append("<file name=\"a\(index)\">\n  <url priority=\"x\">http://e.example/\(index)</url>\n  <hash>00</hash></file>")
            case 2: files.append(#"<file name="a\#(index)"><!-- c --><hash type="md5">zz</hash></file><!-- c -->"#)
            default: files.append(#"<file name="a\#(index)"/>"#)
            }
        }
        let data = Data(meta4(padding + files.joined(separator: "\n")).utf8)
        let tree = MetalinkReading.tree(data, url: Self.url)
        let stream = MetalinkReading.stream(data, url: Self.url)
        #expect(stream.entries.count == 200)
        #expect(stream.entries.first?.line == 65_603)
        for (streamed, read) in zip(stream.entries, tree.entries) {
            #expect(streamed.name == read.name)
            #expect(streamed.line == read.line || streamed.line == 65_535, "\(streamed) \(read)")
        }
        // With the lines set aside, the files are the same.
        func withoutLines(_ reading: MetalinkReading) -> [String] {
            reading.files.map { "\($0)".replacingOccurrences(of: #"line:? \d+"#, with: "line", options: .regularExpression) }
        }
        #expect(withoutLines(stream) == withoutLines(tree))
        #expect(stream.files.count == 200)
    }

    /// The XML layer's refusals are the tree's, word for word.
    @Test func unsafeAndOverLimitDocumentsAreRefusedAlike() throws {
        let good = #"<file name="f"><url>http://example.com/f</url></file>"#
        for xml in [
            "<!DOCTYPE metalink [<!ENTITY e \"x\">]>\n" + meta4(good),
            "<?xml version=\"1.0\"?>\n<!DOCTYPE metalink SYSTEM \"http://127.0.0.1:9/x.dtd\">\n" + meta4(good),
            meta4(#"<file name="f"><xi:include xmlns:xi="http://www.w3.org/2001/XInclude" href="x"/></file>"#),
            meta4(String(repeating: "<a>", count: 300) + String(repeating: "</a>", count: 300)),
        ] {
            expectStreamReadsLikeTree(Data(xml.utf8), url: Self.url)
        }
        expectStreamReadsLikeTree(Data(meta4(good).utf8), url: Self.url, maxFiles: 0)
    }
}
