import Foundation

/// Safe JSON helpers for plugins that read JSON API answers and manifests.
///
/// Both entry points check the size first, parse strictly (RFC 8259: no comments, no trailing
/// commas, no `NaN`, valid UTF-8) and turn every failure into a ``DownloadError`` a person can
/// act on: malformed JSON names its line and column, a value of the wrong type names its path
/// in the document:
///
/// ```
/// manifestInvalid: "data.durl[2].size": expected a number, found a string ("123")
/// ```
public enum JSONManifest {
    /// The deepest nesting of arrays and objects accepted; deeper input fails with
    /// ``DownloadError/Code/manifestTooLarge``.
    public static let maxDepth = 512

    /// Decodes JSON into `T`.
    ///
    /// Decoding follows `JSONDecoder`'s defaults: keys as written (use `CodingKeys` for
    /// `snake_case`), `URL` from a string, `Data` from Base64, `Decimal` from a number, `Date`
    /// as seconds since 2001-01-01. Integers are read exactly from the JSON text, so 64-bit
    /// identifiers keep every digit.
    ///
    /// - Parameters:
    ///   - type: The type to decode.
    ///   - data: The JSON text, UTF-8 (a byte-order mark is skipped; UTF-16 with a byte-order
    ///     mark is accepted too).
    ///   - limit: The largest input accepted, in bytes. Default: 32 MiB.
    /// - Throws: ``DownloadError`` with ``DownloadError/Code/manifestTooLarge`` when `data` is
    ///   over `limit` or nests deeper than ``maxDepth``; ``DownloadError/Code/manifestInvalid``
    ///   for malformed JSON (with line and column) or JSON that does not match `T` (with the
    ///   path of the offending value, e.g. `"data.durl[2].size": expected a number, found a
    ///   string`). A ``DownloadError`` thrown by `T`'s own `init(from:)` is passed on as is.
    public static func decode<T: Decodable>(_ type: T.Type, from data: Data, limit: Int = 32 << 20) throws(DownloadError) -> T {
        let node = try parseNode(data, limit: limit)
        do {
            return try JSONNodeDecoder(node: node, codingPath: []).decodeValue(T.self)
        } catch let error as DecodingError {
            throw DownloadError(.manifestInvalid, describe(error))
        } catch let error as DownloadError {
            throw error
        } catch {
            throw DownloadError(.manifestInvalid, "the JSON could not be decoded as \(T.self): \(error)")
        }
    }

    /// Parses JSON into a loosely typed ``JSONValue``, for plugins that probe a document
    /// before (or instead of) decoding it into types of their own.
    ///
    /// Numbers become `Double`: integers beyond 2^53 lose precision. Use
    /// ``decode(_:from:limit:)`` with an integer field to read large identifiers exactly.
    ///
    /// - Throws: ``DownloadError`` with ``DownloadError/Code/manifestTooLarge`` when `data` is
    ///   over `limit` or nests deeper than ``maxDepth``, ``DownloadError/Code/manifestInvalid``
    ///   for malformed JSON, with line and column.
    public static func parse(_ data: Data, limit: Int = 32 << 20) throws(DownloadError) -> JSONValue {
        try parseNode(data, limit: limit).value
    }

    // MARK: - Internals

    static func parseNode(_ data: Data, limit: Int) throws(DownloadError) -> JSONNode {
        if data.count > limit {
            throw DownloadError(
                .manifestTooLarge,
                "the JSON document is \(data.count) bytes, over the limit of \(limit) bytes"
            )
        }
        var data = data
        if data.count >= 2, data.starts(with: [0xFE, 0xFF]) || data.starts(with: [0xFF, 0xFE]) {
            let bigEndian = data.first == 0xFE
            guard let text = String(data: data.dropFirst(2), encoding: bigEndian ? .utf16BigEndian : .utf16LittleEndian)
            else {
                throw DownloadError(.manifestInvalid, "the JSON is malformed: it starts with a UTF-16 byte-order mark but is not valid UTF-16")
            }
            data = Data(text.utf8)
        }
        let result: Result<JSONNode, JSONSyntaxError> = data.withUnsafeBytes { bytes in
            var parser = JSONParser(bytes: bytes)
            return Result { () throws(JSONSyntaxError) in try parser.parseDocument() }
        }
        switch result {
        case .success(let node):
            return node
        case .failure(let error):
            throw error.downloadError(in: data)
        }
    }

