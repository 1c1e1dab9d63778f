import Foundation
import Tessera

/// The attribute list of an HLS tag (RFC 8216 §4.2): `NAME=VALUE` pairs separated by commas,
/// where a value is a quoted string (`"…"`, which may hold commas), a hexadecimal sequence
/// (`0x…`), a decimal integer or float, an enumerated string or a resolution (`1280x720`).
///
/// ```swift
/// let list = try HLSAttributeList(parsing: #"BANDWIDTH=1280000,CODECS="avc1.4d401f,mp4a.40.2""#,
///                                 tag: "#EXT-X-STREAM-INF", line: 3)
/// try list.integer("BANDWIDTH")   // 1280000
/// list["CODECS"]                  // "avc1.4d401f,mp4a.40.2"
/// ```
///
/// Unknown attributes are kept and ignored by the parser; the first of two attributes with the
/// same name wins. Malformed lists and values throw ``DownloadError/Code/manifestInvalid``
/// naming the tag and the line.
package struct HLSAttributeList: Sendable, Hashable {
    /// One attribute's value as written.
    package struct Value: Sendable, Hashable {
        /// The text, without the quotes of a quoted string.
        package var text: String
        /// Whether the value was a quoted string.
        package var isQuoted: Bool
    }

    /// The attributes by name.
    package private(set) var values: [String: Value]
    /// The names in the order they appear.
    package private(set) var names: [String]
    /// The tag the list belongs to (for messages), e.g. `#EXT-X-KEY`.
    package let tag: String
    /// The line of the playlist it is on, counted from 1.
    package let line: Int

    /// Parses the text after a tag's colon.
    package init(parsing text: Substring, tag: String, line: Int) throws(DownloadError) {
        self.tag = tag
        self.line = line
        values = [:]
        names = []
        let scalars = Array(text.unicodeScalars)
        var index = 0
        func malformed(_ why: String) -> DownloadError {
            DownloadError(.manifestInvalid, "line \(line): the attribute list of \(tag) \(why)")
        }
        func skipSpaces() {
            while index < scalars.count, scalars[index] == " " || scalars[index] == "\t" { index += 1 }
        }
        while true {
            skipSpaces()
            if index >= scalars.count { break }
            // NAME
            var name = String.UnicodeScalarView()
            while index < scalars.count, scalars[index] != "=" {
                let scalar = scalars[index]
                if scalar == "," || scalar == "\"" {
                    throw malformed("has an attribute without a value near \"\(Self.excerpt(String(name)))\"")
                }
                name.append(scalar)
                index += 1
            }
            let trimmedName = String(name).trimmingCharacters(in: .whitespaces)
            guard index < scalars.count else {
                throw malformed("ends in an attribute without a value (\"\(Self.excerpt(String(name)))\")")
            }
            guard !trimmedName.isEmpty else { throw malformed("has a value without an attribute name") }
            index += 1  // "="
            // VALUE
            var value = String.UnicodeScalarView()
            var quoted = false
            if index < scalars.count, scalars[index] == "\"" {
                quoted = true
                index += 1
                while index < scalars.count, scalars[index] != "\"" {
                    value.append(scalars[index])
                    index += 1
                }
                guard index < scalars.count else {
                    throw malformed("has an unterminated quoted string for \(trimmedName)")
                }
                index += 1  // closing quote
                skipSpaces()
                if index < scalars.count, scalars[index] != "," {
                    throw malformed("has text after the quoted value of \(trimmedName)")
                }
            } else {
                while index < scalars.count, scalars[index] != "," {
                    value.append(scalars[index])
                    index += 1
                }
            }
            let text = quoted ? String(value) : String(value).trimmingCharacters(in: .whitespaces)
            if values[trimmedName] == nil {
                values[trimmedName] = Value(text: text, isQuoted: quoted)
                names.append(trimmedName)
            }
            if index < scalars.count { index += 1 }  // ","
        }
    }

    /// The text of the attribute `name`, quoted or not.
    package subscript(name: String) -> String? { values[name]?.text }

    /// The attribute's text, or ``DownloadError/Code/manifestInvalid`` when it is missing or empty.
    package func required(_ name: String) throws(DownloadError) -> String {
        guard let text = values[name]?.text, !text.isEmpty else {
            throw DownloadError(.manifestInvalid, "line \(line): \(tag) has no \(name) attribute, which it requires")
        }
        return text
    }

    /// A decimal-integer attribute (`BANDWIDTH=1280000`); `nil` when absent.
    package func integer(_ name: String) throws(DownloadError) -> Int? {
        guard let text = values[name]?.text else { return nil }
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let value = Int(text) else {
            throw invalid(name, text, "a decimal integer")
        }
        return value
    }

    /// A decimal-floating-point attribute (`FRAME-RATE=29.97`); `nil` when absent.
    package func decimal(_ name: String) throws(DownloadError) -> Double? {
        guard let text = values[name]?.text else { return nil }
        guard let value = Double(text), value.isFinite else { throw invalid(name, text, "a decimal number") }
        return value
    }

    /// A decimal-resolution attribute (`RESOLUTION=1280x720`) as width and height; `nil` when absent.
    package func resolution(_ name: String) throws(DownloadError) -> (width: Int, height: Int)? {
        guard let text = values[name]?.text else { return nil }
        let parts = text.split(separator: "x", omittingEmptySubsequences: false)
        guard parts.count == 2, parts.allSatisfy({ !$0.isEmpty && $0.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 } }),
            let width = Int(parts[0]), let height = Int(parts[1])
        else { throw invalid(name, text, "a resolution such as 1280x720") }
        return (width, height)
    }

    /// An enumerated `YES`/`NO` attribute; `false` when absent.
    package func flag(_ name: String) -> Bool { values[name]?.text == "YES" }

    /// A hexadecimal-sequence attribute (`IV=0x0123…`) as big-endian bytes, left-padded with
    /// zeros to `count` bytes; `nil` when absent.
    package func hexBytes(_ name: String, count: Int) throws(DownloadError) -> [UInt8]? {
        guard let text = values[name]?.text else { return nil }
        guard text.hasPrefix("0x") || text.hasPrefix("0X") else {
            throw invalid(name, text, "a hexadecimal sequence starting with 0x")
        }
        var digits = Array(text.utf8.dropFirst(2))
        guard !digits.isEmpty, digits.count <= count * 2 else {
            throw invalid(name, text, "a hexadecimal sequence of at most \(count * 2) digits")
        }
        if digits.count % 2 == 1 { digits.insert(0x30, at: 0) }
        var bytes = [UInt8](repeating: 0, count: count - digits.count / 2)
        var position = 0
        while position < digits.count {
            guard let high = Self.hexValue(digits[position]), let low = Self.hexValue(digits[position + 1]) else {
                throw invalid(name, text, "a hexadecimal sequence")
            }
            bytes.append(high << 4 | low)
            position += 2
        }
        return bytes
    }

    private func invalid(_ name: String, _ text: String, _ expected: String) -> DownloadError {
        DownloadError(.manifestInvalid, "line \(line): \(tag) \(name) is not \(expected): \"\(Self.excerpt(text))\"")
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 0x30...0x39: byte - 0x30
        case 0x41...0x46: byte - 0x41 + 10
        case 0x61...0x66: byte - 0x61 + 10
        default: nil
        }
    }

    static func excerpt(_ text: String) -> String { UntrustedText.printable(text, limit: 80) }
}

