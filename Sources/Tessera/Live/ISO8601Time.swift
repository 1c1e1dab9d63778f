import Foundation

/// Dates as live manifests write them: `#EXT-X-PROGRAM-DATE-TIME` (RFC 8216 §4.3.2.6, ISO 8601
/// with a time zone) and MPD `xs:dateTime` attributes (`availabilityStartTime`, `publishTime`,
/// a `UTCTiming` answer). One parser for both, without `DateFormatter` (text from the network
/// reaches only integer arithmetic that cannot overflow).
public enum ISO8601Time {
    /// Parses `YYYY-MM-DDThh:mm:ss[.fraction][Z|±hh[:mm]]` (a space instead of `T` is taken; no
    /// zone means UTC, as DASH-IF IOP reads MPD times). `nil` for anything else, or a date
    /// outside the years 1 to 9999.
    public static func date(from text: String) -> Date? {
        let bytes = Array(text.utf8.drop { $0 == 0x20 || $0 == 0x09 }.reversed().drop { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }.reversed())
        var index = 0
        func digits(_ count: Int) -> Int? {
            guard index + count <= bytes.count else { return nil }
            var value = 0
            for byte in bytes[index..<index + count] {
                guard byte >= 0x30, byte <= 0x39 else { return nil }
                value = value * 10 + Int(byte - 0x30)
            }
            index += count
            return value
        }
        func expect(_ characters: Set<UInt8>) -> Bool {
            guard index < bytes.count, characters.contains(bytes[index]) else { return false }
            index += 1
            return true
        }
        guard let year = digits(4), expect([0x2D]), let month = digits(2), expect([0x2D]), let day = digits(2),
            expect([0x54, 0x74, 0x20]), let hour = digits(2), expect([0x3A]), let minute = digits(2), expect([0x3A]),
            let second = digits(2)
        else { return nil }
        guard year >= 1, (1...12).contains(month), (1...31).contains(day), hour <= 24, minute <= 59, second <= 60 else { return nil }
        var fraction = 0.0
        if index < bytes.count, bytes[index] == 0x2E || bytes[index] == 0x2C {
            index += 1
            var scale = 0.1
            var any = false
            while index < bytes.count, bytes[index] >= 0x30, bytes[index] <= 0x39 {
                fraction += Double(bytes[index] - 0x30) * scale
                scale /= 10
                any = true
                index += 1
            }
            guard any else { return nil }
        }
        var offset = 0
        if index < bytes.count {
            if bytes[index] == 0x5A || bytes[index] == 0x7A {
                index += 1
            } else if bytes[index] == 0x2B || bytes[index] == 0x2D {
                let sign = bytes[index] == 0x2D ? -1 : 1
                index += 1
                guard let hours = digits(2), hours <= 23 else { return nil }
                var minutes = 0
                if index < bytes.count {
                    _ = expect([0x3A])
                    guard let value = digits(2), value <= 59 else { return nil }
                    minutes = value
                }
                offset = sign * (hours * 3600 + minutes * 60)
            } else {
                return nil
            }
        }
        guard index == bytes.count else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        let seconds = Double(days) * 86_400 + Double(hour * 3600 + minute * 60 + second) + fraction - Double(offset)
        return Date(timeIntervalSince1970: seconds)
    }

    /// `date` as `YYYY-MM-DDThh:mm:ss.sssZ` (milliseconds), as an MPD or a `UTCTiming` answer
    /// writes it.
    public static func string(from date: Date) -> String {
        let milliseconds = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
        var days = milliseconds / 86_400_000
        var rest = milliseconds % 86_400_000
        if rest < 0 {
            rest += 86_400_000
            days -= 1
        }
        let (year, month, day) = civilFromDays(days)
        func two(_ value: Int64) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let millis = rest % 1000
        let text = "\(year)-\(two(Int64(month)))-\(two(Int64(day)))T\(two(rest / 3_600_000)):\(two(rest / 60_000 % 60)):\(two(rest / 1000 % 60))"
        return text + "." + String(String(1000 + millis).dropFirst()) + "Z"
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int64 {
        let y = Int64(month <= 2 ? year - 1 : year)
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let m = Int64(month)
        let dayOfYear = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + Int64(day) - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    static func civilFromDays(_ days: Int64) -> (year: Int64, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = Int(dayOfYear - (153 * mp + 2) / 5 + 1)
        let month = Int(mp < 10 ? mp + 3 : mp - 9)
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
