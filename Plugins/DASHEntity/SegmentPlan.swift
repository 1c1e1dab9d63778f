import Foundation
import Tessera

/// Where one representation's segments come from in one period, with their number known
/// before a single segment is built (so an MPD that would describe a billion segments is
/// refused without allocating them).
struct SegmentPlan {
    /// A resource, or part of one: a URL reference (resolved against the representation's
    /// BaseURLs; `nil` is the BaseURL itself) and an optional byte range.
    struct Reference {
        var url: String?
        var range: ByteRange?
    }

    /// One `S` element: `count` segments of `duration` from `start` (timescale units).
    struct TimelineEntry {
        var start: Int128
        var duration: Int128
        var count: Int128
    }

    /// How the media segments are addressed.
    enum Media {
        /// `SegmentTemplate` with a `SegmentTimeline`.
        case timeline(URLTemplate, startNumber: Int64, entries: [TimelineEntry])
        /// `SegmentTemplate` with `@duration`: `count` segments of `duration`.
        case fixed(URLTemplate, startNumber: Int64, duration: Int64)
        /// A `SegmentTemplate` whose media URL uses neither `$Number$` nor `$Time$`: one segment.
        case once(URLTemplate)
        /// `SegmentList`: one segment per `SegmentURL` (media reference and range).
        case list([Reference])
        /// `SegmentBase` or no addressing at all: the BaseURL file, whole.
        case wholeFile
    }

    var representation: MPDRepresentation
    var initialization: Reference?
    var media: Media
    /// How many media segments.
    var mediaCount: Int128
    /// The element that decided the addressing (for messages).
    var element: SafeXMLElement

    /// Media segments plus the initialization segment.
    var segmentCount: Int128 { mediaCount + (initialization == nil ? 0 : 1) }

    /// A short name of the addressing mode, for metadata.
    var mode: String {
        switch media {
        case .timeline: "SegmentTemplate+SegmentTimeline"
        case .fixed: "SegmentTemplate@duration"
        case .once: "SegmentTemplate"
        case .list: "SegmentList"
        case .wholeFile: "SegmentBase"
        }
    }

    /// Builds the segments: the initialization segment, if any, and the media segments, in the
    /// compact form of ``SegmentList`` (a pattern and a numbering, or the references as text).
    func segments() throws(DownloadError) -> (initialization: DownloadSegment?, media: SegmentList) {
        let representation = self.representation
        let context = "a segment URL of the representation \"\(SafePathText.printable(representation.id))\""
        let initialization = try self.initialization.map { reference throws(DownloadError) in
            try segment(reference.url, range: reference.range, context: context)
        }
        let media: SegmentList
        switch self.media {
        case .wholeFile:
            media = [try segment(nil, range: nil, context: context)]
        case .list(let references):
            var builder = try SegmentList.Builder(bases: representation.bases, context: context)
            for reference in references { try builder.append(reference: reference.url, range: reference.range) }
            media = builder.list()
        case .once(let template):
            media = [try segment(
                template.expand(representationID: representation.id, bandwidth: representation.bandwidth), range: nil,
                context: context)]
        case .fixed(let template, let startNumber, let duration):
            let numbering: SegmentNumbering
            do {
                numbering = try SegmentNumbering(firstNumber: startNumber, count: Int(mediaCount), duration: duration)
            } catch {
                throw MPDErrors.invalid(element, error.message)
            }
            media = try .numbered(pattern(template), against: representation.bases, numbering: numbering, context: context)
        case .timeline(let template, let startNumber, let entries):
            var runs: [SegmentNumbering.Run] = []
            runs.reserveCapacity(entries.count)
            for entry in entries {
                guard entry.start >= 0, entry.duration >= 0, entry.start <= Int128(Int64.max), entry.duration <= Int128(Int64.max),
                    entry.count >= 0, entry.count <= Int128(Int.max)
                else {
                    throw MPDErrors.invalid(element, "has segment times or numbers past 2^63")
                }
                runs.append(SegmentNumbering.Run(start: Int64(entry.start), duration: Int64(entry.duration), count: Int(entry.count)))
            }
            let numbering: SegmentNumbering
            do {
                numbering = try SegmentNumbering(firstNumber: startNumber, runs: runs)
            } catch {
                throw MPDErrors.invalid(element, "has segment times or numbers past 2^63")
            }
            media = try .numbered(pattern(template), against: representation.bases, numbering: numbering, context: context)
        }
        return (initialization, media)
    }

    /// The template with everything but the number and the time filled in.
    private func pattern(_ template: URLTemplate) -> SegmentURLPattern {
        Self.pattern(template, representation: representation)
    }

    /// `template` for `representation`, with everything but the number and the time filled in.
    static func pattern(_ template: URLTemplate, representation: MPDRepresentation) -> SegmentURLPattern {
        func format(_ format: URLTemplate.NumberFormat) -> SegmentURLPattern.NumberFormat {
            SegmentURLPattern.NumberFormat(width: format.width, radix: format.radix, uppercase: format.uppercase)
        }
        return SegmentURLPattern(template.parts.map { part in
            switch part {
            case .literal(let text): .text(text)
            case .representationID: .text(representation.id)
            case .bandwidth(let numberFormat): .text(representation.bandwidth.map(numberFormat.format) ?? "")
            case .number(let numberFormat): .number(format(numberFormat))
            case .time(let numberFormat): .time(format(numberFormat))
            }
        })
    }

