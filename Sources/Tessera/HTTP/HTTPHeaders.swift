/// An ordered list of HTTP header fields with case-insensitive lookup.
public struct HTTPHeaders: Hashable, Sendable, Codable, Sequence, ExpressibleByDictionaryLiteral {
    /// One header field.
    public struct Field: Hashable, Sendable, Codable {
        /// The field name as written.
        public var name: String
        /// The field value, without surrounding white space.
        public var value: String

        /// Creates a field.
        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    /// The fields, in order.
    public private(set) var fields: [Field]

    /// Creates a list from fields.
    public init(_ fields: [Field] = []) {
        self.fields = fields
    }

    public init(dictionaryLiteral elements: (String, String)...) {
        self.fields = elements.map { Field(name: $0.0, value: $0.1) }
    }

    /// Appends a field, keeping any other field of the same name.
    public mutating func add(name: String, value: String) {
        fields.append(Field(name: name, value: value))
    }

    /// Makes room for `count` fields at once (a response's headers: one allocation, not one per
    /// doubling).
    mutating func reserveCapacity(_ count: Int) {
        fields.reserveCapacity(count)
    }

    /// Appends `text` to the value of the last field (obsolete line folding).
    mutating func continueLastValue(with text: String) {
        guard !fields.isEmpty else { return }
        fields[fields.count - 1].value += " " + text
    }

    /// Replaces every field named `name` with one field.
    public mutating func replaceOrAdd(name: String, value: String) {
        remove(name: name)
        add(name: name, value: value)
    }

    /// Removes every field named `name`.
    public mutating func remove(name: String) {
        fields.removeAll { $0.name.caseInsensitiveEquals(name) }
    }

    /// The value of the first field named `name`.
    public subscript(name: String) -> String? {
        fields.first { $0.name.caseInsensitiveEquals(name) }?.value
    }

    /// Every value of the fields named `name`, in order.
    public func values(for name: String) -> [String] {
        fields.filter { $0.name.caseInsensitiveEquals(name) }.map(\.value)
    }

    /// Whether a field named `name` exists.
    public func contains(_ name: String) -> Bool { self[name] != nil }

    /// Whether the list is empty.
    public var isEmpty: Bool { fields.isEmpty }

    public func makeIterator() -> IndexingIterator<[Field]> { fields.makeIterator() }

    /// The first field whose name or value cannot be sent: an empty or non-token name, or a
    /// value with a line break or another control character (header injection).
    var firstInvalidField: Field? {
        fields.first { field in
            field.name.isEmpty || !field.name.utf8.allSatisfy(\.isHTTPTokenByte)
                || field.value.utf8.contains { ($0 < 0x20 && $0 != 0x09) || $0 == 0x7F }
        }
    }
}

extension String {
    /// Whether the two are equal but for the case of ASCII letters (as header names compare).
    func caseInsensitiveEquals(_ other: String) -> Bool {
        let lhs = utf8, rhs = other.utf8
        guard lhs.count == rhs.count else { return false }
        // (Byte by byte in the strings' storage: a lookup compares a name with each field's.)
        let compared = lhs.withContiguousStorageIfAvailable { left in
            rhs.withContiguousStorageIfAvailable { right in
                left.indices.allSatisfy { left[$0] == right[$0] || left[$0].asciiLowercased == right[$0].asciiLowercased }
            }
        }
        if let compared, let compared { return compared }
        return zip(lhs, rhs).allSatisfy { $0.asciiLowercased == $1.asciiLowercased }
    }
}

extension UInt8 {
    var asciiLowercased: UInt8 { (0x41...0x5A).contains(self) ? self | 0x20 : self }

    /// `tchar` of RFC 9110 §5.6.2.
    var isHTTPTokenByte: Bool {
        switch self {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return "!#$%&'*+-.^_`|~".utf8.contains(self)
        }
    }
}
