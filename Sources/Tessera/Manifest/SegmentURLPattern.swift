import Foundation

/// A segment URL with numbered holes, DASH's `$Number$` and `$Time$`: what a
/// ``SegmentList/numbered(_:against:numbering:headers:context:)`` list expands, one segment at a
/// time, instead of keeping a `URL` per segment.
///
/// A plugin substitutes everything that is the same for every segment (DASH's
/// `$RepresentationID$`, `$Bandwidth$`) before it builds the pattern; only the segment's number
/// and time are left as holes.
public struct SegmentURLPattern: Sendable, Hashable, Codable {
    /// How a number is written into a hole.
    public struct NumberFormat: Sendable, Hashable, Codable {
        /// Pad with zeros to this many digits (0: no padding); at most 64.
        public var width: Int
        /// 10, 16 or 8.
        public var radix: Int
        /// Hexadecimal digits in upper case.
        public var uppercase: Bool

        /// Creates a format (`%05d` is `NumberFormat(width: 5)`).
        public init(width: Int = 0, radix: Int = 10, uppercase: Bool = false) {
            self.width = min(max(0, width), 64)
            self.radix = [8, 10, 16].contains(radix) ? radix : 10
            self.uppercase = uppercase
        }

        /// `value` in this format.
        public func format(_ value: Int64) -> String {
            let digits = String(value, radix: radix, uppercase: uppercase)
            guard digits.utf8.count < width else { return digits }
            return String(repeating: "0", count: width - digits.utf8.count) + digits
        }
    }

    /// One piece of the pattern.
    public enum Part: Sendable, Hashable, Codable {
        /// Text copied as it is.
        case text(String)
        /// The segment's number.
        case number(NumberFormat)
        /// The segment's start time (in the manifest's timescale).
        case time(NumberFormat)
    }

    /// The pieces, in order.
    public var parts: [Part]

    /// Creates a pattern.
    public init(_ parts: [Part]) { self.parts = parts }

    /// The text for the segment with `number` and `time`.
    public func expand(number: Int64, time: Int64) -> String {
        var result = ""
        for part in parts {
            switch part {
            case .text(let text): result += text
            case .number(let format): result += format.format(number)
            case .time(let format): result += format.format(time)
            }
        }
        return result
    }

    /// The holes, in order.
    var holes: [Part] { parts.filter { if case .text = $0 { false } else { true } } }
}

/// How the segments of a numbered list are numbered and timed: `count` segments numbered from
/// ``firstNumber``, in runs of one duration (DASH's `SegmentTimeline` `S` elements, or a single
/// run for `@duration`). Every number and time fits in `Int64`; the initializers refuse a
/// numbering that would not.
public struct SegmentNumbering: Sendable, Hashable, Codable {
    /// `count` segments of `duration`, the first starting at `start` (timescale units).
    public struct Run: Sendable, Hashable, Codable {
        /// The start time of the run's first segment.
        public var start: Int64
        /// The duration of each segment.
        public var duration: Int64
        /// How many segments.
        public var count: Int

        /// Creates a run.
        public init(start: Int64, duration: Int64, count: Int) {
            self.start = start
            self.duration = duration
            self.count = count
        }
    }

    /// The number of the first segment.
    public let firstNumber: Int64
    /// The runs, in order.
    public let runs: [Run]
    /// The index after each run's last segment.
    private let ends: [Int]

    /// `count` segments of `duration`, numbered from `firstNumber`, the segment at index `i`
    /// starting at time `i × duration`.
    public init(firstNumber: Int64, count: Int, duration: Int64) throws(DownloadError) {
        try self.init(firstNumber: firstNumber, runs: [Run(start: 0, duration: duration, count: count)])
    }

    /// Segments in `runs`, numbered from `firstNumber`.
    public init(firstNumber: Int64, runs: [Run]) throws(DownloadError) {
        var ends: [Int] = []
        ends.reserveCapacity(runs.count)
        var total = 0
        for run in runs {
            guard run.count >= 0, run.start >= 0, run.duration >= 0 else {
                throw DownloadError(.manifestInvalid, "a segment run has a negative start, duration or count")
            }
            let (last, overflow) = Int64(max(0, run.count - 1)).multipliedReportingOverflow(by: run.duration)
            guard !overflow, last <= Int64.max - run.start else {
                throw DownloadError(.manifestInvalid, "has segment times past 2^63")
            }
            let (sum, countOverflow) = total.addingReportingOverflow(run.count)
            guard !countOverflow else { throw DownloadError(.manifestTooLarge, "has too many segments") }
            total = sum
            ends.append(total)
        }
        guard firstNumber >= 0, total == 0 || Int64(total - 1) <= Int64.max - firstNumber else {
            throw DownloadError(.manifestInvalid, "numbers its segments past 2^63")
        }
        self.firstNumber = firstNumber
        self.runs = runs
        self.ends = ends
    }

    /// How many segments.
    public var count: Int { ends.last ?? 0 }

    /// The number of the segment at `index`.
    public func number(at index: Int) -> Int64 { firstNumber + Int64(index) }

    /// The start time of the segment at `index`.
    public func time(at index: Int) -> Int64 {
        let run = Self.position(of: index, in: ends)
        let before = run == 0 ? 0 : ends[run - 1]
        return runs[run].start + Int64(index - before) * runs[run].duration
    }

    /// The element of `ends` (increasing) whose range holds `index`.
    static func position(of index: Int, in ends: [Int]) -> Int {
        var low = 0, high = ends.count - 1
        while low < high {
            let middle = (low + high) / 2
            if ends[middle] <= index { low = middle + 1 } else { high = middle }
        }
        return low
    }

    private enum CodingKeys: String, CodingKey { case firstNumber, runs }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        do {
            try self.init(
                firstNumber: container.decode(Int64.self, forKey: .firstNumber), runs: container.decode([Run].self, forKey: .runs))
        } catch let error as DownloadError {
            throw DecodingError.dataCorruptedError(forKey: .runs, in: container, debugDescription: error.message)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(firstNumber, forKey: .firstNumber)
        try container.encode(runs, forKey: .runs)
    }
}
