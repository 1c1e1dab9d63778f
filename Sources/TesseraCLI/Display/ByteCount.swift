import Foundation

/// Sizes and speeds for people, and sizes from people.
package enum ByteCount {
    /// `1.5 MiB`.
    package static func format(_ bytes: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(bytes)
        var unit = 0
        while value >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(bytes) B" : String(format: "%.1f %@", value, units[unit])
    }

    /// `2.3 MiB/s`.
    package static func speed(_ bytesPerSecond: Double) -> String {
        format(Int64(bytesPerSecond)) + "/s"
    }

    /// `1:02:03`, `4:05`, `7s`.
    static func duration(_ duration: Duration) -> String {
        let total = Int(duration.components.seconds)
        if total >= 3600 { return String(format: "%d:%02d:%02d", total / 3600, total / 60 % 60, total % 60) }
        if total >= 60 { return String(format: "%d:%02d", total / 60, total % 60) }
        return "\(total)s"
    }

    /// `500K`, `2M`, `1.5G`, `1048576` → bytes (K = 1024, as curl and aria2c count).
    package static func parse(_ text: String) -> Int64? {
        let trimmed = text.trimmingCharacters(in: .whitespaces).uppercased()
        guard let last = trimmed.last else { return nil }
        let multipliers: [Character: Double] = ["K": 1024, "M": 1024 * 1024, "G": 1024 * 1024 * 1024]
        if let multiplier = multipliers[last] {
            guard let number = Double(trimmed.dropLast()), number > 0 else { return nil }
            return Int64(number * multiplier)
        }
        return Int64(trimmed)
    }
}
