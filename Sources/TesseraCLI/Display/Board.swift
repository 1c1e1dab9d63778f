import Foundation

/// One line of the live board, as fields that give way by priority when the terminal is narrow:
/// the title is shortened first (its middle, keeping the start and the end), then the ETA goes,
/// then the speed, then the title shrinks to a stub; the line never reaches the terminal's last
/// column, so it never wraps.
struct BoardRow: Equatable {
    var percent: String
    var amount: String
    var rate: String
    var eta: String
    var title: String
    var status: String = ""

    /// The title is not shortened below this many columns before other fields go.
    static let comfortableTitle = 16
    /// Nor below this many at all.
    static let minimumTitle = 6

    /// The row in at most `width - 1` columns (the last column is never written: a terminal
    /// would wrap there).
    func render(width: Int) -> String {
        let room = max(1, width - 1)
        let head = "  \(percent)  "
        let amountField = amount.padding(toLength: max(24, amount.count), withPad: " ", startingAt: 0) + "  "
        let rateField = rate.padding(toLength: 12, withPad: " ", startingAt: 0) + "  "
        let etaField = eta.padding(toLength: 11, withPad: " ", startingAt: 0) + "  "
        let tail = title + status
        // From the fullest layout down: the first whose title keeps at least `minimum` columns.
        let layouts: [(fields: String, minimum: Int)] = [
            (head + amountField + rateField + etaField, Self.comfortableTitle),
            (head + amountField + rateField, Self.comfortableTitle),
            (head + amountField, Self.comfortableTitle),
            (head + amountField, Self.minimumTitle),
            (head + amount + "  ", Self.minimumTitle),
        ]
        for layout in layouts {
            let left = room - TerminalText.width(layout.fields)
            if TerminalText.width(tail) <= left { return layout.fields + tail }
            if left >= layout.minimum { return layout.fields + TerminalText.shortened(tail, to: left) }
        }
        return TerminalText.shortened(head + amount + "  " + tail, to: room, keepingEnd: false)
    }
}

/// Columns on a terminal: the width of text as a terminal shows it, and the terminal's width.
enum TerminalText {
    /// The terminal's width in columns now (read at every redraw, so a resize shows at the next
    /// one), or 100 when standard output is not a terminal that says.
    static func terminalWidth() -> Int {
        var size = winsize()
        guard ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return 100 }
        return Int(size.ws_col)
    }

    /// Columns `text` takes: two for East Asian wide and fullwidth characters and most emoji,
    /// none for combining marks, one otherwise.
    static func width(_ text: String) -> Int {
        var columns = 0
        for scalar in text.unicodeScalars { columns += width(of: scalar) }
        return columns
    }

    static func width(of scalar: Unicode.Scalar) -> Int {
        switch scalar.value {
        case 0x0300...0x036F, 0x200B...0x200F, 0xFE00...0xFE0F: return 0
        case 0x1100...0x115F, 0x2E80...0x303E, 0x3041...0x33FF, 0x3400...0x4DBF, 0x4E00...0x9FFF, 0xA000...0xA4CF,
            0xAC00...0xD7A3, 0xF900...0xFAFF, 0xFE30...0xFE4F, 0xFF00...0xFF60, 0xFFE0...0xFFE6, 0x1F300...0x1F64F,
            0x1F900...0x1F9FF, 0x20000...0x3FFFD:
            return 2
        default: return 1
        }
    }

    /// `text` in at most `columns` columns: when it is longer, its middle gives way to `…`
    /// (a title or a URL says the most at its start and its end), or its end when
    /// `keepingEnd` is false.
    static func shortened(_ text: String, to columns: Int, keepingEnd: Bool = true) -> String {
        guard width(text) > columns else { return text }
        guard columns > 1 else { return columns == 1 ? "…" : "" }
        let characters = Array(text)
        func take(_ slice: some Sequence<Character>, _ budget: Int) -> String {
            var result = "", used = 0
            for character in slice {
                let cost = width(String(character))
                if used + cost > budget { break }
                result.append(character)
                used += cost
            }
            return result
        }
        guard keepingEnd else { return take(characters, columns - 1) + "…" }
        let endBudget = (columns - 1) / 3
        let end = String(take(characters.reversed(), endBudget).reversed())
        return take(characters, columns - 1 - width(end)) + "…" + end
    }

    /// How many rows lines of these widths take on a terminal `columns` wide (a terminal that
    /// reflows, as tmux and most emulators do, wraps the board's old lines when it narrows).
    static func rows(_ widths: [Int], columns: Int) -> Int {
        guard columns > 0 else { return widths.count }
        return widths.reduce(0) { $0 + max(1, ($1 + columns - 1) / columns) }
    }
}
