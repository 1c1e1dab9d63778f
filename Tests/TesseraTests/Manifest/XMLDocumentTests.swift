import CLibXML2
import Foundation
import Testing

@testable import Tessera

@Suite struct XMLDocumentTests {
    let dash = ["mpd": ManifestFixtures.dashNamespace]

    // MARK: Realistic manifests

    @Test func readsAnMPDWithTheDefaultNamespace() throws {
        let document = try SafeXMLDocument.parse(Data(ManifestFixtures.mpd.utf8))
        let mpd = document.root
        #expect(mpd.name == "MPD")
        #expect(mpd.namespaceURI == ManifestFixtures.dashNamespace)
        #expect(mpd.prefix == nil)
        #expect(mpd.line == 2)
        #expect(mpd[attribute: "type"] == "static")
        #expect(mpd[attribute: "mediaPresentationDuration"] == "PT634.566S")
        #expect(mpd[attribute: "missing"] == nil)
        #expect(mpd.parent == nil)

        let baseURL = try #require(mpd.firstChild(named: "BaseURL", namespaceURI: ManifestFixtures.dashNamespace))
        #expect(baseURL.text == "https://cdn.example.com/video/")

        let representations = try document.select("//mpd:Representation", namespaces: dash)
        #expect(representations.map { $0[attribute: "id"] } == ["v1080", "v720", "a128"])
        #expect(representations.map { $0[attribute: "bandwidth"].flatMap(Int.init) } == [4_800_000, 2_400_000, 128_000])

        // The template of a representation's adaptation set, found relative to the representation.
        let video = representations[0]
        let template = try #require(try video.select("../mpd:SegmentTemplate", namespaces: dash).first)
        #expect(template[attribute: "media"] == "$RepresentationID$/seg-$Number%05d$.m4s")
        #expect(template[attribute: "initialization"] == "$RepresentationID$/init.mp4")
        #expect(template[attribute: "timescale"] == "90000")
        #expect(template.attributes == [
            "timescale": "90000", "duration": "360000", "startNumber": "1",
            "initialization": "$RepresentationID$/init.mp4", "media": "$RepresentationID$/seg-$Number%05d$.m4s",
        ])

        let audio = representations[2]
        #expect(audio.parent?[attribute: "contentType"] == "audio")
        #expect(try audio.evaluateString("string(../mpd:BaseURL)", namespaces: dash) == "audio/")
        #expect(try audio.select("ancestor::mpd:Period", namespaces: dash).first?[attribute: "id"] == "p0")

        #expect(try document.evaluateString("count(//mpd:AdaptationSet)", namespaces: dash) == "3")
        #expect(try document.evaluateString("string(/mpd:MPD/@minBufferTime)", namespaces: dash) == "PT2S")

        // xlink attributes: by namespace whatever the prefix, or by qualified name in `attributes`.
        let remote = try #require(try document.select("//mpd:AdaptationSet[@xlink:href]", namespaces: dash.merging(["xlink": ManifestFixtures.xlinkNamespace]) { $1 }).first)
        #expect(remote.attribute("href", namespaceURI: ManifestFixtures.xlinkNamespace) == "https://ads.example.com/period.xml")
        #expect(remote[attribute: "href"] == nil)
        #expect(remote.attributes == ["xlink:href": "https://ads.example.com/period.xml", "xlink:actuate": "onLoad"])
    }

    @Test func aPrefixedNamespaceIsSelectedWithTheCallersOwnPrefix() throws {
        let document = try SafeXMLDocument.parse(Data(ManifestFixtures.prefixedMPD.utf8))
        #expect(document.root.name == "MPD")
        #expect(document.root.prefix == "dash")
        #expect(document.root.namespaceURI == ManifestFixtures.dashNamespace)
        #expect(document.root.description == "<dash:MPD> at line 2")

        // The document says `dash:`, the caller says `m:` (and `mpd:`): the namespace URI decides.
        let ids = try document.select("/m:MPD/m:Period/m:AdaptationSet/m:Representation", namespaces: ["m": ManifestFixtures.dashNamespace])
            .map { $0[attribute: "id"] }
        #expect(ids == ["hd", "sd"])
        #expect(try document.select("//mpd:Representation", namespaces: dash).count == 2)
        // Without a namespace the names do not match: XPath 1.0 has no default namespace.
        #expect(try document.select("//Representation").isEmpty)
        // The document's own prefix is not bound for the caller.
        let error = #expect(throws: DownloadError.self) { try document.select("//dash:Representation") }
        #expect(error?.code == .manifestInvalid)

        // The default-namespace document gives the same answers to the same query.
        let defaultNamespace = try SafeXMLDocument.parse(Data(ManifestFixtures.mpd.utf8))
        #expect(try defaultNamespace.select("/m:MPD/m:Period", namespaces: ["m": ManifestFixtures.dashNamespace]).count == 1)
    }

    @Test func readsAMetalinkFile() throws {
        let document = try SafeXMLDocument.parse(Data(ManifestFixtures.metalink.utf8), baseURL: URL(string: "https://example.com/example.meta4"))
        #expect(document.baseURL?.absoluteString == "https://example.com/example.meta4")
        let ns = ManifestFixtures.metalinkNamespace
        let file = try #require(document.root.firstChild(named: "file", namespaceURI: ns))
        #expect(file[attribute: "name"] == "example.iso")
        #expect(file.firstChild(named: "size")?.text == "14471447")

        let hash = try #require(file.firstChild(named: "hash", namespaceURI: ns))
        #expect(hash[attribute: "type"] == "sha-256")
        #expect(hash.text == "3d6fece8033d146d8611eab4f032df738c8c1283620fd02a1f2bfec6e27d590d")

        let urls = file.children(named: "url", namespaceURI: ns)
        #expect(urls.count == 3)
        #expect(urls.map { $0[attribute: "priority"] } == ["1", "1", "2"])
        #expect(urls.map(\.text) == [
            "ftp://ftp.example.com/example.iso", "http://example.com/example.iso", "https://mirror.example.org/example.iso",
        ])
        #expect(urls[0][attribute: "location"] == "de")
        // `nil` accepts any namespace; a wrong namespace matches nothing.
        #expect(file.children(named: "url").count == 3)
        #expect(file.children(named: "url", namespaceURI: "urn:other").isEmpty)
        #expect(file.firstChild(named: "url", namespaceURI: "urn:other") == nil)

        let m = ["m": ns]
        let pieces = try document.select("//m:pieces/m:hash", namespaces: m)
        #expect(pieces.map(\.text) == ["a0c4d3b2", "b1d5e4c3"])
        #expect(try document.evaluateString("string(//m:file/m:hash[@type='sha-256'])", namespaces: m).hasPrefix("3d6fece8"))
        #expect(try document.select("//m:url[@priority='1']", namespaces: m).count == 2)
        #expect(try document.evaluateString("string(//m:metaurl/@mediatype)", namespaces: m) == "torrent")
    }

    @Test func readsTheLegacyPlayurlAnswerWithCDATA() throws {
        let document = try SafeXMLDocument.parse(Data(ManifestFixtures.playurl.utf8))
        let video = document.root
        #expect(video.name == "video")
        #expect(video.namespaceURI == nil)
        #expect(video.firstChild(named: "result")?.text == "suee")

        let durl = try #require(video.firstChild(named: "durl"))
        #expect(durl.firstChild(named: "order")?.text == "1")
        #expect(durl.firstChild(named: "url")?.text == "http://a/b?x=1&y=2")
        #expect(durl.firstChild(named: "backup_url")?.children(named: "url").map(\.text) == ["http://m/b"])
        // Text is the concatenation of all descendants' text and CDATA.
        #expect(durl.text == "1http://a/b?x=1&y=2http://m/b")

        #expect(try document.select("/video/durl/url").map(\.text) == ["http://a/b?x=1&y=2"])
        #expect(try document.select("//url").map(\.text) == ["http://a/b?x=1&y=2", "http://m/b"])
        #expect(try document.evaluateString("string(/video/durl/url)") == "http://a/b?x=1&y=2")
    }

    @Test func mixedTextAndCDATAReadAsOneText() throws {
        let document = try SafeXMLDocument.parse("<a>one <![CDATA[<two> & ]]>three<b>four</b><!-- not text --><?pi not text?></a>")
        #expect(document.root.text == "one <two> & threefour")
        #expect(document.root.children.map(\.name) == ["b"])
    }

    // MARK: Elements

    @Test func elementsNavigateTheTree() throws {
        let document = try SafeXMLDocument.parse("""
            <root>
              <!-- comment -->
              <a id="1"><c/></a>
              text
              <b id="2"/>
              <a id="3"/>
            </root>
            """)
        let root = document.root
        #expect(root.children.map(\.name) == ["a", "b", "a"])
        #expect(root.children.map(\.line) == [3, 5, 6])
        #expect(root.children(named: "a").map { $0[attribute: "id"] } == ["1", "3"])
        #expect(root.firstChild(named: "b")?[attribute: "id"] == "2")
        #expect(root.firstChild(named: "zzz") == nil)
        let c = try #require(root.children.first?.children.first)
        #expect(c.name == "c")
        #expect(c.parent?.parent == root)
        #expect(c.children.isEmpty)
        #expect(c.text == "")
        #expect(c.attributes.isEmpty)
    }

    @Test func elementsCompareByNodeIdentity() throws {
        let document = try SafeXMLDocument.parse(Data(ManifestFixtures.metalink.utf8))
        let m = ["m": ManifestFixtures.metalinkNamespace]
        let first = try document.select("//m:url", namespaces: m)
        let second = try document.select("//m:file/m:url", namespaces: m)
        #expect(first == second)
        #expect(Set(first + second).count == 3)
        #expect(first[0] != first[1])
        #expect(first[0].parent == document.root.firstChild(named: "file"))
        // The same text in another document is another element.
        let other = try SafeXMLDocument.parse(Data(ManifestFixtures.metalink.utf8))
        #expect(try other.select("//m:url", namespaces: m)[0] != first[0])
    }

    @Test func anElementKeepsItsDocumentAlive() throws {
        weak var weakDocument: SafeXMLDocument?
        func urls() throws -> [SafeXMLElement] {
            let document = try SafeXMLDocument.parse(Data(ManifestFixtures.playurl.utf8))
            weakDocument = document
            return try document.select("//url")
        }
        let elements = try urls()
        #expect(weakDocument == nil)
        // The tree is still there: read it, walk it, query it.
        #expect(elements.map(\.text) == ["http://a/b?x=1&y=2", "http://m/b"])
        #expect(elements[0].parent?.name == "durl")
        #expect(elements[0].parent?.parent?.firstChild(named: "result")?.text == "suee")
        #expect(try elements[0].select("/video/result").first?.text == "suee")
        #expect(try elements[1].evaluateString("count(ancestor::*)") == "3")
    }

    // MARK: XPath

    @Test func xpathResultsOtherThanElements() throws {
        let document = try SafeXMLDocument.parse(Data(ManifestFixtures.playurl.utf8))
        // Attributes and text nodes are not elements: they are skipped.
        #expect(try document.select("//url/text()").isEmpty)
        #expect(try document.select("/video/durl/order | /video/result/text()").map(\.name) == ["order"])
        #expect(try document.evaluateString("count(//url) > 1") == "true")
        #expect(try document.evaluateString("1 div 2") == "0.5")
        #expect(try document.evaluateString("string(/nothing)") == "")
        #expect(try document.evaluateString("/video/durl/order") == "1")
        #expect(try document.evaluateString("concat(/video/result, '-', count(//durl))") == "suee-1")

        let error = #expect(throws: DownloadError.self) { try document.select("count(//url)") }
        #expect(error?.code == .manifestInvalid)
        #expect(error?.message == #"the XPath expression "count(//url)" gives a number, not elements; use evaluateString(_:namespaces:) for it"#)
    }

    @Test(arguments: [
        ("//mpd:Period[", "Invalid expression"),
        ("//x:Period", "Undefined namespace prefix"),
        ("nosuchfunction(1)", "Unregistered function"),
        ("$variable", "Undefined variable"),
        ("//Period[@id='1]", "Unfinished literal"),
        ("", "Invalid expression"),
    ])
    func anInvalidXPathNamesTheExpression(expression: String, reason: String) throws {
        let document = try SafeXMLDocument.parse(Data(ManifestFixtures.mpd.utf8))
        let error = #expect(throws: DownloadError.self) { try document.select(expression, namespaces: dash) }
        #expect(error?.code == .manifestInvalid)
        #expect(error?.message.hasPrefix("invalid XPath expression \"\(expression)\"") == true, "\(error?.message ?? "")")
        #expect(error?.message.contains(reason) == true, "\(error?.message ?? "")")
        let fromElement = #expect(throws: DownloadError.self) { try document.root.evaluateString(expression, namespaces: dash) }
        #expect(fromElement?.code == .manifestInvalid)
    }

    @Test func anUndefinedPrefixSaysWhichPrefixesWereBound() throws {
        let document = try SafeXMLDocument.parse(Data(ManifestFixtures.mpd.utf8))
        let error = #expect(throws: DownloadError.self) { try document.select("//dash:Period", namespaces: dash) }
        #expect(error?.message == #"invalid XPath expression "//dash:Period" at offset 13: Undefined namespace prefix (the prefixes passed in `namespaces` are: mpd)"#)
        let none = #expect(throws: DownloadError.self) { try document.select("//dash:Period") }
        #expect(none?.message.contains("no prefixes were passed") == true)
    }

    @Test func anEmptyNamespacePrefixIsRefused() throws {
        let document = try SafeXMLDocument.parse(Data(ManifestFixtures.mpd.utf8))
        let error = #expect(throws: DownloadError.self) { try document.select("//Period", namespaces: ["": ManifestFixtures.dashNamespace]) }
        #expect(error?.code == .manifestInvalid)
        #expect(error?.message.contains("prefix") == true)
    }

    // MARK: Malformed input

    @Test(arguments: [
        (Data(), "the XML is malformed at line 1, column 1: the document is empty (0 bytes)"),
        (Data("   \n  ".utf8), "the XML is malformed at line 2, column 3: Start tag expected, '<' not found"),
        (Data("this is not XML".utf8), "the XML is malformed at line 1, column 1: Start tag expected, '<' not found"),
        (Data(#"{"code":0}"#.utf8), "the XML is malformed at line 1, column 1: Start tag expected, '<' not found"),
        (Data("<MPD>\n<Period>\n</MPD>".utf8), "the XML is malformed at line 3, column 7: Opening and ending tag mismatch: Period line 2 and MPD"),
        (Data("<MPD><Period>".utf8), "the XML is malformed at line 1, column 14: Premature end of data in tag Period line 1"),
        (Data("<MPD a=\"1>".utf8), "the XML is malformed at line 1, column 11: "),
        (Data("<a/><b/>".utf8), "the XML is malformed at line 1, column 5: Extra content at the end of the document"),
        (Data("<a>&nbsp;</a>".utf8), "the XML is malformed at line 1, column 10: Entity 'nbsp' not defined"),
        (Data("<a>\u{1}</a>".utf8), "the XML is malformed at line 1, column 4: PCDATA invalid Char value 1"),
        (Data("<mpd:MPD/>".utf8), "the XML is malformed at line 1, column 9: Namespace prefix mpd on MPD is not defined"),
        (Data("<?xml version=\"1.0\"?>".utf8), "the XML is malformed at line 1, column 22: Start tag expected, '<' not found"),
    ])
    func malformedInputNamesLineAndColumn(data: Data, message: String) throws {
        let error = #expect(throws: DownloadError.self) { try SafeXMLDocument.parse(data) }
        #expect(error?.code == .manifestInvalid)
        #expect(error?.message.hasPrefix(message) == true, "got: \(error?.message ?? "no error")")
    }

    @Test func aTruncatedMPDNamesWhereItEnds() throws {
        let full = Data(ManifestFixtures.mpd.utf8)
        for length in [10, 200, full.count / 2, full.count - 8] {
            let error = #expect(throws: DownloadError.self) { try SafeXMLDocument.parse(full.prefix(length)) }
            #expect(error?.code == .manifestInvalid)
            #expect(error?.message.contains("the XML is malformed at line ") == true)
            #expect(error?.message.contains("column") == true)
        }
    }

    @Test func aMismatchedTagDeepInAnMPD() throws {
        let broken = ManifestFixtures.mpd.replacingOccurrences(of: "</Period>", with: "</Perio>")
        let error = #expect(throws: DownloadError.self) { try SafeXMLDocument.parse(broken) }
        #expect(error?.code == .manifestInvalid)
        #expect(error?.message == "the XML is malformed at line 17, column 11: Opening and ending tag mismatch: Period line 4 and Perio")
    }

    // MARK: Encodings

    @Test func utf8WithAndWithoutByteOrderMark() throws {
        let text = "<title lang=\"zh\">哔哩哔哩 — café 😀</title>"
        #expect(try SafeXMLDocument.parse(Data(text.utf8)).root.text == "哔哩哔哩 — café 😀")
        #expect(try SafeXMLDocument.parse(Data([0xEF, 0xBB, 0xBF]) + Data(text.utf8)).root.text == "哔哩哔哩 — café 😀")
        #expect(try SafeXMLDocument.parse(text).root[attribute: "lang"] == "zh")
    }

    @Test func utf16WithByteOrderMark() throws {
        let text = "<?xml version=\"1.0\" encoding=\"UTF-16\"?><title>哔哩 café 😀</title>"
        let little = Data([0xFF, 0xFE]) + text.data(using: .utf16LittleEndian)!
        let big = Data([0xFE, 0xFF]) + text.data(using: .utf16BigEndian)!
        #expect(try SafeXMLDocument.parse(little).root.text == "哔哩 café 😀")
        #expect(try SafeXMLDocument.parse(big).root.text == "哔哩 café 😀")
        // Without a declaration too.
        let bare = Data([0xFF, 0xFE]) + "<t>é</t>".data(using: .utf16LittleEndian)!
        #expect(try SafeXMLDocument.parse(bare).root.text == "é")
    }

    @Test func theDeclaredEncodingIsHonoured() throws {
        var latin1 = Data("<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><t a=\"".utf8)
        latin1 += Data([0xE9, 0x22, 0x3E, 0x63, 0x61, 0x66, 0xE9])  // é"> café
        latin1 += Data("</t>".utf8)
        let document = try SafeXMLDocument.parse(latin1)
        #expect(document.root.text == "café")
        #expect(document.root[attribute: "a"] == "é")
        // A string is already Unicode: its declaration is ignored.
        #expect(try SafeXMLDocument.parse("<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><t>café</t>").root.text == "café")
    }

    @Test func invalidUTF8IsMalformed() throws {
        let data = Data("<a>\n ok".utf8) + Data([0xFF, 0xFE]) + Data("</a>".utf8)
        let error = #expect(throws: DownloadError.self) { try SafeXMLDocument.parse(data) }
        #expect(error?.code == .manifestInvalid)
        #expect(error?.message.hasPrefix("the XML is malformed at line 2, column 4: Input is not proper UTF-8") == true, "\(error?.message ?? "")")
        let unknown = #expect(throws: DownloadError.self) {
            try SafeXMLDocument.parse(Data("<?xml version=\"1.0\" encoding=\"X-NO-SUCH\"?><a/>".utf8))
        }
        #expect(unknown?.code == .manifestInvalid)
    }

    // MARK: Configuration and threads

    @Test func theParserFlagsAreTheSafeOnes() {
        let flags = XMLParseOptions.libxml2Flags
        #expect(flags & Int32(XML_PARSE_NONET.rawValue) != 0)
        #expect(flags & Int32(XML_PARSE_NOCDATA.rawValue) != 0)
        #expect(flags & XMLParseOptions.forbiddenLibxml2Flags == 0)
        for forbidden in [XML_PARSE_NOENT, XML_PARSE_DTDLOAD, XML_PARSE_DTDATTR, XML_PARSE_DTDVALID, XML_PARSE_XINCLUDE, XML_PARSE_HUGE] {
            #expect(flags & Int32(forbidden.rawValue) == 0)
        }
        let defaults = XMLParseOptions()
        #expect(defaults.maxDocumentSize == 32 << 20)
        #expect(defaults.maxDepth == 256)
        #expect(defaults.maxElementCount == 5_000_000)
    }

    @Test func twoHundredDocumentsParsedAndQueriedConcurrently() async throws {
        let results = try await withThrowingTaskGroup(of: (Int, [String], String).self) { group in
            for index in 0..<200 {
                group.addTask {
                    let xml = """
                        <MPD xmlns="urn:mpeg:dash:schema:mpd:2011"><Period id="\(index)">\
                        \((0..<(index % 7 + 1)).map { "<Representation id=\"r\(index)-\($0)\" bandwidth=\"\($0)\"/>" }.joined())\
                        </Period></MPD>
                        """
                    let document = try SafeXMLDocument.parse(Data(xml.utf8))
                    let ids = try document.select("//mpd:Representation", namespaces: ["mpd": ManifestFixtures.dashNamespace])
                        .compactMap { $0[attribute: "id"] }
                    let period = try document.evaluateString("string(/m:MPD/m:Period/@id)", namespaces: ["m": ManifestFixtures.dashNamespace])
                    // Errors are per parse too.
                    #expect(throws: DownloadError.self) { try SafeXMLDocument.parse("<MPD><Period \(index)></MPD>") }
                    return (index, ids, period)
                }
            }
            return try await group.reduce(into: [:]) { $0[$1.0] = ($1.1, $1.2) }
        }
        #expect(results.count == 200)
        for (index, result) in results {
            #expect(result.0 == (0..<(index % 7 + 1)).map { "r\(index)-\($0)" })
            #expect(result.1 == "\(index)")
        }
    }

    @Test func oneDocumentQueriedFromManyTasks() async throws {
        let document = try SafeXMLDocument.parse(Data(ManifestFixtures.mpd.utf8))
        let dash = self.dash
        let counts = await withTaskGroup(of: Int.self) { group in
            for index in 0..<200 {
                group.addTask {
                    let representations = (try? document.select("//mpd:Representation", namespaces: dash)) ?? []
                    let texts = representations.map { $0.parent?.text ?? "" }
                    return index.isMultiple(of: 2) ? representations.count : texts.count
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(counts == Array(repeating: 3, count: 200))
    }
}