/// The lines of a playlist, numbered from 1, without their `\n` or `\r\n` ending; read lazily
/// so a large document is never split into an array of lines.
struct HLSLines: Sequence {
    let text: String

    struct Iterator: IteratorProtocol {
        let text: String
        var position: String.Index
        var number = 0

        mutating func next() -> (number: Int, text: Substring)? {
            guard position < text.endIndex else { return nil }
            number += 1
            let utf8 = text.utf8
            let end = utf8[position...].firstIndex(of: 0x0A) ?? text.endIndex
            var lineEnd = end
            if lineEnd > position, utf8[utf8.index(before: lineEnd)] == 0x0D { lineEnd = utf8.index(before: lineEnd) }
            let line = text[position..<lineEnd]
            position = end < text.endIndex ? text.utf8.index(after: end) : end
            return (number, line)
        }
    }

    func makeIterator() -> Iterator { Iterator(text: text, position: text.startIndex) }
}

/// What a playlist line is.
enum HLSLine {
    /// A blank line or a comment (`#` not followed by `EXT`).
    case ignorable
    /// A tag: its name (with `#`) and the text after its colon, if any.
    case tag(name: Substring, value: Substring?)
    /// A URI.
    case uri(Substring)

    init(_ line: Substring) {
        // Byte by byte: every delimiter is ASCII, so the indices found are character boundaries.
        let utf8 = line.utf8
        let space = UInt8(ascii: " "), tab = UInt8(ascii: "\t")
        guard let start = utf8.firstIndex(where: { $0 != space && $0 != tab }) else {
            self = .ignorable
            return
        }
        let trimmed = line[start...]
        if trimmed.utf8.starts(with: "#EXT".utf8) {
            if let colon = trimmed.utf8.firstIndex(of: UInt8(ascii: ":")) {
                self = .tag(name: trimmed[..<colon], value: trimmed[trimmed.utf8.index(after: colon)...])
            } else {
                self = .tag(name: Self.trimTrailing(trimmed), value: nil)
            }
        } else if trimmed.utf8.first == UInt8(ascii: "#") {
            self = .ignorable
        } else {
            self = .uri(Self.trimTrailing(trimmed))
        }
    }

    /// `text` without the spaces and tabs around it; other white space (rare) is trimmed as
    /// Foundation does.
    static func trimmed(_ text: Substring) -> Substring {
        let utf8 = text.utf8
        guard let first = utf8.first, let last = utf8.last else { return text }
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || (0x09...0x0D).contains(byte) || byte >= 0x80 }
        guard isSpace(first) || isSpace(last) else { return text }
        return Substring(text.trimmingCharacters(in: .whitespaces))
    }

    private static func trimTrailing(_ text: Substring) -> Substring {
        guard let last = text.utf8.lastIndex(where: { $0 != UInt8(ascii: " ") && $0 != UInt8(ascii: "\t") }) else {
            return text[text.startIndex..<text.startIndex]
        }
        return text[...last]
    }
}