    /// One segment: `reference` resolved against every BaseURL candidate (primary first, the
    /// rest as mirrors; an absolute reference has just itself).
    private func segment(_ reference: String?, range: ByteRange?, context: String) throws(DownloadError) -> DownloadSegment {
        try Self.segment(reference, range: range, bases: representation.bases, context: context)
    }

    /// One segment of a representation whose BaseURL candidates are `bases`.
    static func segment(_ reference: String?, range: ByteRange?, bases: [URL], context: String) throws(DownloadError) -> DownloadSegment {
        var urls: [URL]
        if let reference {
            if URLSafety.hasScheme(reference) || bases.count == 1 {
                urls = [try URLSafety.resolve(reference, against: bases.first, context: context)]
            } else {
                urls = []
                for base in bases {
                    let url = try URLSafety.resolve(reference, against: base, context: context)
                    if !urls.contains(url) { urls.append(url) }
                }
            }
        } else {
            urls = bases
        }
        return DownloadSegment(urls: urls, range: range, expectedSize: range?.length)
    }
}

/// The `SegmentTemplate`, `SegmentList` or `SegmentBase` that applies to a representation,
/// merged over Period → AdaptationSet → Representation: attribute by attribute, the more
/// specific level wins; `SegmentTimeline`, `Initialization` and the `SegmentURL` list are
/// inherited as a whole from the nearest level that has them.
struct SegmentInformation {
    enum Kind: String {
        case template = "SegmentTemplate"
        case list = "SegmentList"
        case base = "SegmentBase"
    }

    var kind: Kind
    /// Attribute values, each with the element it was read from.
    var attributes: [String: (value: String, element: SafeXMLElement)] = [:]
    /// The most specific element of this kind.
    var element: SafeXMLElement
    var timeline: SafeXMLElement?
    var initialization: SafeXMLElement?
    var segmentURLs: [SafeXMLElement] = []

    /// The information for a representation whose ancestors (outermost first) are `levels`:
    /// the kind is decided by the most specific level that has any of the three elements
    /// (SegmentTemplate before SegmentList before SegmentBase at one level); `nil` when no level
    /// has one (a single-file representation).
    init?(levels: [SafeXMLElement]) {
        var found: Kind?
        search: for level in levels.reversed() {
            for kind in [Kind.template, .list, .base] where level.firstDASHChild(named: kind.rawValue) != nil {
                found = kind
                break search
            }
        }
        guard let kind = found else { return nil }
        var element: SafeXMLElement?
        var information: [String: (value: String, element: SafeXMLElement)] = [:]
        var timeline: SafeXMLElement?, initialization: SafeXMLElement?, segmentURLs: [SafeXMLElement] = []
        for level in levels {
            guard let own = level.firstDASHChild(named: kind.rawValue) else { continue }
            element = own
            // Attributes in a namespace are keyed "prefix:name"; they are not DASH's.
            for (name, value) in own.attributes where !name.contains(":") { information[name] = (value, own) }
            if let child = own.firstDASHChild(named: "SegmentTimeline") { timeline = child }
            if let child = own.firstDASHChild(named: "Initialization") { initialization = child }
            let urls = own.dashChildren(named: "SegmentURL")
            if !urls.isEmpty { segmentURLs = urls }
        }
        self.kind = kind
        self.element = element!
        self.attributes = information
        self.timeline = timeline
        self.initialization = initialization
        self.segmentURLs = segmentURLs
    }

    /// The value of an attribute, from the most specific level that has it.
    func string(_ name: String) -> String? { attributes[name]?.value }

    /// A whole number ≥ 0, or `nil` when absent.
    func integer(_ name: String) throws(DownloadError) -> Int64? {
        guard let entry = attributes[name] else { return nil }
        let text = entry.value, element = entry.element
        guard let value = Int64(text.trimmingCharacters(in: .whitespaces)), value >= 0 else {
            throw MPDErrors.invalid(element, "has @\(name)=\"\(SafePathText.printable(text))\", which is not a whole number ≥ 0")
        }
        return value
    }

    /// A whole number > 0, or `nil` when absent.
    func positive(_ name: String) throws(DownloadError) -> Int64? {
        guard let value = try integer(name) else { return nil }
        guard value > 0 else { throw MPDErrors.invalid(attributes[name]!.element, "has @\(name)=\"0\"; it must be greater than zero") }
        return value
    }

    /// The element an attribute came from (for messages), or the most specific element.
    func origin(of name: String) -> SafeXMLElement { attributes[name]?.element ?? element }
}

/// Parses a byte range as MPDs write it (`@mediaRange`, `@range`, `@indexRange`):
/// `first-last`, inclusive, or `first-` for "to the end".
func parseByteRange(_ text: String, attribute: String, of element: SafeXMLElement) throws(DownloadError) -> ByteRange {
    let trimmed = text.trimmingCharacters(in: .whitespaces)
    let parts = trimmed.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
    guard parts.count == 2, let first = Int64(parts[0]), first >= 0,
        parts[0].allSatisfy({ $0.isASCII && $0.isNumber }), parts[1].allSatisfy({ $0.isASCII && $0.isNumber })
    else {
        throw MPDErrors.invalid(element, "has @\(attribute)=\"\(SafePathText.printable(text))\", which is not a byte range such as 0-1023")
    }
    if parts[1].isEmpty { return ByteRange(offset: first) }
    guard let last = Int64(parts[1]), last >= first, last < Int64.max else {
        throw MPDErrors.invalid(element, "has @\(attribute)=\"\(SafePathText.printable(text))\", whose last byte comes before its first")
    }
    return ByteRange(first...last)
}
