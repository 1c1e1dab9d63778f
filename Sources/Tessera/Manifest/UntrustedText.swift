/// Text from the network (a manifest, an answer, a file name) made safe to put in a message:
/// no control characters reach a terminal or a log, and no megabyte string fills one.
public enum UntrustedText {
    /// `text` with control characters (and DEL) replaced by `?`, cut to `limit` characters, with
    /// `…` after a cut when `marksCut`.
    public static func printable(_ text: String, limit: Int = 200, marksCut: Bool = true) -> String {
        let cleaned = String(text.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7F ? "?" : Character($0) })
        guard cleaned.count > limit else { return cleaned }
        return String(cleaned.prefix(limit)) + (marksCut ? "…" : "")
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
