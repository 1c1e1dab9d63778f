import Foundation
import PlayurlEntity
import Tessera
import Testing

/// Answers in the shapes real playurl APIs send, parsed into manifests.
@Suite struct PlayurlParserTests {
    // MARK: JSON

    /// The web API's answer (`/x/player/playurl`): `data` envelope, parts out of order,
    /// `backup_url` arrays, escaped slashes, unknown keys everywhere.
    static let modernJSON = #"""
        {"code":0,"message":"0","ttl":1,"data":{"from":"local","result":"suc","message":"","quality":80,"format":"flv",
        "timelength":360106,"accept_format":"flv,flv720,flv480,mp4","accept_description":["高清 1080P","高清 720P","清晰 480P","流畅 360P"],
        "accept_quality":[80,64,32,16],"video_codecid":7,"seek_param":"start","seek_type":"offset",
        "durl":[
          {"order":2,"length":180053,"size":40960222,"ahead":"","vhead":"",
           "url":"https:\/\/upos-sz-mirrorkodo.bilivideo.com\/upgcxcode\/01\/10\/1001\/1001-2-80.flv?e=ig8e&uipk=5&platform=pc&upsig=ff01",
           "backup_url":["https:\/\/upos-sz-mirrorcos.bilivideo.com\/upgcxcode\/01\/10\/1001\/1001-2-80.flv?e=ig8e&os=cosbv",
                         "https://cn-hk-eq-bcache-01.bilivideo.com/upgcxcode/01/10/1001/1001-2-80.flv"],
           "md5":"E4D909C290D0FB1CA068FFADDF22CBD0"},
          {"order":1,"length":180053,"size":41234567,"ahead":"","vhead":"",
           "url":"https://upos-sz-mirrorkodo.bilivideo.com/upgcxcode/01/10/1001/1001-1-80.flv?e=ig8e&uipk=5&platform=pc&upsig=ff02",
           "backup_url":null,"md5":"9e107d9d372bb6826bd81d3542a419d6"}],
        "support_formats":[{"quality":80,"format":"flv","new_description":"1080P 高清","display_desc":"1080P","superscript":""}],
        "high_format":null,"last_play_time":0,"last_play_cid":0}}
        """#

    @Test func theWebAPIsJSONBecomesOneOutputPerPartInOrder() throws {
        let manifest = try parse(Self.modernJSON)
        #expect(manifest.title == "aid 170001 cid 1001")
        #expect(manifest.sourceURL == answerURL)
        #expect(manifest.expiresAt == nil)
        #expect(manifest.outputs.map(\.name) == ["1001/part-1.flv", "1001/part-2.flv"])
        let first = manifest.outputs[0], second = manifest.outputs[1]
        #expect(first.assembly == .concatenated)
        #expect(first.segments.count == 1)
        #expect(first.segments[0].urls.map(\.absoluteString) == [
            "https://upos-sz-mirrorkodo.bilivideo.com/upgcxcode/01/10/1001/1001-1-80.flv?e=ig8e&uipk=5&platform=pc&upsig=ff02"
        ])
        #expect(first.segments[0].expectedSize == 41_234_567)
        #expect(first.expectedSize == 41_234_567)
        #expect(first.segments[0].checksum == (try Checksum(.md5, hex: "9e107d9d372bb6826bd81d3542a419d6")))
        #expect(first.segments[0].range == nil)
        #expect(first.checksum == nil)
        #expect(second.segments[0].urls.map(\.absoluteString) == [
            "https://upos-sz-mirrorkodo.bilivideo.com/upgcxcode/01/10/1001/1001-2-80.flv?e=ig8e&uipk=5&platform=pc&upsig=ff01",
            "https://upos-sz-mirrorcos.bilivideo.com/upgcxcode/01/10/1001/1001-2-80.flv?e=ig8e&os=cosbv",
            "https://cn-hk-eq-bcache-01.bilivideo.com/upgcxcode/01/10/1001/1001-2-80.flv",
        ])
        #expect(second.segments[0].expectedSize == 40_960_222)
        #expect(second.segments[0].checksum?.hexDigest == "e4d909c290d0fb1ca068ffaddf22cbd0")
        #expect(second.segments[0].checksum?.algorithm == .md5)
        for output in manifest.outputs {
            #expect(output.media == MediaInfo(kind: .muxed, identifier: "80", quality: "80"))
            #expect(output.isSelected)
            #expect(output.segments[0].headers.isEmpty)
        }
        #expect(manifest.metadata["timelength"] == "360106")
        #expect(manifest.metadata["part-1.length"] == "180053")
        #expect(manifest.metadata["part-2.length"] == "180053")
        #expect(manifest.metadata["accept_quality"] == "80,64,32,16")
        #expect(manifest.metadata["format"] == "flv")
        #expect(manifest.metadata["quality"] == "80")
        #expect(manifest.metadata["cid"] == "1001")
        #expect(manifest.metadata["aid"] == "170001")
        #expect(manifest.metadata["answer"] == "JSON")
        try manifest.validate()
    }

    @Test func thePGCAnswerKeepsItsPlayInfoUnderResult() throws {
        let manifest = try parse(#"""
            {"code":0,"message":"success","result":{"accept_format":"flv,mp4","code":0,"quality":64,"format":"flv720",
             "timelength":1420000,"accept_quality":[112,80,64,32,16],"type":"FLV","video_codecid":7,
             "durl":[{"order":1,"length":1420000,"size":98765432,"url":"https://cn-sh-ct-01.bilivideo.com/upgcxcode/77/22/2002/2002-1-64.flv?e=1",
             "backup_url":["https://upos-sz-mirrorhw.bilivideo.com/upgcxcode/77/22/2002/2002-1-64.flv?e=1"],"md5":""}]}}
            """#)
        #expect(manifest.outputs.map(\.name) == ["1001/part-1.flv"])
        #expect(manifest.outputs[0].segments[0].urls.count == 2)
        #expect(manifest.outputs[0].segments[0].checksum == nil)  // an empty md5 is no checksum
        #expect(manifest.outputs[0].media?.quality == "64")  // the quality the server chose
        #expect(manifest.metadata["requested_quality"] == "80")
        #expect(manifest.metadata["format"] == "flv720")
    }

    @Test func theOldInterfacesJSONHasItsPlayInfoAtTheTop() throws {
        let manifest = try parse(#"""
            {"from":"local","result":"suee","quality":32,"format":"hdmp4","timelength":95000,"accept_format":"mp4,hdmp4",
             "accept_quality":"32,16","seek_param":"start","seek_type":"second",
             "durl":[{"order":1,"length":95000,"size":12000000,"url":"http://upos-hz-mirrorks3.acgvideo.com/dspxcode/i190110.mp4?e=1"}]}
            """#)
        #expect(manifest.outputs.map(\.name) == ["1001/part-1.mp4"])
        #expect(manifest.outputs[0].segments[0].urls == [URL(string: "http://upos-hz-mirrorks3.acgvideo.com/dspxcode/i190110.mp4?e=1")!])
        #expect(manifest.metadata["accept_quality"] == "32,16")
        #expect(manifest.outputs[0].media?.quality == "32")
    }

    @Test func aCodeOfZeroWithoutMessageAndPlayInfoWithoutOptionalFieldsIsEnough() throws {
        let manifest = try parse(#"{"code":0,"data":{"durl":[{"order":1,"url":"https://cdn.example.com/a.flv"}]}}"#)
        #expect(manifest.outputs.map(\.name) == ["1001/part-1.flv"])  // no format: flv
        #expect(manifest.outputs[0].expectedSize == nil)
        #expect(manifest.outputs[0].segments[0].expectedSize == nil)
        #expect(manifest.outputs[0].media?.quality == "80")  // no quality: the one asked for
        #expect(manifest.metadata["timelength"] == nil)
    }

    // MARK: XML

    /// The legacy interface's XML answer: CDATA URLs, a `backup_url` list (one plain URL with an
    /// escaped ampersand), unknown elements, an attribute nobody defined.
    static let legacyXML = #"""
        <?xml version="1.0" encoding="UTF-8"?>
        <video>
        <result>suee</result>
        <timelength>360106</timelength>
        <format>flv</format>
        <accept_format><![CDATA[flv,flv720,flv480,mp4]]></accept_format>
        <accept_quality><![CDATA[80,64,32,16]]></accept_quality>
        <from><![CDATA[local]]></from>
        <seek_param><![CDATA[start]]></seek_param>
        <seek_type><![CDATA[offset]]></seek_type>
        <durl priority="high">
        <order>2</order>
        <length>180053</length>
        <size>40960222</size>
        <ahead><![CDATA[]]></ahead>
        <vhead><![CDATA[]]></vhead>
        <url><![CDATA[http://cn-zjwz4-dx-v-05.acgvideo.com/vg0/upgcxcode/01/10/1001/1001-2-80.flv?expires=1700000000&platform=pc&ssig=abc&nfb=maPYqpoel5MI3qOUX6YpRA==]]></url>
        <backup_url>
        <url><![CDATA[http://cn-hbxy-cmcc-v-04.acgvideo.com/vg2/upgcxcode/01/10/1001/1001-2-80.flv?expires=1700000000&ssig=def]]></url>
        <url>http://upos-hz-mirrorkodo.acgvideo.com/upgcxcode/01/10/1001/1001-2-80.flv?e=a&amp;os=kodo</url>
        </backup_url>
        <md5>e4d909c290d0fb1ca068ffaddf22cbd0</md5>
        </durl>
        <durl>
        <order>1</order>
        <length>180053</length>
        <size>41234567</size>
        <url><![CDATA[http://cn-zjwz4-dx-v-05.acgvideo.com/vg0/upgcxcode/01/10/1001/1001-1-80.flv?expires=1700000000&platform=pc&ssig=ghi]]></url>
        <unknown_thing>ignored</unknown_thing>
        </durl>
        </video>
        """#

    @Test func theLegacyXMLBecomesOneOutputPerPartInOrder() throws {
        let manifest = try parse(Self.legacyXML)
        #expect(manifest.outputs.map(\.name) == ["1001/part-1.flv", "1001/part-2.flv"])
        #expect(manifest.outputs[0].segments[0].urls.map(\.absoluteString) == [
            "http://cn-zjwz4-dx-v-05.acgvideo.com/vg0/upgcxcode/01/10/1001/1001-1-80.flv?expires=1700000000&platform=pc&ssig=ghi"
        ])
        #expect(manifest.outputs[0].segments[0].expectedSize == 41_234_567)
        #expect(manifest.outputs[0].segments[0].checksum == nil)
        #expect(manifest.outputs[1].segments[0].urls.map(\.absoluteString) == [
            "http://cn-zjwz4-dx-v-05.acgvideo.com/vg0/upgcxcode/01/10/1001/1001-2-80.flv?expires=1700000000&platform=pc&ssig=abc&nfb=maPYqpoel5MI3qOUX6YpRA==",
            "http://cn-hbxy-cmcc-v-04.acgvideo.com/vg2/upgcxcode/01/10/1001/1001-2-80.flv?expires=1700000000&ssig=def",
            "http://upos-hz-mirrorkodo.acgvideo.com/upgcxcode/01/10/1001/1001-2-80.flv?e=a&os=kodo",
        ])
        #expect(manifest.outputs[1].segments[0].expectedSize == 40_960_222)
        #expect(manifest.outputs[1].segments[0].checksum == (try Checksum(.md5, hex: "e4d909c290d0fb1ca068ffaddf22cbd0")))
        #expect(manifest.outputs.allSatisfy { $0.media == MediaInfo(kind: .muxed, identifier: "80", quality: "80") })
        #expect(manifest.metadata["timelength"] == "360106")
        #expect(manifest.metadata["part-1.length"] == "180053")
        #expect(manifest.metadata["accept_quality"] == "80,64,32,16")
        #expect(manifest.metadata["answer"] == "XML")
        try manifest.validate()
    }

    @Test func xmlResultSuccessAndAQualityElementAreRead() throws {
        let manifest = try parse("""
            <video><result>success</result><quality>64</quality><format>mp4</format>
            <durl><order>1</order><size>10</size><url>https://cdn.example.com/1.mp4</url></durl></video>
            """)
        #expect(manifest.outputs.map(\.name) == ["1001/part-1.mp4"])
        #expect(manifest.outputs[0].media?.quality == "64")
    }

    // MARK: Shared rules

    @Test func theSyntaxIsToldByTheFirstByteNotByAnythingElse() throws {
        let json = #"{"code":0,"data":{"durl":[{"order":1,"url":"https://cdn.example.com/a.flv"}]}}"#
        let xml = "<video><result>suee</result><durl><order>1</order><url>https://cdn.example.com/a.flv</url></durl></video>"
        for text in [json, " \r\n\t" + json, "\u{FEFF}" + json, xml, "\n  " + xml, "\u{FEFF}" + xml,
                     "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!-- a comment -->\n" + xml] {
            let manifest = try parse(text)
            #expect(manifest.outputs.map(\.name) == ["1001/part-1.flv"])
        }
        #expect(try parse(json).metadata["answer"] == "JSON")
        #expect(try parse(xml).metadata["answer"] == "XML")
    }

    @Test func relativeURLsResolveAgainstTheAnswersURLAfterRedirects() throws {
        let redirected = URL(string: "https://edge.example.net/api/v2/playurl?cid=1001")!
        let manifest = try parse(#"""
            {"code":0,"data":{"durl":[{"order":1,"url":"media/1001-1.flv?sig=a",
             "backup_url":["/mirror/1001-1.flv","//other.example.org/1001-1.flv","", "media/1001-1.flv?sig=a"]}]}}
            """#, url: redirected)
        #expect(manifest.outputs[0].segments[0].urls.map(\.absoluteString) == [
            "https://edge.example.net/api/v2/media/1001-1.flv?sig=a",
            "https://edge.example.net/mirror/1001-1.flv",
            "https://other.example.org/1001-1.flv",
        ])  // the empty entry is skipped, the duplicate of the primary dropped
        #expect(manifest.sourceURL == redirected)
    }

    @Test func formatsBecomeSafeExtensions() throws {
        let cases: [(String?, String)] = [
            ("flv", "flv"), ("flv720", "flv"), ("flv480", "flv"), ("flv_p60", "flv"), ("FLV", "flv"), ("mp4", "mp4"),
            ("hdmp4", "mp4"), ("mp4a", "mp4"), ("webm", "webm"), (nil, "flv"), ("", "flv"), ("../../etc/passwd", "etcpasswd"),
            ("/abs", "abs"), ("f\u{0}lv", "flv"), ("..", "flv"), ("ts\\x", "tsx"), ("a-very-long-format-name-indeed", "averylongformatn"),
        ]
        for (format, expected) in cases {
            let field = format.map { #","format":"\#($0.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\u{0}", with: "\\u0000"))""# } ?? ""
            let manifest = try parse(#"{"code":0,"data":{"quality":80\#(field),"durl":[{"order":1,"url":"https://cdn.example.com/a"}]}}"#)
            #expect(manifest.outputs[0].name == "1001/part-1.\(expected)", "format \(String(describing: format))")
            #expect(try SafePath.relative(manifest.outputs[0].name) == manifest.outputs[0].name)
        }
    }

    @Test func theRefererGoesWithEverySegment() throws {
        let entity = try makeEntity(referer: "https://www.bilibili.com/video/av170001")
        let manifest = try parse(Self.modernJSON, entity: entity)
        for output in manifest.outputs {
            #expect(output.segments[0].headers["Referer"] == "https://www.bilibili.com/video/av170001")
        }
    }

    @Test func aSignedURLsDeadlineIsTheManifestsExpiry() throws {
        let soon = Int64(Date().timeIntervalSince1970) + 3600, later = soon + 600
        let manifest = try parse(#"""
            {"code":0,"data":{"durl":[
              {"order":1,"url":"https://cdn.example.com/1.flv?e=x&deadline=\#(later)&gen=playurlv2","backup_url":["https://b.example.com/1.flv?deadline=\#(soon)"]},
              {"order":2,"url":"https://cdn.example.com/2.flv?deadline=\#(later)"}]}}
            """#)
        #expect(manifest.expiresAt == Date(timeIntervalSince1970: TimeInterval(soon)))
        // A deadline already past is the clock's disagreement, not an expiry.
        let past = try parse(#"{"code":0,"data":{"durl":[{"order":1,"url":"https://cdn.example.com/1.flv?deadline=1600000000"}]}}"#)
        #expect(past.expiresAt == nil)
    }

    @Test func aCidWithoutAidHasNoAidInItsTitleOrMetadata() throws {
        let entity = try makeEntity(cid: 42, aid: nil, quality: 16)
        let manifest = try parse(#"{"code":0,"data":{"durl":[{"order":1,"url":"https://cdn.example.com/1.flv"}]}}"#, entity: entity)
        #expect(manifest.title == "cid 42")
        #expect(manifest.outputs.map(\.name) == ["42/part-1.flv"])
        #expect(manifest.metadata["aid"] == nil)
        #expect(manifest.outputs[0].media?.quality == "16")
    }

    @Test func manyPartsStayInOrder() throws {
        let count = 40
        let durl = (1...count).reversed().map { #"{"order":\#($0),"size":\#($0),"url":"https://cdn.example.com/\#($0).flv"}"# }
        let manifest = try parse(#"{"code":0,"data":{"durl":[\#(durl.joined(separator: ","))]}}"#)
        #expect(manifest.outputs.map(\.name) == (1...count).map { "1001/part-\($0).flv" })
        #expect(manifest.outputs.map { $0.segments[0].expectedSize } == (1...count).map { Int64($0) })
    }
}
