import Foundation

/// A JSON value, as JSON-RPC requests carry them and responses return them (integers kept
/// exact, unlike `Tessera.JSONValue`, whose numbers are doubles): a `Sendable`
/// stand-in for `Any`, decoded and encoded with Foundation's JSON coders.
public enum RPCValue: Sendable, Hashable, Codable {
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number without a fraction that fits in 64 bits.
    case int(Int64)
    /// Any other number (a non-finite one is encoded as 0).
    case double(Double)
    /// A string.
    case string(String)
    /// An array.
    case array([RPCValue])
    /// An object.
    case object([String: RPCValue])

    /// Decodes any JSON value (integers that fit in 64 bits as ``int(_:)``).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .int(value)
        } else if let value = try? container.decode(Double.self) {
            self = .double(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([RPCValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: RPCValue].self))
        }
    }

    /// Encodes the value as JSON.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .int(let value): try container.encode(value)
        case .double(let value): try container.encode(value.isFinite ? value : 0)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    /// Parses a JSON document.
    public static func parse(_ data: Data) throws -> RPCValue {
        try JSONDecoder().decode(RPCValue.self, from: data)
    }

    /// The compact encoding, keys sorted, slashes unescaped.
    public var data: Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(self)) ?? Data("null".utf8)
    }

    /// ``data`` as text.
    public var text: String { String(decoding: data, as: UTF8.self) }

    /// The string, when this is one.
    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// The integer, when this is one (or a string of digits, as aria2's clients send numbers).
    public var intValue: Int64? {
        switch self {
        case .int(let value): return value
        case .double(let value) where value.rounded() == value && abs(value) < 9e15: return Int64(value)
        case .string(let value): return Int64(value.trimmingCharacters(in: .whitespaces))
        default: return nil
        }
    }

    /// The array, when this is one.
    public var arrayValue: [RPCValue]? {
        if case .array(let value) = self { return value }
        return nil
    }

    /// The object, when this is one.
    public var objectValue: [String: RPCValue]? {
        if case .object(let value) = self { return value }
        return nil
    }

    /// The value as Foundation's JSON objects (`NSNull`, `Bool`, `Int64`, `Double`, `String`,
    /// arrays, dictionaries), for `JSONSerialization`.
    public var foundationObject: Any {
        switch self {
        case .null: NSNull()
        case .bool(let value): value
        case .int(let value): value
        case .double(let value): value
        case .string(let value): value
        case .array(let values): values.map(\.foundationObject)
        case .object(let members): members.mapValues(\.foundationObject)
        }
    }

    /// The member `key` of an object.
    public subscript(key: String) -> RPCValue? {
        objectValue?[key]
    }
}

extension RPCValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral
{
    /// `"text"` as ``string(_:)``.
    public init(stringLiteral value: String) { self = .string(value) }
    /// `1` as ``int(_:)``.
    public init(integerLiteral value: Int64) { self = .int(value) }
    /// `true` as ``bool(_:)``.
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    /// `[…]` as ``array(_:)``.
    public init(arrayLiteral elements: RPCValue...) { self = .array(elements) }
    /// `[key: value]` as ``object(_:)`` (a repeated key keeps its last value).
    public init(dictionaryLiteral elements: (String, RPCValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
    /// `nil` as ``null``.
    public init(nilLiteral: ()) { self = .null }
}
