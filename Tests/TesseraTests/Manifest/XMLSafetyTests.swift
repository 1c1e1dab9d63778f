import Foundation
import Testing
import TesseraTesting

@testable import Tessera

#if canImport(Glibc)
import Glibc
#endif

/// Hostile XML: entity bombs, external entities, external DTDs, XInclude, and the limits.
@Suite struct XMLSafetyTests {
    /// Parses with the tree parser and with the stream reader; both must fail the same way.
    func bothParsersFail(
        _ xml: String,
        options: XMLParseOptions = .init(),
        sourceLocation: SourceLocation = #_sourceLocation
    ) -> (document: DownloadError?, reader: DownloadError?) {
        let document = #expect(throws: DownloadError.self, sourceLocation: sourceLocation) {
            try SafeXMLDocument.parse(Data(xml.utf8), options: options)
        }
        let reader = #expect(throws: DownloadError.self, sourceLocation: sourceLocation) {
            let reader = try XMLStreamReader(data: Data(xml.utf8), options: options)
            while try reader.next() != nil {}
        }
        #expect(document?.code == reader?.code, sourceLocation: sourceLocation)
        if document?.code == .unsafeInput {
            // The same words, line and identifiers: the reader refuses as the tree parser does.
            #expect(reader?.message == document?.message, sourceLocation: sourceLocation)
        }
        return (document, reader)
    }

    // MARK: Entities

    @Test func billionLaughsIsRefusedQuicklyAndWithoutMemory() throws {
        let clock = ContinuousClock()
        let memoryBefore = residentMemory()
        let start = clock.now
        let document = #expect(throws: DownloadError.self) { try SafeXMLDocument.parse(Data(ManifestFixtures.billionLaughs.utf8)) }
        let documentTime = clock.now - start
        let readerStart = clock.now
        let reader = #expect(throws: DownloadError.self) {
            let reader = try XMLStreamReader(data: Data(ManifestFixtures.billionLaughs.utf8))
            while try reader.next() != nil {}
        }
        let readerTime = clock.now - readerStart
        #expect(document?.code == .unsafeInput)
        #expect(reader?.code == .unsafeInput)
        #expect(document?.message.contains(#"declares the entity "lol" in its DTD at line 3"#) == true, "\(document?.message ?? "")")
        #expect(document?.message.contains("billion laughs") == true)
        #expect(documentTime < .milliseconds(100), "took \(documentTime)")
        #expect(readerTime < .milliseconds(100), "took \(readerTime)")
        // Refused at the first declaration (line 3), so nothing was ever expanded; expanded, the
        // document would be 3 GB.
        if ManifestFixtures.checksMemory {
            #expect(residentMemory() - memoryBefore < 64 << 20)
        }
    }

    @Test func aQuadraticBlowupIsRefused() throws {
        let entity = String(repeating: "x", count: 50_000)
        let xml = "<!DOCTYPE a [<!ENTITY e \"\(entity)\">]><a>" + String(repeating: "&e;", count: 50_000) + "</a>"
        let start = ContinuousClock.now
        let errors = bothParsersFail(xml)
        #expect(errors.document?.code == .unsafeInput)
        #expect(ContinuousClock.now - start < .seconds(1))
    }

    @Test func anInternalEntityIsRefusedEvenWhenHarmless() throws {
        let errors = bothParsersFail(#"<!DOCTYPE a [<!ENTITY company "Example Inc.">]><a>&company;</a>"#)
        #expect(errors.document?.code == .unsafeInput)
        #expect(errors.document?.message.contains(#"the entity "company""#) == true)
    }

    @Test func externalEntitiesNeverReadTheFile() throws {
        let passwd = fileText("/etc/passwd")
        let firstLine = String(passwd.split(separator: "\n").first ?? "root:x:0:0")
        // A file of our own, with a marker that must never show up anywhere.
        let marker = "TESSERA-SECRET-\(UUID().uuidString)"
        let secret = NSTemporaryDirectory() + "/tessera-xxe-\(UUID().uuidString).txt"
        try marker.write(toFile: secret, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: secret) }

        let attacks = [
            #"<!DOCTYPE foo [<!ENTITY xxe SYSTEM "file:///etc/passwd">]><foo>&xxe;</foo>"#,
            #"<!DOCTYPE foo [<!ENTITY xxe SYSTEM "file://\#(secret)">]><foo>&xxe;</foo>"#,
            #"<!DOCTYPE foo [<!ENTITY xxe SYSTEM "\#(secret)">]><foo a="x">&xxe;</foo>"#,
            #"<!DOCTYPE foo [<!ENTITY % xxe SYSTEM "file://\#(secret)"> %xxe;]><foo/>"#,
            #"<!DOCTYPE foo [<!ENTITY xxe PUBLIC "-//X//EN" "file:///etc/passwd">]><foo>&xxe;</foo>"#,
            #"<?xml version="1.0"?><!DOCTYPE foo SYSTEM "file://\#(secret)"><foo>&xxe;</foo>"#,
            #"<!DOCTYPE foo [<!ENTITY xxe SYSTEM "file:///etc/passwd">]><foo><bar>&xxe;</bar></foo>"#,
        ]
        for attack in attacks {
            let errors = bothParsersFail(attack)
            for error in [errors.document, errors.reader] {
                #expect(error?.code == .unsafeInput, "\(attack): \(String(describing: error))")
                let text = String(describing: error)
                #expect(!text.contains(marker))
                #expect(passwd.isEmpty || !text.contains(firstLine))
            }
        }
        // Nothing else in the output either: even a document whose entity would be harmless to
        // read is never expanded into the tree (it is refused before the tree exists).
        let document = try? SafeXMLDocument.parse(#"<!DOCTYPE foo [<!ENTITY xxe SYSTEM "file://\#(secret)">]><foo>&xxe;</foo>"#)
        #expect(document == nil)
    }

    @Test func theParserNeverTouchesTheNetwork() async throws {
        #if canImport(Glibc)
        // A listening socket on loopback: any attempt to fetch the DTD or the entity would
        // leave a connection in its queue.
        let loopback = try LoopbackSocket()
        let listener = loopback.descriptor, port = loopback.port
        defer { loopback.close() }
        _ = fcntl(listener, F_SETFL, fcntl(listener, F_GETFL) | O_NONBLOCK)

        let url = "http://127.0.0.1:\(port)/evil"
        for attack in [
            #"<!DOCTYPE MPD SYSTEM "\#(url).dtd"><MPD/>"#,
            #"<!DOCTYPE MPD PUBLIC "-//X//DTD//EN" "\#(url).dtd"><MPD/>"#,
            #"<!DOCTYPE MPD [<!ENTITY e SYSTEM "\#(url).xml">]><MPD>&e;</MPD>"#,
            #"<!DOCTYPE MPD [<!ENTITY % p SYSTEM "\#(url).ent"> %p;]><MPD/>"#,
            #"<MPD xmlns:xi="http://www.w3.org/2001/XInclude"><xi:include href="\#(url).xml"/></MPD>"#,
        ] {
            let errors = bothParsersFail(attack)
            #expect(errors.document?.code == .unsafeInput, "\(attack)")
        }
        // A fetch would happen inside the parse (libxml2 is synchronous), its connection queued
        // by now; the listener is still watched briefly, since only watching can show that no
        // connection comes.
        let untouched = await consistently(for: .milliseconds(50), every: .milliseconds(5)) {
            let accepted = accept(listener, nil, nil)
            if accepted >= 0 { close(accepted) }
            return accepted < 0
        }
        #expect(untouched, "the parser connected to the network")
        #endif
    }

    // MARK: DTDs and XInclude

    @Test func aDoctypeWithoutDeclarationsIsFine() throws {
        let document = try SafeXMLDocument.parse("<!DOCTYPE MPD>\n<MPD><Period/></MPD>")
        #expect(document.root.name == "MPD")
        #expect(document.root.children.map(\.name) == ["Period"])
        // Element and attribute declarations carry no entities: accepted, and never validated.
        let declared = try SafeXMLDocument.parse("<!DOCTYPE a [<!ELEMENT a (#PCDATA)><!ATTLIST a x CDATA \"d\">]><a>t</a>")
        #expect(declared.root.text == "t")
        let reader = try XMLStreamReader(data: Data("<!DOCTYPE MPD><MPD/>".utf8))
        #expect(try reader.next()?.name == "MPD")
    }

    @Test(arguments: [
        #"<!DOCTYPE MPD SYSTEM "http://example.com/mpd.dtd"><MPD/>"#,
        #"<!DOCTYPE MPD SYSTEM "mpd.dtd"><MPD/>"#,
        #"<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Strict//EN" "http://www.w3.org/TR/xhtml1/DTD/xhtml1-strict.dtd"><html/>"#,
        #"<!DOCTYPE MPD SYSTEM "file:///etc/passwd" [<!ELEMENT MPD ANY>]><MPD/>"#,
    ])
    func anExternalDTDIsRefused(xml: String) throws {
        let errors = bothParsersFail(xml)
        #expect(errors.document?.code == .unsafeInput)
        #expect(errors.document?.message.contains("external DTD") == true)
        #expect(errors.reader?.message.contains("external DTD") == true)
    }

    @Test func anUnparsedEntityIsRefused() throws {
        let errors = bothParsersFail(#"<!DOCTYPE a [<!NOTATION gif SYSTEM "gif"><!ENTITY logo SYSTEM "logo.gif" NDATA gif>]><a/>"#)
        #expect(errors.document?.code == .unsafeInput)
        #expect(errors.document?.message.contains(#"the entity "logo""#) == true)
    }

    @Test(arguments: ["http://www.w3.org/2001/XInclude", "http://www.w3.org/2003/XInclude"])
    func xincludeIsRefused(namespace: String) throws {
        let xml = #"<MPD xmlns:xi="\#(namespace)">\#n<Period/>\#n<xi:include href="file:///etc/passwd" parse="text"/></MPD>"#
        let errors = bothParsersFail(xml)
        #expect(errors.document?.code == .unsafeInput)
        #expect(errors.document?.message == "the XML uses XInclude (<include> at line 3); XInclude is never processed and documents that use it are refused")
    }

    // MARK: Limits

    @Test func theSizeLimitIsCheckedBeforeParsing() throws {
        var options = XMLParseOptions()
        options.maxDocumentSize = 100
        // Not even XML: the size is what is refused.
        let garbage = Data(repeating: 0x21, count: 101)
        let document = #expect(throws: DownloadError.self) { try SafeXMLDocument.parse(garbage, options: options) }
        #expect(document?.code == .manifestTooLarge)
        #expect(document?.message == "the XML document is 101 bytes, over the limit of 100 bytes (XMLParseOptions.maxDocumentSize)")
        let text = #expect(throws: DownloadError.self) { try SafeXMLDocument.parse(String(repeating: "é", count: 51), options: options) }
        #expect(text?.code == .manifestTooLarge)
        let reader = #expect(throws: DownloadError.self) { try XMLStreamReader(data: garbage, options: options) }
        #expect(reader?.code == .manifestTooLarge)
        // At the limit it parses.
        let fits = "<a>" + String(repeating: "x", count: 93) + "</a>"
        #expect(Data(fits.utf8).count == 100)
        #expect(try SafeXMLDocument.parse(Data(fits.utf8), options: options).root.text.count == 93)
    }

    @Test func theDepthLimit() throws {
        var options = XMLParseOptions()
        options.maxDepth = 10
        #expect(try SafeXMLDocument.parse(ManifestFixtures.nested(depth: 10), options: options).root.name == "a")
        let errors = bothParsersFail(ManifestFixtures.nested(depth: 11), options: options)
        #expect(errors.document?.code == .manifestTooLarge)
        #expect(errors.document?.message == "the XML nests elements 11 deep at line 1 (<a>), over the limit of 10 (XMLParseOptions.maxDepth)")
        #expect(errors.reader?.message == "the XML nests elements 11 deep at line 1 (<a>), over the limit of 10 (XMLParseOptions.maxDepth)")

        // The default: 256 levels parse, 257 do not.
        #expect(try SafeXMLDocument.parse(ManifestFixtures.nested(depth: 256)).root.name == "a")
        let reader = try XMLStreamReader(data: Data(ManifestFixtures.nested(depth: 256).utf8))
        var deepest = 0
        while let node = try reader.next() { deepest = max(deepest, node.depth) }
        #expect(deepest == 256)  // the text inside the 256th element
        let deep = bothParsersFail(ManifestFixtures.nested(depth: 257))
        #expect(deep.document?.code == .manifestTooLarge)
        // Past libxml2's own limit, whatever the option says.
        options.maxDepth = 10_000
        let deeper = bothParsersFail(ManifestFixtures.nested(depth: 5_000), options: options)
        #expect(deeper.document?.code == .manifestTooLarge)
        #expect(deeper.document?.message.contains("libxml2's limit of 256 levels") == true)
    }

    @Test func theElementCountLimit() throws {
        var options = XMLParseOptions()
        options.maxElementCount = 100
        #expect(try SafeXMLDocument.parse(ManifestFixtures.flat(elements: 100), options: options).root.children.count == 99)
        let errors = bothParsersFail(ManifestFixtures.flat(elements: 101), options: options)
        #expect(errors.document?.code == .manifestTooLarge)
        #expect(errors.document?.message.hasPrefix("the XML has more than 100 elements") == true)
        options.maxElementCount = nil
        #expect(try SafeXMLDocument.parse(ManifestFixtures.flat(elements: 20_000), options: options).root.children.count == 19_999)
    }
}
