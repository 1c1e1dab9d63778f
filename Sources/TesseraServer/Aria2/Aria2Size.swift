import Foundation

/// aria2's sizes: digits with an optional `K` or `M` (1024-based).
enum Aria2Size {
    static func parse(_ text: String) -> Int64? {
        var digits = text.trimmingCharacters(in: .whitespaces)
        var factor: Int64 = 1
        if let last = digits.last?.uppercased() {
            if last == "K" { factor = 1024 } else if last == "M" { factor = 1024 * 1024 } else if last == "G" { factor = 1024 * 1024 * 1024 }
            if factor > 1 { digits.removeLast() }
        }
        guard !digits.isEmpty, digits.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let value = Int64(digits) else { return nil }
        let (product, overflow) = value.multipliedReportingOverflow(by: factor)
        return overflow ? nil : product
    }
}
