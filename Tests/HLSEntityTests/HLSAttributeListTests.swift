import Foundation
import HLSEntity
import Tessera
import Testing
import TesseraTestSupport

@Suite struct HLSAttributeListTests {
    private func parse(_ text: String) throws -> HLSAttributeList {
        try HLSAttributeList(parsing: Substring(text), tag: "#EXT-X-TEST", line: 7)
    }

    @Test func everyValueType() throws {
        let list = try parse(#"BANDWIDTH=1280000,CODECS="avc1.4d401f,mp4a.40.2",RESOLUTION=1280x720,FRAME-RATE=23.976,IV=0x0A0b,DEFAULT=YES,NAME="",TYPE=AUDIO"#)
        #expect(list.names == ["BANDWIDTH", "CODECS", "RESOLUTION", "FRAME-RATE", "IV", "DEFAULT", "NAME", "TYPE"])
        #expect(try list.integer("BANDWIDTH") == 1_280_000)
        #expect(list["CODECS"] == "avc1.4d401f,mp4a.40.2")
        #expect(list.values["CODECS"]?.isQuoted == true)
        #expect(list.values["TYPE"]?.isQuoted == false)
        let resolution = try #require(try list.resolution("RESOLUTION"))
        #expect(resolution.width == 1280 && resolution.height == 720)
        #expect(try list.decimal("FRAME-RATE") == 23.976)
        #expect(try list.hexBytes("IV", count: 4) == [0, 0, 0x0A, 0x0B])
        #expect(list.flag("DEFAULT"))
        #expect(!list.flag("AUTOSELECT"))
        #expect(list["NAME"] == "")
        #expect(list["TYPE"] == "AUDIO")
        #expect(list["MISSING"] == nil)
        #expect(try list.integer("MISSING") == nil)
    }

    @Test func quotedStringsKeepCommasEqualsAndSpaces() throws {
        let list = try parse(#"URI="https://k.example.com/key?a=1,b=2",NAME="Director's cut, part 1""#)
        #expect(list["URI"] == "https://k.example.com/key?a=1,b=2")
        #expect(list["NAME"] == "Director's cut, part 1")
    }

    @Test func theFirstOfTwoEqualNamesWinsAndEmptyListsAreEmpty() throws {
        #expect(try parse("A=1,A=2")["A"] == "1")
        #expect(try parse("").names.isEmpty)
        #expect(try parse("A=1,")["A"] == "1")
    }

    @Test func malformedListsNameTheTagAndLine() {
        expectDownloadError(.manifestInvalid, "line 7", "#EXT-X-TEST", "unterminated") { _ = try parse(#"URI="abc"#) }
        expectDownloadError(.manifestInvalid, "line 7", "without a value") { _ = try parse("A=1,B") }
        expectDownloadError(.manifestInvalid, "line 7", "without a value") { _ = try parse("A,B=1") }
        expectDownloadError(.manifestInvalid, "line 7", "text after the quoted value") { _ = try parse(#"A="x"y,B=1"#) }
        expectDownloadError(.manifestInvalid, "line 7", "without an attribute name") { _ = try parse("=1") }
    }

    @Test func badValuesNameTheAttribute() throws {
        let list = try parse("BANDWIDTH=12k,RESOLUTION=1280*720,IV=1234,RATE=fast,IV2=0xZZ,HUGE=99999999999999999999999")
        expectDownloadError(.manifestInvalid, "line 7", "BANDWIDTH", "\"12k\"") { _ = try list.integer("BANDWIDTH") }
        expectDownloadError(.manifestInvalid, "RESOLUTION", "1280x720") { _ = try list.resolution("RESOLUTION") }
        expectDownloadError(.manifestInvalid, "IV", "0x") { _ = try list.hexBytes("IV", count: 16) }
        expectDownloadError(.manifestInvalid, "IV2") { _ = try list.hexBytes("IV2", count: 16) }
        expectDownloadError(.manifestInvalid, "RATE") { _ = try list.decimal("RATE") }
        expectDownloadError(.manifestInvalid, "HUGE") { _ = try list.integer("HUGE") }
        let long = try parse("IV=0x" + String(repeating: "ab", count: 17))
        expectDownloadError(.manifestInvalid, "at most 32 digits") { _ = try long.hexBytes("IV", count: 16) }
    }

    @Test func requiredAttributes() throws {
        let list = try parse(#"TYPE=AUDIO,NAME="""#)
        #expect(try list.required("TYPE") == "AUDIO")
        expectDownloadError(.manifestInvalid, "line 7: #EXT-X-TEST has no GROUP-ID attribute") { _ = try list.required("GROUP-ID") }
        expectDownloadError(.manifestInvalid, "NAME") { _ = try list.required("NAME") }
    }
}
