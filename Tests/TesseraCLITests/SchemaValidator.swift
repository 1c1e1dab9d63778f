import Foundation
import Tessera

extension JSONValue {
    /// Parses a whole document (with Tessera's own JSON reader).
    static func parse(_ text: String) throws -> JSONValue {
        try JSONManifest.parse(Data(text.utf8))
    }

    var arrayValue: [JSONValue] { array ?? [] }
    var stringValue: String? { string }
}

/// Checks a document against the JSON Schema (draft 2020-12) subset the project's schemas use:
/// `type`, `enum`, `required`, `properties`, `additionalProperties` (boolean or schema), `items`,
/// `minItems`, `pattern`, `minimum`, and `$ref` to `#/$defs/...`. Anything else in a schema is
/// refused, so a schema cannot silently use a keyword this does not check.
struct SchemaValidator {
    let root: JSONValue

    private static let known: Set<String> = [
        "$schema", "$id", "$defs", "$ref", "title", "description", "type", "enum", "required", "properties",
        "additionalProperties", "items", "minItems", "pattern", "minimum",
    ]

    /// The problems with `value`, each with its JSON path; empty when it conforms.
    func problems(_ value: JSONValue) -> [String] {
        var problems: [String] = []
        check(value, against: root, at: "$", into: &problems)
        return problems
    }

    /// The problems with `value` against the definition `#/$defs/<name>`.
    func problems(_ value: JSONValue, definition name: String) -> [String] {
        guard let definition = root["$defs"]?[name] else { return ["$: the schema has no definition \"\(name)\""] }
        var problems: [String] = []
        check(value, against: definition, at: "$", into: &problems)
        return problems
    }

    private func check(_ value: JSONValue, against schema: JSONValue, at path: String, into problems: inout [String]) {
        guard case .object(let rules) = schema else { return problems.append("\(path): the schema is not an object") }
        for key in rules.keys where !Self.known.contains(key) {
            problems.append("\(path): the schema uses \"\(key)\", which this validator does not check")
        }
        if let reference = rules["$ref"]?.stringValue {
            guard reference.hasPrefix("#/$defs/"), let target = root["$defs"]?[String(reference.dropFirst(8))] else {
                return problems.append("\(path): unknown $ref \(reference)")
            }
            check(value, against: target, at: path, into: &problems)
        }
        if let type = rules["type"]?.stringValue, !Self.value(value, is: type) {
            problems.append("\(path): expected \(type), got \(value)")
            return
        }
        if case .array(let choices) = rules["enum"], !choices.contains(value) {
            problems.append("\(path): \(value) is not one of \(choices)")
        }
        if case .string(let string) = value, let pattern = rules["pattern"]?.stringValue,
            string.range(of: pattern, options: .regularExpression) == nil {
            problems.append("\(path): \"\(string)\" does not match \(pattern)")
        }
        if case .number(let bound) = rules["minimum"], case .number(let actual) = value, actual < bound {
            problems.append("\(path): \(actual) is below \(bound)")
        }
        if case .array(let items) = value {
            if case .number(let minimum) = rules["minItems"], Double(items.count) < minimum {
                problems.append("\(path): \(items.count) items, at least \(minimum) required")
            }
            if let itemSchema = rules["items"] {
                for (index, item) in items.enumerated() { check(item, against: itemSchema, at: "\(path)[\(index)]", into: &problems) }
            }
        }
        if case .object(let object) = value {
            for case .string(let key) in rules["required"]?.arrayValue ?? [] where object[key] == nil {
                problems.append("\(path): \"\(key)\" is required")
            }
            let properties: [String: JSONValue] = if case .object(let properties) = rules["properties"] { properties } else { [:] }
            for (key, member) in object.sorted(by: { $0.key < $1.key }) {
                if let propertySchema = properties[key] {
                    check(member, against: propertySchema, at: "\(path).\(key)", into: &problems)
                } else if let additional = rules["additionalProperties"] {
                    if additional == .bool(false) {
                        problems.append("\(path): \"\(key)\" is not allowed")
                    } else if case .object = additional {
                        check(member, against: additional, at: "\(path).\(key)", into: &problems)
                    }
                }
            }
        }
    }

    private static func value(_ value: JSONValue, is type: String) -> Bool {
        switch (type, value) {
        case ("object", .object), ("array", .array), ("string", .string), ("boolean", .bool), ("null", .null), ("number", .number):
            true
        case ("integer", .number(let number)):
            // JSON Schema: an integer is a number with no fractional part.
            number.rounded() == number
        default:
            false
        }
    }
}
