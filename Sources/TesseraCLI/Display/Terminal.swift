import Foundation
import Tessera

/// The one way out of the command: every line it writes, to standard output or standard error,
/// in any mode, passes here. Titles, file names, URLs and error messages carry text from the
/// network, so each line is cleaned as it leaves: every character that could steer a terminal
/// or reorder what it shows (C0 and C1 controls, DEL, bidirectional formatting; see
/// `UntrustedText.isUnsafe`) becomes `?`. The command's own cursor movements on the live board
/// are added after the cleaning (`writeRaw`).
package enum Terminal {
    /// `line` made safe for a terminal: one line, nothing that steers the terminal.
    static func clean(_ line: String) -> String {
        guard line.unicodeScalars.contains(where: UntrustedText.isUnsafe) else { return line }
        return UntrustedText.printable(line, limit: .max, marksCut: false)
    }

    /// Each line of `text` cleaned (for the command's own multi-line text: help, reports).
    static func cleanLines(_ text: String) -> String {
        let text = text.hasSuffix("\n") ? text.dropLast() : Substring(text)
        return text.split(separator: "\n", omittingEmptySubsequences: false).map { clean(String($0)) }.joined(separator: "\n")
    }

    /// A line to standard output.
    static func out(_ line: String) {
        FileHandle.standardOutput.write(Data((clean(line) + "\n").utf8))
    }

    /// Lines of the command's own multi-line text to standard output, each cleaned.
    package static func outLines(_ text: String) {
        FileHandle.standardOutput.write(Data((cleanLines(text) + "\n").utf8))
    }

    /// A line to standard error.
    package static func err(_ line: String) {
        FileHandle.standardError.write(Data((clean(line) + "\n").utf8))
    }

    /// Lines of the command's own multi-line text to standard error, each cleaned.
    package static func errLines(_ text: String) {
        FileHandle.standardError.write(Data((cleanLines(text) + "\n").utf8))
    }

    /// Text already cleaned, with the command's own escape sequences (the live board).
    static func writeRaw(_ text: String) {
        FileHandle.standardOutput.write(Data(text.utf8))
    }

    /// A JSON document (one line, or `pretty`). The JSON keeps every string as it is, but the
    /// characters a terminal would act on are written as `\uXXXX` escapes (the same string for a
    /// JSON reader): JSONSerialization escapes C0 controls only.
    static func json(_ object: Any, pretty: Bool = false) throws {
        FileHandle.standardOutput.write(try jsonData(object, pretty: pretty) + Data("\n".utf8))
    }

    /// The JSON of `object` (sorted keys) with the characters a terminal would act on escaped.
    static func jsonData(_ object: Any, pretty: Bool = false) throws -> Data {
        let options: JSONSerialization.WritingOptions = pretty
            ? [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes] : [.sortedKeys, .withoutEscapingSlashes]
        let data = try JSONSerialization.data(withJSONObject: object, options: options)
        let text = String(decoding: data, as: UTF8.self)
        guard text.unicodeScalars.contains(where: UntrustedText.isUnsafe) else { return data }
        var escaped = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            // (Line breaks and tabs are JSON's own whitespace: inside strings they are escaped already.)
            if UntrustedText.isUnsafe(scalar), scalar != "\n", scalar != "\r", scalar != "\t" {
                // Only inside strings (JSON's structure is ASCII printable): an escape there is
                // the same character to a reader.
                let hex = String(scalar.value, radix: 16)
                escaped.append(contentsOf: ("\\u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex).unicodeScalars)
            } else {
                escaped.append(scalar)
            }
        }
        return Data(String(escaped).utf8)
    }
}