    /// `"data.durl[2].size": expected a number, found a string ("x")`.
    static func describe(_ error: DecodingError) -> String {
        switch error {
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context):
            return "\(path(context.codingPath)): \(context.debugDescription)"
        case .keyNotFound(let key, let context):
            return "\(path(context.codingPath + [key])): the required key \(JSONNode.quoted(key.stringValue)) is missing"
        @unknown default:
            return "the JSON does not match the expected structure: \(error)"
        }
    }

    /// `"data.durl[2].size"`; `(top level)` for the empty path; keys that are not plain names
    /// in brackets, `data["a.b"]`.
    static func path(_ codingPath: [any CodingKey]) -> String {
        var text = ""
        var quotedKey = false
        for key in codingPath {
            if let index = key.intValue, key is JSONIndexKey || key.stringValue == "Index \(index)" {
                text += "[\(index)]"
            } else if !key.stringValue.isEmpty,
                key.stringValue.unicodeScalars.allSatisfy({ $0.isASCII && ($0.properties.isAlphabetic || $0.properties.numericType != nil || $0 == "_" || $0 == "-") })
            {
                text += text.isEmpty ? key.stringValue : "." + key.stringValue
            } else {
                text += "[\(JSONNode.quoted(key.stringValue))]"
                quotedKey = true
            }
        }
        if text.isEmpty { return "(top level)" }
        return quotedKey ? text : "\"\(text)\""
    }
}

// MARK: - JSONValue

/// A JSON value without a schema: what ``JSONManifest/parse(_:limit:)`` returns.
///
/// ```swift
/// let answer = try JSONManifest.parse(data)
/// guard answer["code"]?.int == 0 else { … }
/// let firstURL = answer["data"]?["durl"]?[0]?["url"]?.string
/// ```
///
/// It is `Codable` too, so a `Decodable` type can keep a part of a document it does not model.
public enum JSONValue: Sendable, Hashable, Codable {
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number. Integers beyond 2^53 lose precision.
    case number(Double)
    /// A string.
    case string(String)
    /// An array.
    case array([JSONValue])
    /// An object; the order of keys is not kept, and of duplicate keys the last one wins.
    case object([String: JSONValue])

    /// The member `key` of an object, or `nil` when this is not an object or has no such key.
    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members[key]
    }

    /// The element at `index` of an array, or `nil` when this is not an array or the index is
    /// out of range.
    public subscript(index: Int) -> JSONValue? {
        guard case .array(let elements) = self, elements.indices.contains(index) else { return nil }
        return elements[index]
    }

    /// The string, or `nil` when this is not a string.
    public var string: String? {
        guard case .string(let value) = self else { return nil }
        return value
    }

    /// The number as an `Int`, or `nil` when this is not a number or not a whole number that
    /// fits in `Int`.
    public var int: Int? {
        guard case .number(let value) = self else { return nil }
        return Int(exactly: value)
    }

    /// The number, or `nil` when this is not a number.
    public var double: Double? {
        guard case .number(let value) = self else { return nil }
        return value
    }

    /// The boolean, or `nil` when this is not `true` or `false`.
    public var bool: Bool? {
        guard case .bool(let value) = self else { return nil }
        return value
    }

    /// The elements, or `nil` when this is not an array.
    public var array: [JSONValue]? {
        guard case .array(let value) = self else { return nil }
        return value
    }

    /// The members, or `nil` when this is not an object.
    public var object: [String: JSONValue]? {
        guard case .object(let value) = self else { return nil }
        return value
    }

    /// Whether this is `null`.
    public var isNull: Bool {
        self == .null
    }

    /// Decodes any JSON value.
    public init(from decoder: any Decoder) throws {
        if let decoder = decoder as? JSONNodeDecoder {
            self = decoder.node.value
            return
        }
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    /// Encodes the value as the JSON it stands for.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .number(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }
}

