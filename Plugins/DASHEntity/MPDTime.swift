/// Exact MPD timing: spans in nanoseconds, held in 128 bits, so that a period's length times a
/// timescale divided by a segment duration is computed without rounding (a 30 s period of
/// 2 s segments is 15 segments, never 16 because of a floating-point residue).
enum MPDTime {
    /// Nanoseconds in a second.
    static let nanosecondsPerSecond: Int128 = 1_000_000_000

    /// Parses an `xs:duration` as MPDs write it (`PT1H2M3.5S`, `P1DT2H`, `PT0S`,
    /// `P0Y0M0DT0H3M30.000S`) into nanoseconds.
    ///
    /// Years count 365 days and months 30 days, as dash.js counts them. Fractions are accepted
    /// on every component and kept to the nanosecond. Returns `nil` for anything malformed,
    /// negative, or absurdly long (more than 10^20 of a unit).
    static func parseDuration(_ text: String) -> Int128? {
        let bytes = Array(text.utf8.drop(while: isSpace).reversed().drop(while: isSpace).reversed())
        var index = 0
        guard bytes.first == UInt8(ascii: "P") else { return nil }
        index += 1
        var total: Int128 = 0
        var inTime = false
        var sawComponent = false
        var sawTimeComponent = false
        var lastOrder = -1
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "T") {
                guard !inTime else { return nil }
                inTime = true
                index += 1
                continue
            }
            var whole: Int128 = 0
            var wholeDigits = 0
            while index < bytes.count, let digit = digitValue(bytes[index]) {
                whole = whole * 10 + Int128(digit)
                wholeDigits += 1
                guard whole <= 100_000_000_000_000_000_000 else { return nil }
                index += 1
            }
            var fraction: Int128 = 0
            var fractionScale: Int128 = 1
            var fractionDigits = 0
            if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
                index += 1
                while index < bytes.count, let digit = digitValue(bytes[index]) {
                    if fractionDigits < 9 {
                        fraction = fraction * 10 + Int128(digit)
                        fractionScale *= 10
                    }
                    fractionDigits += 1
                    index += 1
                }
            }
            guard wholeDigits + fractionDigits > 0, index < bytes.count else { return nil }
            let designator = bytes[index]
            index += 1
            let unit: (seconds: Int128, order: Int)
            switch (inTime, designator) {
            case (false, UInt8(ascii: "Y")): unit = (365 * 86_400, 0)
            case (false, UInt8(ascii: "M")): unit = (30 * 86_400, 1)
            case (false, UInt8(ascii: "W")): unit = (7 * 86_400, 2)
            case (false, UInt8(ascii: "D")): unit = (86_400, 3)
            case (true, UInt8(ascii: "H")): unit = (3_600, 4)
            case (true, UInt8(ascii: "M")): unit = (60, 5)
            case (true, UInt8(ascii: "S")): unit = (1, 6)
            default: return nil
            }
            guard unit.order > lastOrder else { return nil }
            lastOrder = unit.order
            let unitNanoseconds = unit.seconds * nanosecondsPerSecond
            total += whole * unitNanoseconds + fraction * unitNanoseconds / fractionScale
            sawComponent = true
            if inTime { sawTimeComponent = true }
        }
        guard sawComponent, !inTime || sawTimeComponent else { return nil }
        return total
    }

    /// `ceil(numerator / denominator)` for a non-negative numerator and a positive denominator.
    static func ceilDivide(_ numerator: Int128, _ denominator: Int128) -> Int128 {
        precondition(denominator > 0)
        guard numerator > 0 else { return 0 }
        return (numerator + denominator - 1) / denominator
    }

    /// `a × b`, or `nil` when it does not fit in 128 bits.
    static func product(_ a: Int128, _ b: Int128) -> Int128? {
        let (value, overflow) = a.multipliedReportingOverflow(by: b)
        return overflow ? nil : value
    }

    /// `a + b`, or `nil` when it does not fit in 128 bits.
    static func sum(_ a: Int128, _ b: Int128) -> Int128? {
        let (value, overflow) = a.addingReportingOverflow(b)
        return overflow ? nil : value
    }

    /// A duration for people and metadata: `1h02m03.500s`, `9s`.
    static func describe(_ nanoseconds: Int128) -> String {
        let milliseconds = nanoseconds / 1_000_000
        let hours = milliseconds / 3_600_000
        let minutes = milliseconds / 60_000 % 60
        let seconds = milliseconds / 1000 % 60
        let rest = milliseconds % 1000
        var text = ""
        if hours > 0 { text += "\(hours)h" }
        if hours > 0 || minutes > 0 { text += hours > 0 && minutes < 10 ? "0\(minutes)m" : "\(minutes)m" }
        let secondsText = (hours > 0 || minutes > 0) && seconds < 10 ? "0\(seconds)" : "\(seconds)"
        text += rest == 0 ? "\(secondsText)s" : "\(secondsText).\(String(1000 + rest).dropFirst())s"
        return text
    }

    private static func isSpace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
    }

    private static func digitValue(_ byte: UInt8) -> Int? {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") ? Int(byte - UInt8(ascii: "0")) : nil
    }
}
