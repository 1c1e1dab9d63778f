import Foundation
import PlayurlEntity
import Tessera
import Testing
import TesseraTestSupport

/// Answers that must be refused, each with an error a person can act on.
@Suite struct PlayurlBadInputTests {
    static let onePart = #"{"order":1,"size":100,"url":"https://cdn.example.com/1.flv"}"#

    // MARK: Not an answer

    @Test func somethingThatIsNeitherJSONNorXMLIsRefused() {
        for text in ["error: no such video", "\u{FEFF}  ok", "[1,2,3]", "1234"] {
            let error = downloadError { _ = try parse(text) }
            #expect(error?.code == .manifestInvalid)
            #expect(error?.message.contains("neither JSON nor XML") == true, "\(text): \(error?.message ?? "")")
        }
        let empty = downloadError { _ = try parse(" \n\t") }
        #expect(empty?.code == .manifestInvalid)
        #expect(empty?.message.contains("empty") == true)
    }

    @Test func malformedAndTruncatedJSONNamesWhere() {
        let truncated = downloadError { _ = try parse(#"{"code":0,"data":{"durl":[{"order":1,"url":"https://cdn.exa"#) }
        #expect(truncated?.code == .manifestInvalid)
        #expect(truncated?.message.contains("line 1") == true, "\(truncated?.message ?? "")")
        let malformed = downloadError { _ = try parse("{\"code\":0,\n\"data\":{\"durl\":[,]}}") }
        #expect(malformed?.code == .manifestInvalid)
        #expect(malformed?.message.contains("line 2") == true, "\(malformed?.message ?? "")")
    }

    @Test func malformedAndTruncatedXMLNamesWhere() {
        let truncated = downloadError { _ = try parse("<video>\n<result>suee</result>\n<durl><order>1</order><url>https://cdn") }
        #expect(truncated?.code == .manifestInvalid)
        #expect(truncated?.message.contains("line") == true, "\(truncated?.message ?? "")")
        let mismatched = downloadError { _ = try parse("<video>\n<result>suee</results>\n</video>") }
        #expect(mismatched?.code == .manifestInvalid)
        #expect(mismatched?.message.contains("line 2") == true, "\(mismatched?.message ?? "")")
    }

    // MARK: The server says no

    @Test func aNonZeroCodeIsTheServersRefusalQuoted() {
        let error = downloadError { _ = try parse(#"{"code":-404,"message":"video not found","ttl":1}"#) }
        #expect(error?.code == .manifestInvalid)
        #expect(error?.message.contains("\"video not found\"") == true)
        #expect(error?.message.contains("-404") == true)
        #expect(error?.message.contains("cid 1001") == true)
        let chinese = downloadError { _ = try parse(#"{"code":-10403,"message":"大会员专享限制","data":null}"#) }
        #expect(chinese?.message.contains("大会员专享限制") == true)
        let silent = downloadError { _ = try parse(#"{"code":-400}"#) }
        #expect(silent?.message.contains("no message") == true)
        let odd = downloadError { _ = try parse(#"{"code":"zero","data":{"durl":[\#(Self.onePart)]}}"#) }
        #expect(odd?.code == .manifestInvalid)
        #expect(odd?.message.contains("code") == true)
    }

    @Test func anXMLResultOtherThanSueeIsTheServersRefusalQuoted() {
        let error = downloadError {
            _ = try parse("<video><result>error</result><code>-404</code><message><![CDATA[啥都木有]]></message></video>")
        }
        #expect(error?.code == .manifestInvalid)
        #expect(error?.message.contains("\"error\"") == true)
        #expect(error?.message.contains("啥都木有") == true)
        let missing = downloadError { _ = try parse("<video><durl><order>1</order><url>https://a.example.com/1</url></durl></video>") }
        #expect(missing?.code == .manifestInvalid)
        #expect(missing?.message.contains("no <result>") == true)
        let oldJSON = downloadError { _ = try parse(#"{"result":"error","message":"no video","durl":[]}"#) }
        #expect(oldJSON?.message.contains("\"no video\"") == true)
    }

    @Test func anAnswerWithoutPartsIsRefused() {
        for text in [
            #"{"code":0,"message":"0","data":{"quality":80,"durl":[]}}"#,
            #"{"code":0,"message":"0","data":{"quality":80}}"#,
            "<video><result>suee</result><format>flv</format></video>",
        ] {
            let error = downloadError { _ = try parse(text) }
            #expect(error?.code == .manifestInvalid)
            #expect(error?.message.contains("no durl parts") == true, "\(error?.message ?? "")")
        }
        let dash = downloadError { _ = try parse(#"{"code":0,"data":{"quality":80,"dash":{"video":[],"audio":[]}}}"#) }
        #expect(dash?.message.contains("DASH") == true)
        let noData = downloadError { _ = try parse(#"{"code":0,"message":"0","data":null}"#) }
        #expect(noData?.code == .manifestInvalid)
        #expect(noData?.message.contains("no play info") == true)
        let notAnObject = downloadError { _ = try parse(#"{"code":0,"data":[1]}"#) }
        #expect(notAnObject?.code == .manifestInvalid)
    }

    // MARK: Wrong document

    @Test func aWrongRootOrNamespaceIsRefused() {
        let html = downloadError { _ = try parse("<!DOCTYPE html>\n<html><body>502 Bad Gateway</body></html>") }
        #expect(html?.code == .manifestInvalid)
        #expect(html?.message.contains("<html>") == true)
        #expect(html?.message.contains("line 2") == true, "\(html?.message ?? "")")
        let mpd = downloadError { _ = try parse(#"<MPD xmlns="urn:mpeg:dash:schema:mpd:2011"/>"#) }
        #expect(mpd?.code == .manifestInvalid)
        let namespaced = downloadError {
            _ = try parse(#"<video xmlns="urn:example:video"><result>suee</result><durl><order>1</order><url>https://a.example.com/1</url></durl></video>"#)
        }
        #expect(namespaced?.code == .manifestInvalid)
        #expect(namespaced?.message.contains("urn:example:video") == true)
    }

    @Test func unknownFieldsElementsAndAttributesAreIgnored() throws {
        let json = try parse(#"""
            {"code":0,"message":"0","extra":{"deep":[1,2,{"x":null}]},"data":{"whatever":true,"durl":[
             {"order":1,"url":"https://cdn.example.com/1.flv","size":5,"codec":"avc","weird":[null]}]}}
            """#)
        #expect(json.outputs.count == 1)
        let xml = try parse(#"""
            <video version="2" xmlns:x="urn:x"><x:thing/><result lang="en">suee</result><surprise><durl><order>9</order></durl></surprise>
            <durl id="a"><order>1</order><x:url>ignored</x:url><url>https://cdn.example.com/1.flv</url><size>5</size><note>hi</note></durl></video>
            """#)
        #expect(xml.outputs.count == 1)
        #expect(xml.outputs[0].segments[0].urls == [URL(string: "https://cdn.example.com/1.flv")!])
    }

    // MARK: Parts

    @Test func partsWithoutOrderRepeatedOrMissingOrdersAreRefused() {
        let noOrderJSON = downloadError { _ = try parse(#"{"code":0,"data":{"durl":[{"url":"https://cdn.example.com/1.flv"}]}}"#) }
        #expect(noOrderJSON?.code == .manifestInvalid)
        #expect(noOrderJSON?.message.contains("\"data.durl[0]\" has no order") == true, "\(noOrderJSON?.message ?? "")")
        let noOrderXML = downloadError {
            _ = try parse("<video><result>suee</result>\n\n<durl><url>https://cdn.example.com/1.flv</url></durl></video>")
        }
        #expect(noOrderXML?.message.contains("the <durl> at line 3 has no order") == true, "\(noOrderXML?.message ?? "")")
        let repeated = downloadError {
            _ = try parse(#"{"code":0,"data":{"durl":[{"order":1,"url":"https://a.example.com/1"},{"order":1,"url":"https://a.example.com/2"}]}}"#)
        }
        #expect(repeated?.code == .manifestInvalid)
        #expect(repeated?.message.contains("\"data.durl[1]\" repeats the order number 1 of \"data.durl[0]\"") == true, "\(repeated?.message ?? "")")
        let gap = downloadError {
            _ = try parse(#"{"code":0,"data":{"durl":[{"order":1,"url":"https://a.example.com/1"},{"order":3,"url":"https://a.example.com/3"}]}}"#)
        }
        #expect(gap?.code == .manifestInvalid)
        #expect(gap?.message.contains("order 2 is missing") == true, "\(gap?.message ?? "")")
        #expect(gap?.message.contains("has order 3") == true)
        let zeroBased = downloadError {
            _ = try parse("<video><result>suee</result><durl><order>0</order><url>https://a.example.com/0</url></durl><durl><order>1</order><url>https://a.example.com/1</url></durl></video>")
        }
        #expect(zeroBased?.message.contains("order 2 is missing") == true, "\(zeroBased?.message ?? "")")
    }

    @Test func aPartWithoutURLIsRefused() {
        let json = downloadError { _ = try parse(#"{"code":0,"data":{"durl":[{"order":1,"size":4,"backup_url":["https://b.example.com/1"]}]}}"#) }
        #expect(json?.code == .manifestInvalid)
        #expect(json?.message.contains("has no url") == true)
        let xml = downloadError { _ = try parse("<video><result>suee</result>\n<durl><order>1</order><url>  </url></durl></video>") }
        #expect(xml?.code == .manifestInvalid)
        #expect(xml?.message.contains("the <durl> at line 2") == true, "\(xml?.message ?? "")")
    }

    @Test func numbersThatAreNotNumbersAreRefusedWithTheirPlace() {
        let json = downloadError { _ = try parse(#"{"code":0,"data":{"durl":[{"order":1,"size":"123","url":"https://a.example.com/1"}]}}"#) }
        #expect(json?.code == .manifestInvalid)
        #expect(json?.message.contains("\"data.durl[0].size\"") == true, "\(json?.message ?? "")")
        let xml = downloadError { _ = try parse("<video><result>suee</result>\n<durl>\n<order>1</order>\n<size>12a</size><url>https://a.example.com/1</url></durl></video>") }
        #expect(xml?.code == .manifestInvalid)
        #expect(xml?.message.contains("<size> at line 4") == true, "\(xml?.message ?? "")")
        let negative = downloadError { _ = try parse(#"{"code":0,"data":{"durl":[{"order":1,"size":-5,"url":"https://a.example.com/1"}]}}"#) }
        #expect(negative?.code == .manifestInvalid)
        #expect(negative?.message.contains("negative size") == true)
        let badOrder = downloadError { _ = try parse(#"{"code":0,"data":{"durl":[{"order":1.5,"url":"https://a.example.com/1"}]}}"#) }
        #expect(badOrder?.code == .manifestInvalid)
        #expect(badOrder?.message.contains("data.durl[0].order") == true, "\(badOrder?.message ?? "")")
    }

    @Test func anMD5ThatIsNotOneIsRefused() {
        for md5 in ["abc", "9e107d9d372bb6826bd81d3542a419d6ff", "9e107d9d372bb6826bd81d3542a419dz"] {
            let error = downloadError { _ = try parse(#"{"code":0,"data":{"durl":[{"order":1,"url":"https://a.example.com/1","md5":"\#(md5)"}]}}"#) }
            #expect(error?.code == .manifestInvalid)
            #expect(error?.message.contains("md5") == true)
        }
    }

    // MARK: Hostile input

    @Test func entityBombsAndExternalEntitiesAreRefused() {
        let bomb = #"""
            <?xml version="1.0"?>
            <!DOCTYPE video [
              <!ENTITY a "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa">
              <!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">
              <!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">
            ]>
            <video><result>&c;</result></video>
            """#
        let external = #"""
            <?xml version="1.0"?>
            <!DOCTYPE video [<!ENTITY secret SYSTEM "file:///etc/passwd">]>
            <video><result>suee</result><durl><order>1</order><url>https://a.example.com/&secret;</url></durl></video>
            """#
        let externalDTD = #"""
            <?xml version="1.0"?>
            <!DOCTYPE video SYSTEM "http://127.0.0.1:1/video.dtd">
            <video><result>suee</result></video>
            """#
        for text in [bomb, external, externalDTD] {
            let error = downloadError { _ = try parse(text) }
            #expect(error?.code == .unsafeInput, "\(error?.message ?? "")")
            #expect(error?.message.contains("cid 1001") == true)
        }
    }

    @Test func urlsWithOtherSchemesOrControlCharactersAreRefused() {
        for url in ["file:///etc/passwd", "ftp://ftp.example.com/1.flv", "javascript:alert(1)", "data:text/plain,hi", "gopher://x/1"] {
            let primary = downloadError { _ = try parse(#"{"code":0,"data":{"durl":[{"order":1,"url":"\#(url)"}]}}"#) }
            #expect(primary?.code == .unsafeInput, "\(url): \(primary?.message ?? "")")
            #expect(primary?.message.contains("part 1") == true)
            let backup = downloadError {
                _ = try parse(#"{"code":0,"data":{"durl":[{"order":1,"url":"https://a.example.com/1","backup_url":["https://b.example.com/1","\#(url)"]}]}}"#)
            }
            #expect(backup?.code == .unsafeInput, "\(url): \(backup?.message ?? "")")
            #expect(backup?.message.contains("backup url 2 of part 1") == true, "\(backup?.message ?? "")")
            let xml = downloadError {
                _ = try parse("<video><result>suee</result><durl><order>1</order><url><![CDATA[\(url)]]></url></durl></video>")
            }
            #expect(xml?.code == .unsafeInput)
        }
        let control = downloadError { _ = try parse(#"{"code":0,"data":{"durl":[{"order":1,"url":"https://a.example.com/1\u0000.flv"}]}}"#) }
        #expect(control?.code == .unsafeInput)
        let newline = downloadError { _ = try parse("<video><result>suee</result><durl><order>1</order><url>https://a.example.com/a&#10;b</url></durl></video>") }
        #expect(newline?.code == .unsafeInput)
    }

    @Test func hostileNamesCannotComeOutOfAnAnswer() throws {
        // The only name part an answer controls is the format: it is reduced to letters and digits.
        for format in ["../../../etc", "/etc/passwd", "a\u{0}b", "..\\..\\x", "~root"] {
            let escaped = format.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\u{0}", with: "\\u0000")
            let manifest = try parse(#"{"code":0,"data":{"format":"\#(escaped)","durl":[{"order":1,"url":"https://a.example.com/1"}]}}"#)
            let name = manifest.outputs[0].name
            #expect(name.hasPrefix("1001/part-1."))
            #expect(!name.contains(".."))
            #expect(try SafePath.relative(name) == name)
            #expect(name.split(separator: "/").count == 2)
        }
    }

    @Test func moreSegmentsThanTheLimitAreRefusedBeforeBuildingThem() {
        let parts = (1...5).map { #"{"order":\#($0),"url":"https://a.example.com/\#($0)"}"# }.joined(separator: ",")
        let json = downloadError { _ = try parse(#"{"code":0,"data":{"durl":[\#(parts)]}}"#, maxSegments: 4) }
        #expect(json?.code == .manifestTooLarge)
        #expect(json?.message.contains("5 durl parts") == true)
        let xmlParts = (1...5).map { "<durl><order>\($0)</order><url>https://a.example.com/\($0)</url></durl>" }.joined()
        let xml = downloadError { _ = try parse("<video><result>suee</result>\(xmlParts)</video>", maxSegments: 4) }
        #expect(xml?.code == .manifestTooLarge)
        #expect(xml?.message.contains("5 <durl> parts") == true)
        #expect((try? parse(#"{"code":0,"data":{"durl":[\#(parts)]}}"#, maxSegments: 5))?.outputs.count == 5)
        // A hundred thousand parts are counted, not built: refused at once.
        let many = String(repeating: #"{"order":1,"url":"x"},"#, count: 100_000).dropLast()
        let started = ContinuousClock.now
        let huge = downloadError { _ = try parse(#"{"code":0,"data":{"durl":[\#(many)]}}"#, maxSegments: 1000) }
        #expect(huge?.code == .manifestTooLarge)
        #expect(ContinuousClock.now - started < .seconds(20))
    }

    @Test func documentsOverTheSizeLimitOrTooDeepAreRefused() {
        let big = downloadError { _ = try parse(#"{"code":0,"data":{"durl":[\#(Self.onePart)]}}"#, maxDocumentSize: 20) }
        #expect(big?.code == .manifestTooLarge)
        let bigXML = downloadError { _ = try parse("<video><result>suee</result><durl><order>1</order><url>https://a.example.com/1</url></durl></video>", maxDocumentSize: 20) }
        #expect(bigXML?.code == .manifestTooLarge)
        let deep = String(repeating: "[", count: 5000) + String(repeating: "]", count: 5000)
        let tooDeep = downloadError { _ = try parse(#"{"code":0,"data":{"x":\#(deep)}}"#) }
        #expect(tooDeep?.code == .manifestTooLarge)
    }
}