extension JSONValue: ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByStringLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral
{
    /// `true` or `false`.
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    /// A number.
    public init(integerLiteral value: Int) { self = .number(Double(value)) }
    /// A number.
    public init(floatLiteral value: Double) { self = .number(value) }
    /// A string.
    public init(stringLiteral value: String) { self = .string(value) }
    /// An array.
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    /// An object; of duplicate keys the last one wins.
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}

// MARK: - Parsed tree

/// The parsed document. Numbers keep their JSON text so that integers decode exactly.
enum JSONNode: Sendable {
    case null
    case bool(Bool)
    case number(String)
    case string(String)
    case array([JSONNode])
    case object([String: JSONNode])

    /// The public, loosely typed form.
    var value: JSONValue {
        switch self {
        case .null: return .null
        case .bool(let value): return .bool(value)
        case .number(let text): return .number(Double(text) ?? .nan)
        case .string(let value): return .string(value)
        case .array(let elements): return .array(elements.map(\.value))
        case .object(let members): return .object(members.mapValues(\.value))
        }
    }

    /// "a string (\"abc\")", "the number 1.5", "null", … for messages.
    var summary: String {
        switch self {
        case .null: return "null"
        case .bool(let value): return "a boolean (\(value))"
        case .number(let text): return "the number \(text.count > 40 ? String(text.prefix(40)) + "…" : text)"
        case .string(let value): return "a string (\(JSONNode.quoted(value)))"
        case .array(let elements): return "an array (\(elements.count) element\(elements.count == 1 ? "" : "s"))"
        case .object: return "an object"
        }
    }

    var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// `text` in quotes, control characters escaped, cut to 40 characters.
    static func quoted(_ text: String) -> String { UntrustedText.quoted(text, limit: 40) }
}

// MARK: - Parser

/// A syntax error at a byte offset.
struct JSONSyntaxError: Error {
    var message: String
    var offset: Int
    var tooDeep = false

    /// The error with line and column (1-based, columns counted in bytes).
    func downloadError(in data: Data) -> DownloadError {
        var line = 1
        var lineStart = 0
        for (index, byte) in data.prefix(offset).enumerated() where byte == UInt8(ascii: "\n") {
            line += 1
            lineStart = index + 1
        }
        let column = offset - lineStart + 1
        return DownloadError(
            tooDeep ? .manifestTooLarge : .manifestInvalid,
            tooDeep
                ? "the JSON nests arrays and objects more than \(JSONManifest.maxDepth) deep, at line \(line), column \(column)"
                : "the JSON is malformed at line \(line), column \(column): \(message)"
        )
    }
}

/// A strict RFC 8259 parser over bytes.
struct JSONParser {
    let bytes: UnsafeRawBufferPointer
    var index = 0
    var depth = 0

    init(bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
        // A UTF-8 byte-order mark.
        if bytes.count >= 3, bytes[0] == 0xEF, bytes[1] == 0xBB, bytes[2] == 0xBF { index = 3 }
    }

    mutating func parseDocument() throws(JSONSyntaxError) -> JSONNode {
        skipWhitespace()
        if index == bytes.count {
            throw JSONSyntaxError(message: bytes.isEmpty ? "the document is empty (0 bytes)" : "the document contains only whitespace", offset: index)
        }
        let value = try parseValue()
        skipWhitespace()
        if index != bytes.count {
            throw error("unexpected \(found) after the JSON value")
        }
        return value
    }

    private var found: String {
        guard index < bytes.count else { return "end of data" }
        let byte = bytes[index]
        if byte >= 0x20 && byte < 0x7F { return "'\(Character(Unicode.Scalar(byte)))'" }
        return "byte 0x\(String(byte, radix: 16, uppercase: true))"
    }

