#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A parsed `Content-Range` value (RFC 9110 §14.4): `bytes 0-499/1234`, `bytes 0-499/*` or
/// `bytes */1234`.
struct ContentRange: Hashable, Sendable {
    /// The first and last byte sent, or `nil` for an unsatisfied range (`*/length`).
    var span: ClosedRange<Int64>?
    /// The complete length of the resource, or `nil` when the server sent `*`.
    var completeLength: Int64?

    /// The largest length believed: 1 EiB, a manifest's bound too (`DownloadManifest.maxTotalBytes`).
    static let maxLength: Int64 = 1 << 60

    init?(_ value: String) {
        var text = Substring(value).trimmingHTTPWhitespace()
        guard text.lowercased().hasPrefix("bytes ") else { return nil }
        text = text.dropFirst(6).trimmingHTTPWhitespace()
        guard let slash = text.firstIndex(of: "/") else { return nil }
        let spanText = text[..<slash], lengthText = text[text.index(after: slash)...]
        if lengthText == "*" {
            completeLength = nil
        } else {
            // (Beyond 1 EiB no length is believed: no sum or end built from it can overflow.)
            guard let length = Int64(decimalDigits: lengthText), length <= Self.maxLength else { return nil }
            completeLength = length
        }
        if spanText == "*" {
            guard completeLength != nil else { return nil }
            span = nil
        } else {
            guard let dash = spanText.firstIndex(of: "-"),
                let first = Int64(decimalDigits: spanText[..<dash]),
                let last = Int64(decimalDigits: spanText[spanText.index(after: dash)...]),
                first <= last, last < Self.maxLength
            else { return nil }
            if let completeLength, last >= completeLength { return nil }
            span = first...last
        }
    }
}

/// HTTP dates (RFC 9110 §5.6.7): IMF-fixdate, and the obsolete RFC 850 and asctime forms a
/// recipient must still accept.
public enum HTTPDate {
    private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]

    /// Seconds since 1970 for an HTTP date, or `nil` when the text is not one.
    public static func parse(_ value: String) -> Int64? {
        if let fixed = parseFixdate(value) { return fixed }
        let words = value.split(whereSeparator: { $0 == " " || $0 == "," }).map(String.init)
        // IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT -> [Sun, 06, Nov, 1994, 08:49:37, GMT]
        if words.count == 6, words[5] == "GMT", let day = Int(words[1]), let month = month(words[2]),
            let year = Int(words[3])
        {
            return make(year: year, month: month, day: day, time: words[4])
        }
        // RFC 850: Sunday, 06-Nov-94 08:49:37 GMT -> [Sunday, 06-Nov-94, 08:49:37, GMT]
        if words.count == 4, words[3] == "GMT" {
            let parts = words[1].split(separator: "-").map(String.init)
            guard parts.count == 3, let day = Int(parts[0]), let month = month(parts[1]), var year = Int(parts[2])
            else { return nil }
            // A two-digit year more than 50 years in the future is in the past century (§5.6.7).
            if year < 100 { year += year < 70 ? 2000 : 1900 }
            return make(year: year, month: month, day: day, time: words[2])
        }
        // asctime: Sun Nov  6 08:49:37 1994 -> [Sun, Nov, 6, 08:49:37, 1994]
        if words.count == 5, let month = month(words[1]), let day = Int(words[2]), let year = Int(words[4]) {
            return make(year: year, month: month, day: day, time: words[3])
        }
        return nil
    }

    /// The common case, IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), read on its 29 bytes.
    private static func parseFixdate(_ value: String) -> Int64? {
        var value = value
        return value.withUTF8 { bytes -> Int64? in
            guard bytes.count == 29, bytes[3] == 0x2C, bytes[4] == 0x20, bytes[7] == 0x20, bytes[11] == 0x20,
                bytes[16] == 0x20, bytes[19] == 0x3A, bytes[22] == 0x3A, bytes[25] == 0x20,
                bytes[26] == 0x47, bytes[27] == 0x4D, bytes[28] == 0x54
            else { return nil }
            func number(_ range: Range<Int>) -> Int? {
                var result = 0
                for index in range {
                    let digit = Int(bytes[index]) - 0x30
                    guard (0...9).contains(digit) else { return nil }
                    result = result * 10 + digit
                }
                return result
            }
            let monthName = String(decoding: UnsafeBufferPointer(rebasing: bytes[8..<11]), as: UTF8.self)
            guard let day = number(5..<7), let month = month(monthName), let year = number(12..<16),
                let hour = number(17..<19), let minute = number(20..<22), let second = number(23..<25)
            else { return nil }
            return make(year: year, month: month, day: day, hour: hour, minute: minute, second: second)
        }
    }

    private static func month(_ name: String) -> Int? {
        months.firstIndex(of: name.lowercased()).map { $0 + 1 }
    }

    private static func make(year: Int, month: Int, day: Int, time: String) -> Int64? {
        let clock = time.split(separator: ":").compactMap { Int($0) }
        guard clock.count == 3 else { return nil }
        return make(year: year, month: month, day: day, hour: clock[0], minute: clock[1], second: clock[2])
    }

    private static func make(year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int) -> Int64? {
        guard (1...31).contains(day), (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second),
            year >= 1970
        else { return nil }
        var parts = tm()
        parts.tm_year = Int32(year - 1900)
        parts.tm_mon = Int32(month - 1)
        parts.tm_mday = Int32(day)
        parts.tm_hour = Int32(hour)
        parts.tm_min = Int32(minute)
        parts.tm_sec = Int32(second)
        let seconds = timegm(&parts)
        return seconds < 0 ? nil : Int64(seconds)
    }

    /// The current time in seconds since 1970.
    static func now() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Int64(spec.tv_sec)
    }
}

/// `Retry-After` (RFC 9110 §10.2.3): delay-seconds or an HTTP date, measured from the
/// response's `Date` when it has one.
enum RetryAfter {
    /// The delay the server asked for, never negative and at most one day.
    static func parse(_ value: String, responseDate: String?) -> Duration? {
        let text = Substring(value).trimmingHTTPWhitespace()
        if let seconds = Int64(decimalDigits: text) {
            return .seconds(min(seconds, 86_400))
        }
        guard let target = HTTPDate.parse(String(text)) else { return nil }
        let reference = responseDate.flatMap(HTTPDate.parse) ?? HTTPDate.now()
        return .seconds(min(max(target - reference, 0), 86_400))
    }
}

/// Monotonic nanoseconds, for intervals measured on the engine thread.
enum MonotonicClock {
    static func nanoseconds() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return UInt64(spec.tv_sec) &* 1_000_000_000 &+ UInt64(spec.tv_nsec)
    }
}

extension Substring {
    /// Without leading and trailing spaces, tabs and line breaks. (`"\r\n"` is one `Character`,
    /// which `isNewline` covers.)
    func trimmingHTTPWhitespace() -> Substring {
        var text = self
        while let first = text.first, first == " " || first == "\t" || first.isNewline { text = text.dropFirst() }
        while let last = text.last, last == " " || last == "\t" || last.isNewline { text = text.dropLast() }
        return text
    }
}

extension Int64 {
    /// Digits only: no sign, no spaces, at most 18 digits (so it cannot overflow).
    init?(decimalDigits text: some StringProtocol) {
        guard !text.isEmpty, text.utf8.count <= 18, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else {
            return nil
        }
        self.init(text)
    }
}

extension Duration {
    /// Whole milliseconds, rounded down, for libcurl's `_MS` options.
    var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }

    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
