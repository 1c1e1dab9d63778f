import Foundation
import Testing

@testable import MetalinkEntity

/// The plugin's trimming is Foundation's `trimmingCharacters(in:)`, character for character.
@Suite struct MetalinkTrimmingTests {
    @Test func trimsAsFoundationDoes() {
        let spaces = ["", " ", "\t", "\n", "\r\n", "\u{0B}", "\u{0C}", "\u{85}", "\u{A0}", "\u{2003}", "\u{3000}", "\u{2028}", "\u{200B}", "\u{FEFF}", "\u{1680}"]
        let cores = ["", "a", "http://e.example/a b", "é", "\u{301}", "日本", "🙂", "1 2", "\u{0}"]
        for (set, trimming) in [
            (CharacterSet.whitespacesAndNewlines, Trimming.whitespacesAndNewlines), (CharacterSet.whitespaces, Trimming.whitespaces),
        ] {
            for before in spaces {
                for after in spaces {
                    for core in cores {
                        let text = before + after + core + after + before
                        #expect(trimming(text) == text.trimmingCharacters(in: set), "\(Array(text.unicodeScalars))")
                    }
                }
            }
        }
    }
}