    private func error(_ message: String, at offset: Int? = nil) -> JSONSyntaxError {
        JSONSyntaxError(message: message, offset: offset ?? index)
    }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x0A, 0x0D, 0x09: index += 1
            default: return
            }
        }
    }

    private mutating func parseValue() throws(JSONSyntaxError) -> JSONNode {
        guard index < bytes.count else { throw error("expected a value, found end of data") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
        default: throw error("expected a value, found \(found)")
        }
    }

    private mutating func literal(_ word: StaticString) throws(JSONSyntaxError) {
        let start = index
        let count = word.utf8CodeUnitCount
        guard bytes.count - index >= count,
            UnsafeRawBufferPointer(rebasing: bytes[index..<index + count]).elementsEqual(
                UnsafeRawBufferPointer(start: word.utf8Start, count: count))
        else {
            throw error("expected a value, found \(found)", at: start)
        }
        index += count
    }

    private mutating func enter() throws(JSONSyntaxError) {
        depth += 1
        if depth > JSONManifest.maxDepth {
            throw JSONSyntaxError(message: "nested too deep", offset: index, tooDeep: true)
        }
    }

    private mutating func parseObject() throws(JSONSyntaxError) -> JSONNode {
        try enter()
        index += 1
        var members: [String: JSONNode] = [:]
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            depth -= 1
            return .object(members)
        }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else {
                throw error("expected a key in double quotes, found \(found)")
            }
            let key = try parseString()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else {
                throw error("expected ':' after the key \(JSONNode.quoted(key)), found \(found)")
            }
            index += 1
            skipWhitespace()
            members[key] = try parseValue()
            skipWhitespace()
            guard index < bytes.count else { throw error("unterminated object: expected ',' or '}', found end of data") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            if bytes[index] == UInt8(ascii: "}") {
                index += 1
                depth -= 1
                return .object(members)
            }
            throw error("expected ',' or '}' in an object, found \(found)")
        }
    }

    private mutating func parseArray() throws(JSONSyntaxError) -> JSONNode {
        try enter()
        index += 1
        var elements: [JSONNode] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            depth -= 1
            return .array(elements)
        }
        while true {
            skipWhitespace()
            elements.append(try parseValue())
            skipWhitespace()
            guard index < bytes.count else { throw error("unterminated array: expected ',' or ']', found end of data") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            if bytes[index] == UInt8(ascii: "]") {
                index += 1
                depth -= 1
                return .array(elements)
            }
            throw error("expected ',' or ']' in an array, found \(found)")
        }
    }

    private mutating func parseNumber() throws(JSONSyntaxError) -> String {
        let start = index
        func digit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count, digit(bytes[index]) else { throw error("expected a digit in a number, found \(found)") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
            if index < bytes.count, digit(bytes[index]) { throw error("a number must not have a leading zero", at: start) }
        } else {
            while index < bytes.count, digit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard index < bytes.count, digit(bytes[index]) else { throw error("expected a digit after the decimal point, found \(found)") }
            while index < bytes.count, digit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count, digit(bytes[index]) else { throw error("expected a digit in the exponent, found \(found)") }
            while index < bytes.count, digit(bytes[index]) { index += 1 }
        }
        return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
    }

    private mutating func parseString() throws(JSONSyntaxError) -> String {
        let start = index
        index += 1
        // Fast path: no escapes.
        var scan = index
        while scan < bytes.count {
            let byte = bytes[scan]
            if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte < 0x20 { break }
            scan += 1
        }
        if scan < bytes.count, bytes[scan] == UInt8(ascii: "\"") {
            let raw = UnsafeRawBufferPointer(rebasing: bytes[index..<scan])
            guard let text = String(validating: raw, as: UTF8.self) else {
                throw error("invalid UTF-8 in a string", at: firstInvalidUTF8(from: index, to: scan))
            }
            index = scan + 1
            return text
        }
        // Slow path: escapes.
        var utf8: [UInt8] = []
        utf8.reserveCapacity(scan - index + 16)
        while true {
            guard index < bytes.count else { throw error("unterminated string (it starts at offset \(start))") }
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                guard let text = String(validating: utf8, as: UTF8.self) else {
                    throw error("invalid UTF-8 in a string", at: firstInvalidUTF8(from: start + 1, to: index))
                }
                index += 1
                return text
            case UInt8(ascii: "\\"):
                index += 1
                guard index < bytes.count else { throw error("unterminated string (it starts at offset \(start))") }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""): utf8.append(0x22)
                case UInt8(ascii: "\\"): utf8.append(0x5C)
                case UInt8(ascii: "/"): utf8.append(0x2F)
                case UInt8(ascii: "b"): utf8.append(0x08)
                case UInt8(ascii: "f"): utf8.append(0x0C)
                case UInt8(ascii: "n"): utf8.append(0x0A)
                case UInt8(ascii: "r"): utf8.append(0x0D)
                case UInt8(ascii: "t"): utf8.append(0x09)
                case UInt8(ascii: "u"):
                    let scalar = try parseUnicodeEscape()
                    utf8.append(contentsOf: String(Character(scalar)).utf8)
                default:
                    index -= 1
                    throw error("invalid escape '\\\(Character(Unicode.Scalar(escape)))' in a string")
                }
            default:
                if byte < 0x20 {
                    throw error("a control character (0x\(String(byte, radix: 16, uppercase: true))) must be escaped in a string")
                }
                utf8.append(byte)
                index += 1
            }
        }
    }

    /// `XXXX` after `\u`, with a following `\uXXXX` for a surrogate pair.
    private mutating func parseUnicodeEscape() throws(JSONSyntaxError) -> Unicode.Scalar {
        let escapeStart = index - 2
        let high = try hex4()
        if (0xD800...0xDBFF).contains(high) {
            guard bytes.count - index >= 6, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                throw error("unpaired UTF-16 surrogate in a \\u escape", at: escapeStart)
            }
            index += 2
            let low = try hex4()
            guard (0xDC00...0xDFFF).contains(low) else { throw error("unpaired UTF-16 surrogate in a \\u escape", at: escapeStart) }
            return Unicode.Scalar(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))!
        }
        guard let scalar = Unicode.Scalar(high) else {
            throw error("unpaired UTF-16 surrogate in a \\u escape", at: escapeStart)
        }
        return scalar
    }

    private mutating func hex4() throws(JSONSyntaxError) -> UInt32 {
        guard bytes.count - index >= 4 else { throw error("expected four hex digits after \\u") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt32
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
            default: throw error("expected four hex digits after \\u, found \(found)")
            }
            value = value << 4 | digit
            index += 1
        }
        return value
    }

    /// The offset of the first byte that breaks UTF-8 in `start..<end`.
    private func firstInvalidUTF8(from start: Int, to end: Int) -> Int {
        var offset = start
        while offset < end {
            let lead = bytes[offset]
            let length: Int
            switch lead {
            case 0x00...0x7F: length = 1
            case 0xC2...0xDF: length = 2
            case 0xE0...0xEF: length = 3
            case 0xF0...0xF4: length = 4
            default: return offset
            }
            guard offset + length <= end,
                String(validating: UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + length]), as: UTF8.self) != nil
            else { return offset }
            offset += length
        }
        return start
    }
}

