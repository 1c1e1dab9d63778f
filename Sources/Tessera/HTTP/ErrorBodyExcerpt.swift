import Foundation

/// What an error's message quotes of the body of a response that is not a success: its first
/// line of text, tags left out (an HTML error page's `<title>` or heading, a plain text's first
/// line), spaces collapsed, cut to a short excerpt and made printable
/// (``UntrustedText/printable(_:limit:marksCut:)``). A whole error page in a message says
/// nothing more and drowns the line it is on.
enum ErrorBodyExcerpt {
    /// The most characters quoted.
    static let limit = 80

    /// Elements whose content is not text to read: skipped with their tags.
    private static let hiddenElements: Set<String> = ["script", "style"]
    /// Elements that do not break a line (`File <b>x</b> not found` is one line).
    private static let inlineElements: Set<String> = [
        "a", "abbr", "b", "big", "code", "em", "font", "i", "kbd", "small", "span", "strong", "sub", "sup", "tt", "u", "var",
    ]

    /// The first line of text of `body` (read as UTF-8, invalid bytes replaced), or `""` when it
    /// has none. A line that only repeats the status (`404 Not Found`, as nginx's page does, or
    /// the reason alone) is skipped: the message says it already.
    static func line(_ body: some Collection<UInt8>, status: Int, reason: String?) -> String {
        let text = String(decoding: body, as: UTF8.self)
        let redundant = Set([String(status), reason.map { "\(status) \($0)" }, reason].compactMap { $0?.lowercased() })
        for line in lines(of: text) where !redundant.contains(line.lowercased()) {
            return UntrustedText.printable(line, limit: limit)
        }
        return ""
    }

    /// The lines of `text` with tags removed (each tag but an inline one ends a line), their
    /// spaces collapsed, the empty ones left out.
    static func lines(of text: String) -> [String] {
        var lines: [String] = []
        var current = ""
        func endLine() {
            let words = current.split(whereSeparator: { $0.isWhitespace || $0.isNewline })
            if !words.isEmpty { lines.append(words.joined(separator: " ")) }
            current = ""
        }
        var index = text.startIndex
        while index < text.endIndex {
            let character = text[index]
            if character == "<", let close = text[index...].firstIndex(of: ">") {
                let inside = text[text.index(after: index)..<close]
                let name = inside.drop(while: { $0 == "/" || $0 == "!" }).prefix(while: { $0.isLetter || $0.isNumber }).lowercased()
                index = text.index(after: close)
                if !inside.hasPrefix("/"), hiddenElements.contains(name) {
                    // Skipped to its end tag (or to the end of what was kept of the body).
                    if let end = text[index...].range(of: "</\(name)", options: .caseInsensitive) {
                        index = text[end.upperBound...].firstIndex(of: ">").map { text.index(after: $0) } ?? text.endIndex
                    } else {
                        index = text.endIndex
                    }
                    endLine()
                } else if !inlineElements.contains(name) {
                    endLine()
                }
                continue
            }
            if character.isNewline { endLine() } else { current.append(character) }
            index = text.index(after: index)
        }
        endLine()
        return lines
    }
}
