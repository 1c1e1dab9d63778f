import Foundation
import Testing

@testable import Tessera

@Suite struct XMLStreamReaderTests {
    /// All nodes of `xml`, as compact strings: `+name@depth`, `-name@depth`, `"text"@depth`.
    func events(_ xml: String, reportsWhitespace: Bool = false) throws -> [String] {
        let reader = try XMLStreamReader(data: Data(xml.utf8), reportsWhitespace: reportsWhitespace)
        var events: [String] = []
        while let node = try reader.next() {
            switch node.kind {
            case .startElement: events.append("+\(node.name)@\(node.depth)\(node.isEmptyElement ? "/" : "")")
            case .endElement: events.append("-\(node.name)@\(node.depth)")
            case .text: events.append("\"\(node.text ?? "")\"@\(node.depth)")
            }
        }
        return events
    }

    @Test func streamsTheLegacyPlayurlAnswer() throws {
        #expect(try events(ManifestFixtures.playurl) == [
            "+video@0", "+result@1", "\"suee\"@2", "-result@1",
            "+durl@1", "+order@2", "\"1\"@3", "-order@2",
            "+url@2", "\"http://a/b?x=1&y=2\"@3", "-url@2",
            "+backup_url@2", "+url@3", "\"http://m/b\"@4", "-url@3", "-backup_url@2",
            "-durl@1", "-video@0",
        ])
    }

    @Test func collectsURLsFromAStream() throws {
        // The way a plugin reads a huge answer: track the element, take its text.
        let reader = try XMLStreamReader(data: Data(ManifestFixtures.playurl.utf8))
        var path: [String] = []
        var urls: [String] = []
        while let node = try reader.next() {
            switch node.kind {
            case .startElement where !node.isEmptyElement: path.append(node.name)
            case .startElement: break
            case .endElement: path.removeLast()
            case .text where path.last == "url": urls.append(node.text ?? "")
            case .text: break
            }
        }
        #expect(urls == ["http://a/b?x=1&y=2", "http://m/b"])
        #expect(path.isEmpty)
    }

    @Test func reportsNamespacesAttributesAndEmptyElements() throws {
        let reader = try XMLStreamReader(data: Data(ManifestFixtures.mpd.utf8))
        var starts: [XMLStreamReader.Node] = []
        var ends = 0
        while let node = try reader.next() {
            if node.kind == .startElement { starts.append(node) }
            if node.kind == .endElement { ends += 1 }
        }
        let mpd = try #require(starts.first)
        #expect(mpd.name == "MPD")
        #expect(mpd.namespaceURI == ManifestFixtures.dashNamespace)
        #expect(mpd.depth == 0)
        #expect(mpd.line == 2)
        #expect(mpd.text == nil)
        // Namespace declarations are not attributes.
        #expect(mpd.attributes == [
            "type": "static", "mediaPresentationDuration": "PT634.566S", "minBufferTime": "PT2S",
            "profiles": "urn:mpeg:dash:profile:isoff-live:2011",
        ])
        let template = try #require(starts.first { $0.name == "SegmentTemplate" })
        #expect(template.isEmptyElement)
        #expect(template.depth == 3)
        #expect(template.attributes["media"] == "$RepresentationID$/seg-$Number%05d$.m4s")
        let representations = starts.filter { $0.name == "Representation" }
        #expect(representations.map { $0.attributes["id"] } == ["v1080", "v720", "a128"])
        #expect(representations.allSatisfy { $0.namespaceURI == ManifestFixtures.dashNamespace && $0.isEmptyElement })
        let remote = try #require(starts.last { $0.name == "AdaptationSet" })
        #expect(remote.attributes == ["xlink:href": "https://ads.example.com/period.xml", "xlink:actuate": "onLoad"])
        // Empty elements have no end event.
        #expect(ends == starts.filter { !$0.isEmptyElement }.count)
    }

    @Test func prefixedNamesComeWithoutThePrefix() throws {
        let reader = try XMLStreamReader(data: Data(ManifestFixtures.prefixedMPD.utf8))
        let first = try #require(try reader.next())
        #expect(first.name == "MPD")
        #expect(first.namespaceURI == ManifestFixtures.dashNamespace)
        #expect(first.attributes == ["type": "dynamic"])
        // The prefix is there for messages, as SafeXMLElement has it.
        #expect(first.prefix == "dash")
        #expect(try reader.next()?.prefix == "dash")
        let unprefixed = try XMLStreamReader(data: Data(ManifestFixtures.mpd.utf8))
        #expect(try unprefixed.next()?.prefix == nil)
    }

    /// `xml:base` and `xml:lang` are keyed with the `xml` prefix, which always means the XML namespace.
    @Test func xmlAttributesAreKeyedWithTheirPrefix() throws {
        let reader = try XMLStreamReader(data: Data(#"<a xmlns="urn:x" xml:base="http://h/d/" xml:lang="de" b="1"/>"#.utf8))
        #expect(try reader.next()?.attributes == ["xml:base": "http://h/d/", "xml:lang": "de", "b": "1"])
    }

    /// With `reportsWhitespace`, whitespace-only text comes too, so an element's text read from
    /// the stream is SafeXMLElement's `text`, whitespace included.
    @Test func whitespaceIsReportedWhenAskedFor() throws {
        let xml = "<a>\n  <b>x</b>\n  <c> </c><d/>\t</a>"
        #expect(try events(xml) == ["+a@0", "+b@1", "\"x\"@2", "-b@1", "+c@1", "-c@1", "+d@1/", "-a@0"])
        #expect(try events(xml, reportsWhitespace: true) == [
            "+a@0", "\"\n  \"@1", "+b@1", "\"x\"@2", "-b@1", "\"\n  \"@1", "+c@1", "\" \"@2", "-c@1", "+d@1/", "\"\t\"@1", "-a@0",
        ])
        for xml in [
            "<u>http://a<!-- c -->  <!-- d -->b</u>",
            "<u> a <x> <y/> </x> b <![CDATA[ ]]> c </u>",
            "<u xml:space=\"preserve\"> <v> </v> </u>",
            "<u>\n\n</u>",
        ] {
            let reader = try XMLStreamReader(data: Data(xml.utf8), reportsWhitespace: true)
            var text = ""
            while let node = try reader.next() { text += node.text ?? "" }
            #expect(text == (try SafeXMLDocument.parse(xml)).root.text, "\(xml)")
        }
    }

    @Test func textAndCDATAButNotWhitespaceCommentsOrInstructions() throws {
        #expect(try events("<a>\n  <b>x</b>\n  <!-- c --><?pi d?>\n  <c><![CDATA[<y> & z]]></c>\n  <d>1<![CDATA[2]]>3</d>\n</a>") == [
            "+a@0", "+b@1", "\"x\"@2", "-b@1", "+c@1", "\"<y> & z\"@2", "-c@1", "+d@1", "\"123\"@2", "-d@1", "-a@0",
        ])
        #expect(try events("<a> x </a>") == ["+a@0", "\" x \"@1", "-a@0"])
    }

    @Test func encodingsAsInTheTreeParser() throws {
        let text = "<?xml version=\"1.0\" encoding=\"UTF-16\"?><t>哔哩 café</t>"
        let reader = try XMLStreamReader(data: Data([0xFF, 0xFE]) + text.data(using: .utf16LittleEndian)!)
        _ = try reader.next()
        #expect(try reader.next()?.text == "哔哩 café")
        var latin1 = Data("<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><t>caf".utf8)
        latin1 += Data([0xE9]) + Data("</t>".utf8)
        let latin = try XMLStreamReader(data: latin1)
        _ = try latin.next()
        #expect(try latin.next()?.text == "café")
    }

    @Test func malformedInputFailsWithLineAndColumnAndStaysFailed() throws {
        let reader = try XMLStreamReader(data: Data("<MPD>\n<Period>\n</MPD>".utf8))
        let error = #expect(throws: DownloadError.self) { while try reader.next() != nil {} }
        #expect(error?.code == .manifestInvalid)
        #expect(error?.message == "the XML is malformed at line 3, column 7: Opening and ending tag mismatch: Period line 2 and MPD")
        let again = #expect(throws: DownloadError.self) { try reader.next() }
        #expect(again?.message == error?.message)

        for (xml, start) in [
            ("not XML", "the XML is malformed at line 1, column 1: "),
            ("<a><b>", "the XML is malformed at line 1"),
            ("<a>\u{1}</a>", "the XML is malformed at line 1, column 4: PCDATA invalid Char value 1"),
            ("<a><x:b/></a>", "the XML is malformed at line 1, column 8: Namespace prefix x on b is not defined"),
        ] {
            let error = #expect(throws: DownloadError.self) {
                let reader = try XMLStreamReader(data: Data(xml.utf8))
                while try reader.next() != nil {}
            }
            #expect(error?.code == .manifestInvalid)
            #expect(error?.message.hasPrefix(start) == true, "\(xml): \(error?.message ?? "")")
        }
        let invalidUTF8 = #expect(throws: DownloadError.self) {
            let reader = try XMLStreamReader(data: Data("<a>".utf8) + Data([0xC3, 0x28]) + Data("</a>".utf8))
            while try reader.next() != nil {}
        }
        #expect(invalidUTF8?.message.contains("Input is not proper UTF-8") == true)
    }

    /// A malformed document is refused in the tree parser's words, whichever way it is read
    /// (libxml2 reading a stream would say "Extra content at the end of the document" of a
    /// truncated one), and read no further than where the tree parser stops.
    @Test func malformedInputIsWordedAsTheTreeParserWordsIt() throws {
        let mpd = ManifestFixtures.mpd
        for xml in [
            "<", "<?xml version=\"1.0\"?>", "<MPD>\n<Period>", String(mpd.prefix(mpd.count / 2)), String(mpd.dropLast(2)),
            "<a><!-- x -- y --></a>", "<a>\u{1}</a>", "<a><x:b/></a>", "<a b='1' b='2'/>", "<a/><b/>", "text",
            String(repeating: "<a>", count: 300),
        ] {
            let tree = #expect(throws: DownloadError.self) { try SafeXMLDocument.parse(Data(xml.utf8)) }
            let stream = #expect(throws: DownloadError.self) {
                let reader = try XMLStreamReader(data: Data(xml.utf8))
                while try reader.next() != nil {}
            }
            #expect(stream?.code == tree?.code, "\(xml)")
            #expect(stream?.message == tree?.message, "\(xml)")
        }
    }

    @Test func emptyInputIsRefusedAtOnce() throws {
        let error = #expect(throws: DownloadError.self) { try XMLStreamReader(data: Data()) }
        #expect(error?.code == .manifestInvalid)
        #expect(error?.message == "the XML is malformed at line 1, column 1: the document is empty (0 bytes)")
    }

    @Test func theEndIsNilForever() throws {
        let reader = try XMLStreamReader(data: Data("<a/>".utf8))
        #expect(try reader.next()?.isEmptyElement == true)
        #expect(try reader.next() == nil)
        #expect(try reader.next() == nil)
    }

    @Test func aLargeDocumentStreamsInConstantMemory() throws {
        // Piece hashes: 600,000 (about 12 MB; about 250 MB as a tree) when memory is checked,
        // 200,000 otherwise, to stay light next to other suites.
        let count = ManifestFixtures.checksMemory ? 600_000 : 200_000
        var data = Data("<?xml version=\"1.0\"?>\n<metalink xmlns=\"urn:ietf:params:xml:ns:metalink\"><file name=\"big.iso\"><pieces length=\"262144\" type=\"sha-256\">\n".utf8)
        data.reserveCapacity(count * 20 + 200)
        for index in 0..<count { data.append(contentsOf: "<hash>\(index)</hash>\n".utf8) }
        data.append(contentsOf: "</pieces></file></metalink>".utf8)
        let before = residentMemory()
        let start = ContinuousClock.now
        let reader = try XMLStreamReader(data: data)
        var hashes = 0
        var last = ""
        var inHash = false
        var peak = before
        while let node = try reader.next() {
            switch node.kind {
            case .startElement: inHash = node.name == "hash"
            case .text where inHash:
                hashes += 1
                last = node.text ?? ""
                if hashes.isMultiple(of: 50_000) { peak = max(peak, residentMemory()) }
            default: inHash = false
            }
        }
        let elapsed = ContinuousClock.now - start
        #expect(hashes == count)
        #expect(last == "\(count - 1)")
        #expect(elapsed < .seconds(20))
        if ManifestFixtures.checksMemory {
            // The reader's copy of the input (12 MB) and little else.
            #expect(peak - before < 64 << 20, "grew by \((peak - before) >> 20) MB")
        }
    }
}