// MARK: - Decoder

/// The coding key for an array element: `"Index 2"` with `intValue` 2, as `JSONDecoder` has it.
struct JSONIndexKey: CodingKey {
    var intValue: Int?
    var stringValue: String { "Index \(intValue ?? 0)" }

    init(_ index: Int) { intValue = index }
    init?(stringValue: String) { nil }
    init?(intValue: Int) { self.intValue = intValue }
}

/// A `Decoder` over a parsed ``JSONNode`` whose errors say where and what went wrong.
struct JSONNodeDecoder: Decoder, SingleValueDecodingContainer {
    let node: JSONNode
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(node: JSONNode, codingPath: [any CodingKey]) {
        self.node = node
        self.codingPath = codingPath
    }

    // MARK: Decoder

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .object(let members) = node else {
            throw mismatch([String: Any].self, expected: "an object")
        }
        return KeyedDecodingContainer(JSONKeyedContainer<Key>(members: members, codingPath: codingPath))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .array(let elements) = node else {
            throw mismatch([Any].self, expected: "an array")
        }
        return JSONUnkeyedContainer(elements: elements, codingPath: codingPath)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        self
    }

    // MARK: Values

    /// Decodes `T`, with `JSONDecoder`'s handling of `URL`, `Data` and `Decimal`.
    func decodeValue<T: Decodable>(_ type: T.Type) throws -> T {
        if T.self == JSONValue.self { return node.value as! T }
        if T.self == URL.self {
            let text = try decode(String.self)
            guard let url = URL(string: text) else {
                throw DecodingError.dataCorrupted(.init(codingPath: codingPath, debugDescription: "expected a URL, found \(node.summary)"))
            }
            return url as! T
        }
        if T.self == Data.self {
            let text = try decode(String.self)
            guard let data = Data(base64Encoded: text) else {
                throw DecodingError.dataCorrupted(.init(codingPath: codingPath, debugDescription: "expected Base64 data, found \(node.summary)"))
            }
            return data as! T
        }
        if T.self == Decimal.self {
            guard case .number(let text) = node, let decimal = Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")) else {
                throw mismatch(Decimal.self, expected: "a number")
            }
            return decimal as! T
        }
        return try T(from: self)
    }

    func mismatch(_ type: Any.Type, expected: String) -> DecodingError {
        if node.isNull {
            return .valueNotFound(type, .init(codingPath: codingPath, debugDescription: "expected \(expected), found null"))
        }
        return .typeMismatch(type, .init(codingPath: codingPath, debugDescription: "expected \(expected), found \(node.summary)"))
    }

    func decodeNil() -> Bool { node.isNull }

    func decode(_ type: Bool.Type) throws -> Bool {
        guard case .bool(let value) = node else { throw mismatch(Bool.self, expected: "a boolean (true or false)") }
        return value
    }

    func decode(_ type: String.Type) throws -> String {
        guard case .string(let value) = node else { throw mismatch(String.self, expected: "a string") }
        return value
    }

    func decodeFloat<T: BinaryFloatingPoint & LosslessStringConvertible>(_ type: T.Type) throws -> T {
        guard case .number(let text) = node else { throw mismatch(T.self, expected: "a number") }
        guard let value = T(text), value.isFinite else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: codingPath, debugDescription: "the number \(text) does not fit in \(T.self)"))
        }
        return value
    }

    func decodeInteger<T: FixedWidthInteger>(_ type: T.Type) throws -> T {
        guard case .number(let text) = node else { throw mismatch(T.self, expected: "a number") }
        if let value = T(text) { return value }
        if let double = Double(text), double.isFinite, let value = T(exactly: double) { return value }
        let reason = text.contains(where: { $0 == "." || $0 == "e" || $0 == "E" }) && Double(text).map { $0.rounded() != $0 } == true
            ? "expected a whole number (\(T.self)), found the number \(text)"
            : "expected a number that fits in \(T.self), found the number \(text)"
        throw DecodingError.typeMismatch(T.self, .init(codingPath: codingPath, debugDescription: reason))
    }

    func decode(_ type: Double.Type) throws -> Double { try decodeFloat(Double.self) }
    func decode(_ type: Float.Type) throws -> Float { try decodeFloat(Float.self) }
    func decode(_ type: Int.Type) throws -> Int { try decodeInteger(Int.self) }
    func decode(_ type: Int8.Type) throws -> Int8 { try decodeInteger(Int8.self) }
    func decode(_ type: Int16.Type) throws -> Int16 { try decodeInteger(Int16.self) }
    func decode(_ type: Int32.Type) throws -> Int32 { try decodeInteger(Int32.self) }
    func decode(_ type: Int64.Type) throws -> Int64 { try decodeInteger(Int64.self) }
    func decode(_ type: UInt.Type) throws -> UInt { try decodeInteger(UInt.self) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try decodeInteger(UInt8.self) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try decodeInteger(UInt16.self) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try decodeInteger(UInt32.self) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try decodeInteger(UInt64.self) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try decodeValue(T.self) }
}

