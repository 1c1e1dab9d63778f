import Foundation

/// Trims as `trimmingCharacters(in:)` does, without Foundation's detour through UTF-16 and a new
/// string each time: a document of 100,000 files has every size, hash and URL trimmed, and most
/// have nothing to trim (then the string itself comes back).
struct Trimming: Sendable {
    /// `.whitespacesAndNewlines`.
    static let whitespacesAndNewlines = Trimming(.whitespacesAndNewlines)
    /// `.whitespaces`.
    static let whitespaces = Trimming(.whitespaces)

    private let set: CharacterSet
    /// Whether each ASCII scalar is in the set, asked once.
    private let ascii: [Bool]

    init(_ set: CharacterSet) {
        self.set = set
        ascii = (0..<128).map { set.contains(Unicode.Scalar(UInt8($0))) }
    }

    private func trims(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 128 ? ascii[Int(scalar.value)] : set.contains(scalar)
    }

    /// `text` without the set's characters at either end.
    func callAsFunction(_ text: String) -> String {
        let scalars = text.unicodeScalars
        guard let first = scalars.firstIndex(where: { !trims($0) }) else { return "" }
        var end = scalars.endIndex
        while trims(scalars[scalars.index(before: end)]) { end = scalars.index(before: end) }
        if first == scalars.startIndex, end == scalars.endIndex { return text }
        return String(scalars[first..<end])
    }
}
