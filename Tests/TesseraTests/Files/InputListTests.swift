import Testing
@testable import Tessera

/// The lines of an input list (`tessera get -i FILE`), split on bytes for ASCII and as
/// `Character`s otherwise, the same either way.
@Suite struct InputListTests {
    /// The rule, as `Character`s see lines and spaces.
    private func reference(_ text: String) -> [String] {
        text.split(whereSeparator: \.isNewline).compactMap { line in
            guard let first = line.firstIndex(where: { !$0.isWhitespace }),
                let last = line.lastIndex(where: { !$0.isWhitespace }), line[first] != "#"
            else { return nil }
            return String(line[first...last])
        }
    }

    @Test func linesCommentsAndSpacesAsAUserWritesThem() {
        let text = "# a comment\n  https://a/1 \t\r\nhttps://a/2\r\r\n\n\t#indented comment\nplayurl:1 # not a comment here\n\u{0B}\u{0C}last"
        #expect(InputList.lines(Array(text.utf8)) == ["https://a/1", "https://a/2", "playurl:1 # not a comment here", "last"])
        #expect(InputList.lines([]) == [])
        #expect(InputList.lines(Array(" \n\t\n".utf8)) == [])
    }

    @Test func anyListReadsAsCharactersWouldReadIt() {
        var generator = SystemRandomNumberGenerator()
        let pieces = ["a", "https://x/y?z=1", " ", "\t", "\n", "\r", "\r\n", "\u{0B}", "\u{0C}", "#", "é", "\u{2028}", "\u{85}", "\u{A0}", "😀"]
        for round in 0..<500 {
            // Half the rounds ASCII only (split on bytes), half not (split as Characters).
            let allowed = round % 2 == 0 ? pieces.filter { $0.utf8.allSatisfy { $0 < 0x80 } } : pieces
            let text = (0..<Int.random(in: 0..<40, using: &generator)).map { _ in allowed.randomElement(using: &generator)! }.joined()
            #expect(InputList.lines(Array(text.utf8)) == reference(text), "\(text.debugDescription)")
        }
    }
}