/// An object's members, by key.
struct JSONKeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let members: [String: JSONNode]
    let codingPath: [any CodingKey]

    var allKeys: [Key] { members.keys.sorted().compactMap { Key(stringValue: $0) } }

    func contains(_ key: Key) -> Bool { members[key.stringValue] != nil }

    private func decoder(for key: Key) throws -> JSONNodeDecoder {
        guard let node = members[key.stringValue] else {
            throw DecodingError.keyNotFound(
                key, .init(codingPath: codingPath, debugDescription: "no value for the key \(JSONNode.quoted(key.stringValue))"))
        }
        return JSONNodeDecoder(node: node, codingPath: codingPath + [key])
    }

    func decodeNil(forKey key: Key) throws -> Bool { try decoder(for: key).decodeNil() }
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try decoder(for: key).decode(type) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try decoder(for: key).decode(type) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try decoder(for: key).decode(type) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try decoder(for: key).decode(type) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try decoder(for: key).decode(type) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try decoder(for: key).decode(type) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try decoder(for: key).decode(type) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try decoder(for: key).decode(type) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try decoder(for: key).decode(type) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try decoder(for: key).decode(type) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try decoder(for: key).decode(type) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try decoder(for: key).decode(type) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try decoder(for: key).decode(type) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try decoder(for: key).decode(type) }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try decoder(for: key).decodeValue(type) }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws
        -> KeyedDecodingContainer<NestedKey>
    {
        try decoder(for: key).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try decoder(for: key).unkeyedContainer()
    }

    func superDecoder() throws -> any Decoder {
        let key = JSONSuperKey()
        return JSONNodeDecoder(node: members[key.stringValue] ?? .null, codingPath: codingPath + [key])
    }

    func superDecoder(forKey key: Key) throws -> any Decoder {
        JSONNodeDecoder(node: members[key.stringValue] ?? .null, codingPath: codingPath + [key])
    }
}

