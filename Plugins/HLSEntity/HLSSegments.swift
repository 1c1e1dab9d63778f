import Foundation
import Tessera

/// The media segments of a ``HLSMediaPlaylist``, kept compactly: each segment's URI as written
/// (resolved when the segment is read), its range, duration, sequence number and line, with the
/// few encryptions and initialisation sections in tables. A playlist of a million segments costs
/// tens of bytes per segment, not a `URL` and a struct each.
package struct HLSSegments: RandomAccessCollection, Sendable, Hashable {
    /// The playlist's URL, which relative URIs are resolved against, and the text a plain
    /// relative URI is appended to.
    let base: URL
    private let directory: String
    private var text: [UInt8] = []
    private var ends: [UInt32] = []
    private var ranges: [ByteRange?] = []
    private var durations: [Double] = []
    private var sequences: [UInt64] = []
    private var lines: [Int32] = []
    private var titles: [Int: String] = [:]
    private var discontinuities: Set<Int> = []
    private var encryptions: [SegmentEncryption] = []
    private var encryptionNumbers: [Int32] = []
    private var initSections: [HLSInitSection] = []
    private var initSectionNumbers: [Int32] = []
    /// `#EXT-X-PROGRAM-DATE-TIME` of the segments that have one, by index.
    private var programDates: [Int: Date] = [:]
    /// The duration of #EXT-X-GAP segments left out before each index that follows some, and
    /// whether a discontinuity was among them (dates and discontinuity numbers run through).
    private var skipped: [Int: Skip] = [:]
    private var pendingSkip: Skip?

    private struct Skip: Hashable {
        var duration: Double
        var discontinuity: Bool
    }

    init(base: URL, capacity: Int) {
        self.base = base
        directory = URLSafety.directory(of: base)
        ends.reserveCapacity(capacity)
        durations.reserveCapacity(capacity)
        sequences.reserveCapacity(capacity)
        lines.reserveCapacity(capacity)
    }

    package var startIndex: Int { 0 }
    package var endIndex: Int { ends.count }

    package subscript(index: Int) -> HLSSegment {
        HLSSegment(
            url: url(at: index), range: range(at: index), duration: durations[index], title: titles[index],
            mediaSequence: sequences[index], encryption: encryption(at: index), initSection: initSection(at: index),
            isDiscontinuity: discontinuities.contains(index), line: Int(lines[index]), programDateTime: programDates[index])
    }

    /// The duration of the segment at `index`, in seconds.
    package func duration(at index: Int) -> Double { durations[index] }

    /// The media sequence number of the segment at `index`.
    package func mediaSequence(at index: Int) -> UInt64 { sequences[index] }

    /// Whether a discontinuity comes before the segment at `index` (in the playlist, or among
    /// the #EXT-X-GAP segments left out before it).
    package func isDiscontinuity(at index: Int) -> Bool { discontinuities.contains(index) || skipped[index]?.discontinuity == true }

    /// The discontinuity sequence number of every segment: `base` (`#EXT-X-DISCONTINUITY-SEQUENCE`)
    /// plus the discontinuity tags up to it, its own included: a server increments the tag's
    /// value when it removes a segment with a discontinuity (RFC 8216 §6.2.2), so a segment keeps
    /// its number from one reload to the next (as hls.js counts them).
    func discontinuityNumbers(startingAt base: UInt64) -> [UInt64] {
        var number = base
        return indices.map { index in
            if isDiscontinuity(at: index) { number &+= 1 }
            return number
        }
    }

    /// The date of every segment's first sample: its own `#EXT-X-PROGRAM-DATE-TIME`, else the
    /// previous segment's date plus its duration; `nil` before the first date.
    func programDates(startingAt first: Date?) -> [Date?] {
        var date = first
        var previous: Double?
        return indices.map { index in
            if let previous, let current = date { date = current.addingTimeInterval(previous + (skipped[index]?.duration ?? 0)) }
            if let own = programDates[index] { date = own }
            previous = durations[index]
            return date
        }
    }

    /// The URI of the segment at `index`, as written in the playlist.
    package func reference(at index: Int) -> String {
        let start = index == 0 ? 0 : Int(ends[index - 1])
        return String(decoding: text[start..<Int(ends[index])], as: UTF8.self)
    }

    /// The URL of the segment at `index` (checked when the playlist was parsed).
    package func url(at index: Int) -> URL {
        let reference = reference(at: index)
        if URLSafety.isPlainRelative(reference), !directory.isEmpty, let url = URL(string: directory + reference) { return url }
        return (try? URLSafety.resolve(reference, against: base)) ?? base
    }

    /// The byte range of the segment at `index`.
    package func range(at index: Int) -> ByteRange? { ranges.isEmpty ? nil : ranges[index] }

    /// The encryption of the segment at `index`.
    package func encryption(at index: Int) -> SegmentEncryption? {
        guard !encryptionNumbers.isEmpty, encryptionNumbers[index] >= 0 else { return nil }
        return encryptions[Int(encryptionNumbers[index])]
    }

    /// The initialisation section of the segment at `index`.
    package func initSection(at index: Int) -> HLSInitSection? {
        guard !initSectionNumbers.isEmpty, initSectionNumbers[index] >= 0 else { return nil }
        return initSections[Int(initSectionNumbers[index])]
    }

    /// The sum of the durations.
    var totalDuration: Double { durations.reduce(0, +) }

    /// Appends a segment whose URI was checked (`absolute` is its resolved text).
    mutating func append(
        reference: String, range: ByteRange?, duration: Double, title: String?, sequence: UInt64,
        encryption: SegmentEncryption?, initSection: HLSInitSection?, isDiscontinuity: Bool, line: Int, programDateTime: Date? = nil
    ) {
        let index = count
        var isDiscontinuity = isDiscontinuity
        if let skip = pendingSkip {
            skipped[index] = skip
            isDiscontinuity = isDiscontinuity || skip.discontinuity
            pendingSkip = nil
        }
        if let programDateTime { programDates[index] = programDateTime }
        text.append(contentsOf: reference.utf8)
        ends.append(UInt32(truncatingIfNeeded: text.count))
        if let range {
            if ranges.isEmpty { ranges = Array(repeating: nil, count: index) }
            ranges.append(range)
        } else if !ranges.isEmpty {
            ranges.append(nil)
        }
        durations.append(duration)
        sequences.append(sequence)
        lines.append(Int32(clamping: line))
        if let title { titles[index] = title }
        if isDiscontinuity { discontinuities.insert(index) }
        Self.record(encryption, in: &encryptions, numbers: &encryptionNumbers, index: index)
        Self.record(initSection, in: &initSections, numbers: &initSectionNumbers, index: index)
    }

    /// Notes a segment marked `#EXT-X-GAP`, left out: its duration and discontinuity carry over
    /// to the next segment's date and discontinuity number.
    mutating func skip(duration: Double, isDiscontinuity: Bool, programDateTime: Date?) {
        var skip = pendingSkip ?? Skip(duration: 0, discontinuity: false)
        skip.duration += duration
        skip.discontinuity = skip.discontinuity || isDiscontinuity
        pendingSkip = skip
    }

    /// Notes `value` for segment `index`: the same value as the last one reuses its entry.
    private static func record<Value: Equatable>(_ value: Value?, in table: inout [Value], numbers: inout [Int32], index: Int) {
        guard let value else {
            if !numbers.isEmpty { numbers.append(-1) }
            return
        }
        if numbers.isEmpty { numbers = Array(repeating: -1, count: index) }
        if table.last != value { table.append(value) }
        numbers.append(Int32(truncatingIfNeeded: table.count - 1))
    }

    /// Whether the segment text would overflow the 4 GB the offsets can address.
    func canAppend(_ reference: String) -> Bool { text.count + reference.utf8.count < Int(UInt32.max) }

    /// The text of `reference` resolved against the playlist, without making a `URL` when it is
    /// a plain relative path.
    func absoluteText(of reference: String, line: Int) throws(DownloadError) -> String {
        if URLSafety.isPlainRelative(reference), !directory.isEmpty { return directory + reference }
        return try URLSafety.resolve(reference, against: base, context: "line \(line): the segment URI").absoluteString
    }

    /// The segments of the concatenated output, compact: each initialisation section before the
    /// first media segment it applies to, then the media segments.
    func downloadList() throws(DownloadError) -> SegmentList {
        var builder = try SegmentList.Builder(bases: [base], context: "a segment URL of the playlist")
        var current: HLSInitSection?
        for index in indices {
            if let map = initSection(at: index), !map.hasSameContent(as: current) {
                try builder.append(reference: map.url.absoluteString, range: map.range, encryption: map.encryption)
                current = map
            }
            try builder.append(reference: reference(at: index), range: range(at: index), encryption: encryption(at: index))
        }
        return builder.list()
    }
}
