/// A `SegmentTemplate` URL template (ISO/IEC 23009-1 §5.3.9.4.4), parsed once and expanded for
/// every segment.
///
/// Identifiers: `$RepresentationID$`, `$Number$`, `$Bandwidth$`, `$Time$` and `$$` (a literal
/// dollar). `$Number$`, `$Bandwidth$` and `$Time$` take a printf format tag, `%0<width>d`
/// (`$Number%05d$` gives `00042`) or `%d`; like dash.js, the conversions `i`, `u` (decimal),
/// `x`, `X` (hexadecimal) and `o` (octal) are accepted too. Anything else (an unknown
/// identifier, `$SubNumber$`, an unterminated `$`, another format) is refused, because a URL
/// with a stray `$Foo$` in it can only fail later, on the server.
struct URLTemplate: Sendable, Hashable {
    /// How a number is written.
    struct NumberFormat: Sendable, Hashable {
        /// Pad with zeros to this many digits (0: no padding).
        var width = 0
        /// 10, 16 or 8.
        var radix = 10
        /// Hexadecimal digits in upper case.
        var uppercase = false

        func format(_ value: Int64) -> String {
            let digits = String(value, radix: radix, uppercase: uppercase)
            guard digits.utf8.count < width else { return digits }
            return String(repeating: "0", count: width - digits.utf8.count) + digits
        }
    }

    /// One piece of the template.
    enum Part: Sendable, Hashable {
        case literal(String)
        case representationID
        case number(NumberFormat)
        case bandwidth(NumberFormat)
        case time(NumberFormat)
    }

    /// The widest `%0<width>d` accepted.
    static let maxWidth = 64

    /// The template as written.
    let text: String
    /// The pieces, in order.
    let parts: [Part]

    /// Parses `text`; the error is a phrase that completes "the template … ".
    init(_ text: String) throws(TemplateError) {
        self.text = text
        var parts: [Part] = []
        var literal = ""
        var rest = Substring(text)
        while let dollar = rest.firstIndex(of: "$") {
            literal += rest[..<dollar]
            let afterOpening = rest.index(after: dollar)
            guard let closing = rest[afterOpening...].firstIndex(of: "$") else {
                throw TemplateError("has a \"$\" that is never closed")
            }
            let identifier = rest[afterOpening..<closing]
            rest = rest[rest.index(after: closing)...]
            if identifier.isEmpty {
                literal += "$"
                continue
            }
            if !literal.isEmpty {
                parts.append(.literal(literal))
                literal = ""
            }
            let name: Substring, format: NumberFormat?
            if let percent = identifier.firstIndex(of: "%") {
                name = identifier[..<percent]
                format = try Self.parseFormat(identifier[percent...], identifier: identifier)
            } else {
                name = identifier
                format = nil
            }
            switch name {
            case "RepresentationID":
                guard format == nil else { throw TemplateError("gives $RepresentationID$ a format tag, which only numbers take") }
                parts.append(.representationID)
            case "Number": parts.append(.number(format ?? NumberFormat()))
            case "Bandwidth": parts.append(.bandwidth(format ?? NumberFormat()))
            case "Time": parts.append(.time(format ?? NumberFormat()))
            case "SubNumber": throw TemplateError("uses $SubNumber$ (sub-segments), which is not supported")
            default: throw TemplateError("uses the unknown identifier $\(identifier)$")
            }
        }
        literal += rest
        if !literal.isEmpty { parts.append(.literal(literal)) }
        self.parts = parts
    }

    private static func parseFormat(_ tag: Substring, identifier: Substring) throws(TemplateError) -> NumberFormat {
        // tag = "%d" | "%0<width><conversion>"
        var body = tag.dropFirst()
        guard let conversion = body.last else { throw TemplateError("has an empty format tag in $\(identifier)$") }
        body = body.dropLast()
        var format = NumberFormat()
        switch conversion {
        case "d", "i", "u": format.radix = 10
        case "x": format.radix = 16
        case "X": format.radix = 16; format.uppercase = true
        case "o": format.radix = 8
        default: throw TemplateError("has the format tag \"\(tag)\" in $\(identifier)$; only %0<width>d is supported")
        }
        if !body.isEmpty {
            guard body.first == "0", body.count > 1, body.dropFirst().allSatisfy(\.isASCIIDigitCharacter),
                let width = Int(body.dropFirst()), width <= maxWidth
            else {
                throw TemplateError("has the format tag \"\(tag)\" in $\(identifier)$; only %0<width>d is supported (width up to \(maxWidth))")
            }
            format.width = width
        }
        return format
    }

    /// Whether the template uses `$Number$`.
    var usesNumber: Bool { parts.contains { if case .number = $0 { true } else { false } } }
    /// Whether the template uses `$Time$`.
    var usesTime: Bool { parts.contains { if case .time = $0 { true } else { false } } }
    /// Whether the template uses `$Bandwidth$`.
    var usesBandwidth: Bool { parts.contains { if case .bandwidth = $0 { true } else { false } } }

    /// The URL reference for one segment. A value the template uses but the caller lacks is
    /// left to ``usesNumber`` and friends to catch beforehand; here it expands to nothing.
    func expand(representationID: String, bandwidth: Int64?, number: Int64? = nil, time: Int64? = nil) -> String {
        var result = ""
        for part in parts {
            switch part {
            case .literal(let text): result += text
            case .representationID: result += representationID
            case .number(let format): result += number.map(format.format) ?? ""
            case .bandwidth(let format): result += bandwidth.map(format.format) ?? ""
            case .time(let format): result += time.map(format.format) ?? ""
            }
        }
        return result
    }
}

/// Why a template was refused: a phrase that completes "the template … ".
struct TemplateError: Error {
    var reason: String
    init(_ reason: String) { self.reason = reason }
}

extension Character {
    fileprivate var isASCIIDigitCharacter: Bool { isASCII && isNumber }
}