/// The `"super"` key of `superDecoder()`.
struct JSONSuperKey: CodingKey {
    var stringValue: String { "super" }
    var intValue: Int? { nil }
    init() {}
    init?(stringValue: String) { nil }
    init?(intValue: Int) { nil }
}

/// An array's elements, in order.
struct JSONUnkeyedContainer: UnkeyedDecodingContainer {
    let elements: [JSONNode]
    let codingPath: [any CodingKey]
    private(set) var currentIndex = 0

    init(elements: [JSONNode], codingPath: [any CodingKey]) {
        self.elements = elements
        self.codingPath = codingPath
    }

    var count: Int? { elements.count }
    var isAtEnd: Bool { currentIndex >= elements.count }

    private func decoder<T>(for type: T.Type) throws -> JSONNodeDecoder {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(
                type,
                .init(
                    codingPath: codingPath + [JSONIndexKey(currentIndex)],
                    debugDescription: "expected another element, but the array has only \(elements.count)"
                )
            )
        }
        return JSONNodeDecoder(node: elements[currentIndex], codingPath: codingPath + [JSONIndexKey(currentIndex)])
    }

    private mutating func next<T>(_ body: (JSONNodeDecoder) throws -> T) throws -> T {
        let value = try body(try decoder(for: T.self))
        currentIndex += 1
        return value
    }

    mutating func decodeNil() throws -> Bool {
        guard try decoder(for: Never?.self).decodeNil() else { return false }
        currentIndex += 1
        return true
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try next { try $0.decode(type) } }
    mutating func decode(_ type: String.Type) throws -> String { try next { try $0.decode(type) } }
    mutating func decode(_ type: Double.Type) throws -> Double { try next { try $0.decode(type) } }
    mutating func decode(_ type: Float.Type) throws -> Float { try next { try $0.decode(type) } }
    mutating func decode(_ type: Int.Type) throws -> Int { try next { try $0.decode(type) } }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try next { try $0.decode(type) } }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try next { try $0.decode(type) } }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try next { try $0.decode(type) } }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try next { try $0.decode(type) } }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try next { try $0.decode(type) } }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try next { try $0.decode(type) } }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try next { try $0.decode(type) } }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try next { try $0.decode(type) } }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try next { try $0.decode(type) } }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try next { try $0.decodeValue(type) } }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws
        -> KeyedDecodingContainer<NestedKey>
    {
        try next { try $0.container(keyedBy: type) }
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try next { try $0.unkeyedContainer() }
    }

    mutating func superDecoder() throws -> any Decoder {
        try next { $0 }
    }
}
