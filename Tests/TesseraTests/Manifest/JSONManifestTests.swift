import Foundation
import Testing

@testable import Tessera

@Suite struct JSONManifestTests {
    struct PlayurlAnswer: Codable, Equatable {
        struct Payload: Codable, Equatable {
            var quality: Int
            var timelength: Int64
            var durl: [Segment]
        }
        struct Segment: Codable, Equatable {
            var order: Int
            var size: Int64
            var url: String
            var backupURL: [String]?

            enum CodingKeys: String, CodingKey {
                case order, size, url
                case backupURL = "backup_url"
            }
        }
        var code: Int
        var message: String
        var data: Payload
    }

    func decodingError<T: Decodable>(_ type: T.Type, _ json: String, sourceLocation: SourceLocation = #_sourceLocation) -> DownloadError? {
        #expect(throws: DownloadError.self, sourceLocation: sourceLocation) {
            try JSONManifest.decode(T.self, from: Data(json.utf8))
        }
    }

    // MARK: Decoding

    @Test func decodesThePlayurlAnswer() throws {
        let answer = try JSONManifest.decode(PlayurlAnswer.self, from: Data(ManifestFixtures.playurlJSON.utf8))
        #expect(answer.code == 0)
        #expect(answer.data.quality == 80)
        #expect(answer.data.durl.map(\.url) == ["http://a", "http://b"])
        #expect(answer.data.durl.map(\.size) == [123, 456])
        #expect(answer.data.durl[0].backupURL == ["http://m/a"])
        #expect(answer.data.durl[1].backupURL == nil)
        // The same answer JSONDecoder gives.
        #expect(answer == (try JSONDecoder().decode(PlayurlAnswer.self, from: Data(ManifestFixtures.playurlJSON.utf8))))
    }

    @Test func aMistypedFieldNamesItsPath() throws {
        struct Segment: Decodable { var order: Int; var size: Int; var url: String }
        struct Payload: Decodable { var durl: [Segment] }
        struct Answer: Decodable { var code: Int; var data: Payload }
        let json = #"{"code":0,"data":{"durl":[{"order":1,"size":123,"url":"http://a"},{"order":2,"size":5,"url":"http://b"},{"order":3,"size":"123","url":"http://c"}]}}"#
        let error = decodingError(Answer.self, json)
        #expect(error?.code == .manifestInvalid)
        #expect(error?.message == #""data.durl[2].size": expected a number, found a string ("123")"#)
        #expect(error?.message.hasPrefix(#""data.durl[2].size": expected a number, found a string"#) == true)
    }

    @Test(arguments: [
        (#"{"code":"0"}"#, #""code": expected a number, found a string ("0")"#),
        (#"{"code":null}"#, #""code": expected a number, found null"#),
        (#"{"code":true}"#, #""code": expected a number, found a boolean (true)"#),
        (#"{"code":[1]}"#, #""code": expected a number, found an array (1 element)"#),
        (#"{"code":1.5}"#, #""code": expected a whole number (Int), found the number 1.5"#),
        (#"{"code":1e30}"#, #""code": expected a number that fits in Int, found the number 1e30"#),
        (#"{}"#, #""code": the required key "code" is missing"#),
        (#"[]"#, #"(top level): expected an object, found an array (0 elements)"#),
        (#""x""#, #"(top level): expected an object, found a string ("x")"#),
    ])
    func typeAndKeyMismatches(json: String, message: String) throws {
        struct Answer: Decodable { var code: Int }
        let error = decodingError(Answer.self, json)
        #expect(error?.code == .manifestInvalid)
        #expect(error?.message == message)
    }

    @Test func numbersAreReadExactly() throws {
        struct IDs: Decodable, Equatable {
            var big: Int64
            var unsigned: UInt64
            var small: UInt8
            var exponent: Int
            var whole: Int
            var negative: Int32
            var ratio: Double
            var float: Float
            var decimal: Decimal
        }
        let json = #"{"big":9007199254740993,"unsigned":18446744073709551615,"small":255,"exponent":1e3,"whole":2.0,"negative":-2147483648,"ratio":0.1,"float":1.5,"decimal":12.345}"#
        let ids = try JSONManifest.decode(IDs.self, from: Data(json.utf8))
        #expect(ids.big == 9_007_199_254_740_993)
        #expect(ids.unsigned == .max)
        #expect(ids.small == 255)
        #expect(ids.exponent == 1000)
        #expect(ids.whole == 2)
        #expect(ids.negative == .min)
        #expect(ids.ratio == 0.1)
        #expect(ids.float == 1.5)
        #expect(ids.decimal == Decimal(string: "12.345"))

        struct Small: Decodable { var value: UInt8 }
        #expect(decodingError(Small.self, #"{"value":256}"#)?.message == #""value": expected a number that fits in UInt8, found the number 256"#)
        #expect(decodingError(Small.self, #"{"value":-1}"#)?.message == #""value": expected a number that fits in UInt8, found the number -1"#)
        struct Huge: Decodable { var value: Double }
        #expect(decodingError(Huge.self, #"{"value":1e999}"#)?.message == #""value": the number 1e999 does not fit in Double"#)
    }

    @Test func foundationTypesDecodeAsWithJSONDecoder() throws {
        struct Values: Codable, Equatable {
            var url: URL
            var data: Data
            var date: Date
            var dictionary: [String: Int]
            var optionals: [Int?]
            var nested: [[String]]
            var missing: String?
            var null: String?
        }
        let json = #"{"url":"https://cdn.example.com/a b/c?x=1","data":"AAEC/w==","date":1000.5,"dictionary":{"a":1,"b":2},"optionals":[1,null,3],"nested":[["a"],[],["b","c"]],"null":null}"#
        let values = try JSONManifest.decode(Values.self, from: Data(json.utf8))
        #expect(values == (try JSONDecoder().decode(Values.self, from: Data(json.utf8))))
        #expect(values.data == Data([0, 1, 2, 255]))
        #expect(values.date == Date(timeIntervalSinceReferenceDate: 1000.5))
        #expect(values.optionals == [1, nil, 3])
        #expect(values.missing == nil && values.null == nil)
        // Top-level values of any kind.
        #expect(try JSONManifest.decode([Int].self, from: Data("[1,2,3]".utf8)) == [1, 2, 3])
        #expect(try JSONManifest.decode(String.self, from: Data(#""\u00e9\ud83d\ude00\n""#.utf8)) == "é😀\n")
        #expect(try JSONManifest.decode(Bool?.self, from: Data("null".utf8)) == nil)

        struct Link: Decodable { var url: URL }
        #expect(decodingError(Link.self, #"{"url":""}"#)?.message == #""url": expected a URL, found a string ("")"#)
        struct Blob: Decodable { var data: Data }
        #expect(decodingError(Blob.self, #"{"data":"!!"}"#)?.message == #""data": expected Base64 data, found a string ("!!")"#)
    }

    @Test func enumsAndCustomDecodersKeepThePath() throws {
        enum Codec: String, Decodable { case avc, hevc }
        struct Stream: Decodable { var codec: Codec }
        struct Answer: Decodable { var streams: [Stream] }
        let error = decodingError(Answer.self, #"{"streams":[{"codec":"avc"},{"codec":"vp9"}]}"#)
        #expect(error?.message.hasPrefix(#""streams[1].codec": "#) == true, "\(error?.message ?? "")")
        #expect(error?.message.contains("vp9") == true)

        // A DownloadError thrown by a type's own decoder is passed on untouched.
        struct Strict: Decodable {
            init(from decoder: any Decoder) throws {
                throw DownloadError(.manifestExpired, "the answer says the URLs expired")
            }
        }
        let custom = decodingError(Strict.self, "{}")
        #expect(custom?.code == .manifestExpired)
        #expect(custom?.message == "the answer says the URLs expired")

        // Keys that are not plain names are bracketed.
        struct Odd: Decodable {
            var value: Int
            enum CodingKeys: String, CodingKey { case value = "a.b c" }
        }
        #expect(decodingError(Odd.self, #"{"a.b c":"x"}"#)?.message == #"["a.b c"]: expected a number, found a string ("x")"#)
        // Running out of array elements.
        struct Pair: Decodable {
            var first: Int
            var second: Int
            init(from decoder: any Decoder) throws {
                var container = try decoder.unkeyedContainer()
                first = try container.decode(Int.self)
                second = try container.decode(Int.self)
            }
        }
        #expect(decodingError([Pair].self, "[[1,2],[3]]")?.message == #""[1][1]": expected another element, but the array has only 1"#)
    }

    // MARK: Malformed JSON

    @Test(arguments: [
        ("", "the JSON is malformed at line 1, column 1: the document is empty (0 bytes)"),
        ("  \n ", "the JSON is malformed at line 2, column 2: the document contains only whitespace"),
        ("<video/>", "the JSON is malformed at line 1, column 1: expected a value, found '<'"),
        (#"{"code":0,}"#, "the JSON is malformed at line 1, column 11: expected a key in double quotes, found '}'"),
        ("[1,2,]", "the JSON is malformed at line 1, column 6: expected a value, found ']'"),
        ("{\n  \"data\": {\n    \"durl\": [1, 2\n}", "the JSON is malformed at line 4, column 1: expected ',' or ']' in an array, found '}'"),
        (#"{"a":1"#, "the JSON is malformed at line 1, column 7: unterminated object: expected ',' or '}', found end of data"),
        (#"{"a" 1}"#, #"the JSON is malformed at line 1, column 6: expected ':' after the key "a", found '1'"#),
        (#"{"a":01}"#, "the JSON is malformed at line 1, column 6: a number must not have a leading zero"),
        (#"{"a":1.}"#, "the JSON is malformed at line 1, column 8: expected a digit after the decimal point, found '}'"),
        (#"{"a":-}"#, "the JSON is malformed at line 1, column 7: expected a digit in a number, found '}'"),
        (#"{"a":NaN}"#, "the JSON is malformed at line 1, column 6: expected a value, found 'N'"),
        (#"{"a":tru}"#, "the JSON is malformed at line 1, column 6: expected a value, found 't'"),
        (#"{"a":"x"#, "the JSON is malformed at line 1, column 8: unterminated string (it starts at offset 5)"),
        ("{\"a\":\"x\ny\"}", "the JSON is malformed at line 1, column 8: a control character (0xA) must be escaped in a string"),
        (#"{"a":"\x"}"#, #"the JSON is malformed at line 1, column 8: invalid escape '\x' in a string"#),
        (#"{"a":"\ud800"}"#, #"the JSON is malformed at line 1, column 7: unpaired UTF-16 surrogate in a \u escape"#),
        (#"{"a":"\u12"}"#, #"the JSON is malformed at line 1, column 11: expected four hex digits after \u, found '"'"#),
        (#"{"a":1} {"b":2}"#, "the JSON is malformed at line 1, column 9: unexpected '{' after the JSON value"),
        ("// comment\n{}", "the JSON is malformed at line 1, column 1: expected a value, found '/'"),
    ])
    func malformedJSONNamesLineAndColumn(json: String, message: String) throws {
        let error = #expect(throws: DownloadError.self) { try JSONManifest.parse(Data(json.utf8)) }
        #expect(error?.code == .manifestInvalid)
        #expect(error?.message == message)
        let decoding = #expect(throws: DownloadError.self) { try JSONManifest.decode(JSONValue.self, from: Data(json.utf8)) }
        #expect(decoding?.message == message)
    }

    @Test func invalidUTF8IsMalformed() throws {
        let data = Data(#"{"title":"caf"#.utf8) + Data([0xC3, 0x28]) + Data(#""}"#.utf8)
        let error = #expect(throws: DownloadError.self) { try JSONManifest.parse(data) }
        #expect(error?.code == .manifestInvalid)
        #expect(error?.message == "the JSON is malformed at line 1, column 14: invalid UTF-8 in a string")
        let escaped = Data(#"{"a\n":"x"#.utf8) + Data([0xFF]) + Data(#""}"#.utf8)
        #expect((#expect(throws: DownloadError.self) { try JSONManifest.parse(escaped) })?.message == "the JSON is malformed at line 1, column 10: invalid UTF-8 in a string")
    }

    @Test func byteOrderMarks() throws {
        let json = #"{"title":"哔哩"}"#
        #expect(try JSONManifest.parse(Data([0xEF, 0xBB, 0xBF]) + Data(json.utf8))["title"] == "哔哩")
        #expect(try JSONManifest.parse(Data([0xFF, 0xFE]) + json.data(using: .utf16LittleEndian)!)["title"] == "哔哩")
        #expect(try JSONManifest.parse(Data([0xFE, 0xFF]) + json.data(using: .utf16BigEndian)!)["title"] == "哔哩")
    }

    // MARK: Limits

    @Test func theSizeLimitIsCheckedFirst() throws {
        let data = Data(repeating: UInt8(ascii: "!"), count: 1001)
        let error = #expect(throws: DownloadError.self) { try JSONManifest.parse(data, limit: 1000) }
        #expect(error?.code == .manifestTooLarge)
        #expect(error?.message == "the JSON document is 1001 bytes, over the limit of 1000 bytes")
        let decoding = #expect(throws: DownloadError.self) { try JSONManifest.decode([Int].self, from: data, limit: 1000) }
        #expect(decoding?.code == .manifestTooLarge)
        #expect(try JSONManifest.parse(Data("[\(String(repeating: "1,", count: 499))1]".utf8), limit: 1001).array?.count == 500)
    }

    @Test func theDepthLimit() throws {
        let fits = String(repeating: "[", count: 512) + String(repeating: "]", count: 512)
        #expect(try JSONManifest.parse(Data(fits.utf8)).array?.count == 1)
        let deep = String(repeating: "[", count: 513) + String(repeating: "]", count: 513)
        let error = #expect(throws: DownloadError.self) { try JSONManifest.parse(Data(deep.utf8)) }
        #expect(error?.code == .manifestTooLarge)
        #expect(error?.message == "the JSON nests arrays and objects more than 512 deep, at line 1, column 513")
        // An attack far deeper than the limit fails just as fast, without exhausting the stack.
        let bomb = String(repeating: #"{"a":"#, count: 1_000_000)
        #expect((#expect(throws: DownloadError.self) { try JSONManifest.parse(Data(bomb.utf8)) })?.code == .manifestTooLarge)
    }

    // MARK: JSONValue

    @Test func probingADocumentWithJSONValue() throws {
        let answer = try JSONManifest.parse(Data(ManifestFixtures.playurlJSON.utf8))
        #expect(answer["code"]?.int == 0)
        #expect(answer["code"] == 0)
        #expect(answer["message"]?.string == "0")
        #expect(answer["message"]?.int == nil)
        #expect(answer["data"]?["durl"]?[0]?["url"]?.string == "http://a")
        #expect(answer["data"]?["durl"]?[1]?["size"]?.double == 456)
        #expect(answer["data"]?["durl"]?[1]?["backup_url"]?.isNull == true)
        #expect(answer["data"]?["durl"]?[2] == nil)
        #expect(answer["data"]?["durl"]?[-1] == nil)
        #expect(answer["data"]?["durl"]?.array?.count == 2)
        #expect(answer["data"]?.object?.keys.sorted() == ["durl", "quality", "timelength"])
        #expect(answer["nothing"] == nil)
        #expect(answer[0] == nil)
        #expect(answer["code"]?["x"] == nil)
        #expect(answer["code"]?.bool == nil)

        let literal: JSONValue = ["a": [1, 2.5, "x", true, ["b": false]], "n": .null]
        #expect(try JSONManifest.parse(Data(#"{"n":null,"a":[1,2.5,"x",true,{"b":false}]}"#.utf8)) == literal)
        #expect(literal["a"]?[1]?.int == nil)
        #expect(literal["a"]?[1]?.double == 2.5)
        #expect(literal["a"]?[3]?.bool == true)
    }

    @Test func jsonValueIsCodableEverywhere() throws {
        let value: JSONValue = ["list": [1, "two", .null, ["deep": true]], "number": -12.5, "text": "é\n"]
        // Round trip through Foundation.
        let encoded = try JSONEncoder().encode(value)
        #expect(try JSONDecoder().decode(JSONValue.self, from: encoded) == value)
        #expect(try JSONManifest.parse(encoded) == value)
        // Embedded in a type, decoded by both decoders.
        struct Answer: Decodable, Equatable { var code: Int; var extra: JSONValue }
        let json = Data(#"{"code":0,"extra":{"list":[1,"two",null,{"deep":true}],"number":-12.5,"text":"é\n"}}"#.utf8)
        #expect(try JSONManifest.decode(Answer.self, from: json) == Answer(code: 0, extra: value))
        #expect(try JSONDecoder().decode(Answer.self, from: json) == Answer(code: 0, extra: value))
    }

    @Test func agreesWithJSONDecoderOnValidDocuments() throws {
        let documents = [
            #"{"a":[1,2,{"b":"c"}],"d":{"e":null,"f":true,"g":-0.5e-3}}"#,
            #"[" \" \\ \/ \b \f \n \r \t \u0041 \u00e9 \u4e2d \ud83d\ude00 "]"#,
            "  \n\t [ 1 , 2 ] \r\n",
            "0", "-0", "1E+2", "123456789012345678", #""""#, "[]", "{}",
        ]
        for document in documents {
            let ours = try JSONManifest.parse(Data(document.utf8))
            let theirs = try JSONDecoder().decode(JSONValue.self, from: Data(document.utf8))
            #expect(ours == theirs, "\(document)")
        }
    }

    @Test func ofDuplicateKeysTheLastWins() throws {
        // As in JavaScript, Python and Go, which produce most of these answers.
        #expect(try JSONManifest.parse(Data(#"{"dup":1,"dup":2}"#.utf8))["dup"] == 2)
        struct Answer: Decodable { var dup: Int }
        #expect(try JSONManifest.decode(Answer.self, from: Data(#"{"dup":1,"dup":2}"#.utf8)).dup == 2)
    }

    @Test func aLargeAnswerParsesInReasonableTime() throws {
        // About 2 MB: 20,000 segments.
        let segments = (0..<20_000).map { #"{"order":\#($0),"size":\#($0 * 1000),"url":"https://cdn.example.com/v/\#($0).m4s?sign=abc&t=\#($0)"}"# }
        let json = Data((#"{"code":0,"data":{"durl":["# + segments.joined(separator: ",") + "]}}").utf8)
        struct Segment: Decodable { var order: Int; var size: Int64; var url: URL }
        struct Payload: Decodable { var durl: [Segment] }
        struct Answer: Decodable { var code: Int; var data: Payload }
        let start = ContinuousClock.now
        let answer = try JSONManifest.decode(Answer.self, from: json)
        let elapsed = ContinuousClock.now - start
        #expect(answer.data.durl.count == 20_000)
        #expect(answer.data.durl.last?.url.absoluteString == "https://cdn.example.com/v/19999.m4s?sign=abc&t=19999")
        #expect(elapsed < .seconds(20))
    }
}
