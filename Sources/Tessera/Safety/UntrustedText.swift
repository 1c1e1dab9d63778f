/// Text from the network (a manifest, an answer, a file name) made safe to put in a message:
/// no control characters reach a terminal or a log, and no megabyte string fills one.
public enum UntrustedText {
    /// `text` with every character that could steer a terminal or reorder what it shows replaced
    /// by `?` (C0 and C1 controls, DEL, bidirectional overrides and isolates), cut to `limit`
    /// characters, with `…` after a cut when `marksCut`.
    public static func printable(_ text: String, limit: Int = 200, marksCut: Bool = true) -> String {
        var cleaned = String.UnicodeScalarView()
        var count = 0
        for scalar in text.unicodeScalars {
            if count == limit {
                return String(cleaned) + (marksCut ? "…" : "")
            }
            cleaned.append(isUnsafe(scalar) ? "?" : scalar)
            count += 1
        }
        return String(cleaned)
    }

    /// Whether a character must not reach a terminal: C0 and C1 controls, DEL, and the
    /// bidirectional formatting characters (U+200E, U+200F, U+061C, U+202A-U+202E, U+2066-U+2069).
    public static func isUnsafe(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0..<0x20, 0x7F...0x9F, 0x200E, 0x200F, 0x061C, 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }

    /// `text` in double quotes, with quotes, backslashes, line breaks, tabs and other control or
    /// format characters escaped, cut to `limit` characters (`…` after a cut).
    public static func quoted(_ text: String, limit: Int = 200) -> String {
        var result = "\""
        for (count, scalar) in text.unicodeScalars.enumerated() {
            if count == limit {
                result += "…"
                break
            }
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            default:
                if scalar.properties.generalCategory == .control || scalar.properties.generalCategory == .format {
                    result += "\\u{\(String(scalar.value, radix: 16))}"
                } else {
                    result.unicodeScalars.append(scalar)
                }
            }
        }
        return result + "\""
    }
}
