/// The inputs of a list file (`tessera get -i FILE`): one per line, spaces and tabs around a line
/// not part of it, empty lines and `#` comments skipped.
///
/// A list of 100,000 URLs is read at once: an ASCII list (nearly every one) is split on its bytes;
/// one with other characters is split as Swift's `Character`s see lines and spaces, so a line
/// ends at every Unicode line end either way.
package enum InputList {
    /// The inputs in `bytes` (UTF-8), in order.
    package static func lines(_ bytes: [UInt8]) -> [String] {
        guard bytes.allSatisfy({ $0 < 0x80 }) else { return lines(String(decoding: bytes, as: UTF8.self)) }
        var lines: [String] = []
        var start = 0
        func take(_ end: Int) {
            var first = start, last = end
            while first < last, bytes[first] == 0x20 || bytes[first] == 0x09 { first += 1 }
            while last > first, bytes[last - 1] == 0x20 || bytes[last - 1] == 0x09 { last -= 1 }
            if first < last, bytes[first] != UInt8(ascii: "#") { lines.append(String(decoding: bytes[first..<last], as: UTF8.self)) }
        }
        // (ASCII line ends: LF, VT, FF, CR; a CR LF is two, with nothing between them.)
        for index in bytes.indices where (0x0A...0x0D).contains(bytes[index]) {
            take(index)
            start = index + 1
        }
        take(bytes.count)
        return lines
    }

    private static func lines(_ text: String) -> [String] {
        var lines: [String] = []
        for line in text.split(whereSeparator: \.isNewline) {
            guard let first = line.firstIndex(where: { !$0.isWhitespace }),
                let last = line.lastIndex(where: { !$0.isWhitespace }), line[first] != "#"
            else { continue }
            lines.append(String(line[first...last]))
        }
        return lines
    }
}
