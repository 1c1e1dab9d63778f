import Foundation
import Tessera

/// A track of a live manifest as its output names it: each reload finds its representation in
/// every period of the MPD by `@id`, else by kind and closest bandwidth (as ``DASHEntity``
/// continues a track across periods).
struct DASHTrackReference: Sendable, Hashable {
    var id: String
    var kind: MediaInfo.Kind
    var bandwidth: Int64?

    /// The representation of `period` that continues this track, if any.
    func representation(in period: MPDPeriod) -> MPDRepresentation? {
        let candidates = period.representations
        if let same = candidates.first(where: { $0.id == id }) { return same }
        var best: MPDRepresentation?
        var distance = Int64.max
        for candidate in candidates where candidate.kind == kind {
            let difference = abs((candidate.bandwidth ?? 0) - (bandwidth ?? 0))
            if best == nil || difference < distance {
                best = candidate
                distance = difference
            }
        }
        return best
    }
}

/// What the segments of a dynamic (or formerly dynamic) MPD are at a moment of the MPD's clock
/// (ISO/IEC 23009-1 §5.3.9.5, DASH-IF IOP §4.3): a segment is available from the end of its media
/// (`availabilityStartTime` + period start + its end) until `timeShiftBufferDepth` later; a
/// static MPD offers every segment. Windows are built only for the segments asked for (after a
/// key, or the newest ones), so a template numbered since years costs nothing.
struct DASHLiveView {
    /// The most segments one window builds (the rest are counted as ``LiveWindow/segmentsAfter``).
    static let maxWindow = 10_000

    let mpd: MPD

    /// Seconds on the presentation timeline (from `availabilityStartTime` and period 0).
    private static func seconds(_ nanoseconds: Int128) -> Double { Double(nanoseconds) / 1e9 }

    /// Where the presentation ends, in seconds, when the MPD says.
    var presentationEnd: Double? {
        if let duration = mpd.duration { return Self.seconds(duration) }
        guard let last = mpd.periods.last, let duration = last.duration else { return nil }
        return Self.seconds(last.start + duration)
    }

    /// The window of `track` at `now` on the MPD's clock. `after`: the last key dealt with (the
    /// window then starts after it, or with the oldest segment still available when that one is
    /// gone); without it, the newest segments. `offset`: the MPD clock minus the local clock
    /// (availability times are given on the local one).
    func window(
        for track: DASHTrackReference, now: Date, after: LiveSegmentKey?, offset: Double, limit: Int = maxWindow
    ) throws(DownloadError) -> LiveWindow {
        let elapsed: Double =
            mpd.isDynamic ? now.timeIntervalSince(mpd.availabilityStartTime ?? now) : .infinity
        var parts: [Part] = []
        for period in mpd.periods {
            guard let representation = track.representation(in: period) else { continue }
            try DASHEntity.refuseProtected(DASHEntity.Track(first: representation, parts: [representation]))
            guard let part = try Part(representation: representation, period: period, presentationEnd: presentationEnd) else { continue }
            parts.append(part)
        }
        let depth = mpd.timeShiftBufferDepth.map(Self.seconds)
        var ranges: [[Part.Range]] = []
        var total = 0
        var nextAvailable: Double?
        var allOut = true
        for part in parts {
            let (available, next, complete) = part.available(elapsed: elapsed, depth: depth)
            allOut = allOut && complete
            ranges.append(available)
            total += available.reduce(0) { $0 + $1.count }
            if let next { nextAvailable = min(nextAvailable ?? next, next) }
        }
        // Which slots to build: from the first after `after`, else the newest `limit`.
        var skip = max(0, total - limit)
        if let after {
            skip = 0
            search: for (index, part) in parts.enumerated() {
                for range in ranges[index] {
                    let behind = part.count(of: range, notAfter: after)
                    skip += behind
                    if behind < range.count { break search }
                }
            }
        }
        let take = min(limit, total - skip)
        var segments: [LiveSegment] = []
        segments.reserveCapacity(max(0, take))
        var longest = 0.0
        var position = 0
        for (index, part) in parts.enumerated() {
            longest = max(longest, part.longestDuration)
            for range in ranges[index] {
                defer { position += range.count }
                let from = max(skip, position), to = min(skip + take, position + range.count)
                guard from < to else { continue }
                let slice = Part.Range(entry: range.entry, first: range.first + Int128(from - position), count: to - from)
                segments += try part.segments(slice, startsPeriod: index > 0)
            }
        }
        // Dynamic: complete once the announced end has passed and every segment before it is out.
        let complete = !mpd.isDynamic || (presentationEnd.map { elapsed >= $0 } ?? false) && allOut
        let reload = nextAvailable.flatMap { seconds -> Date? in
            guard let start = mpd.availabilityStartTime, mpd.isDynamic else { return nil }
            return start.addingTimeInterval(seconds - offset)
        }
        return LiveWindow(
            segments: segments, targetDuration: longest > 0 ? longest : 2, isComplete: complete, suggestedReload: reload,
            segmentsAfter: max(0, total - skip - take)
        ).withLiveEdge(mpd.isDynamic ? elapsed : nil)
    }
}

extension DASHLiveView {
    /// A representation's segments in one period.
    struct Part {
        /// Segments `first ..< first + count` of timeline entry `entry` (or of the whole
        /// numbering, `entry` 0, for templates with `@duration` and segment lists).
        struct Range {
            var entry: Int
            var first: Int128
            var count: Int
        }

        /// One `S` element: `count` segments (`nil`: `@r="-1"` with nothing after it, as many
        /// as time makes) of `duration` from `start`, the first numbered `index` in the timeline.
        struct TimelineEntry {
            var start: Int128
            var duration: Int128
            var count: Int128?
            var index: Int128
        }

        enum Media {
            case numbered(SegmentURLPattern, duration: Int128, endNumber: Int64?, usesTime: Bool)
            case timeline(SegmentURLPattern, [TimelineEntry], usesTime: Bool)
            case list([SegmentPlan.Reference], duration: Int128?)
        }

        let representation: MPDRepresentation
        /// The period's start and end, seconds on the presentation timeline.
        let periodStart: Double
        let periodEnd: Double?
        /// The period's start in milliseconds: the first half of every key.
        let periodKey: Int64
        let timescale: Int128
        let presentationTimeOffset: Int128
        let startNumber: Int64
        let initialization: DownloadSegment?
        let media: Media
        private let context: String

        /// The part of `representation` in `period`; `nil` for a representation without
        /// segments to count by time (a single file), which a live recording cannot follow.
        init?(representation: MPDRepresentation, period: MPDPeriod, presentationEnd: Double?) throws(DownloadError) {
            self.representation = representation
            periodStart = Double(period.start) / 1e9
            periodKey = Int64(clamping: period.start / 1_000_000)
            if let duration = period.duration {
                periodEnd = Double(period.start + duration) / 1e9
            } else {
                periodEnd = presentationEnd
            }
            context = "a segment URL of the representation \"\(SafePathText.printable(representation.id))\""
            let levels = [period.element, representation.adaptationSet, representation.element]
            guard let information = SegmentInformation(levels: levels), information.kind != .base else {
                throw MPDErrors.invalid(
                    representation.element,
                    "is one file (no SegmentTemplate or SegmentList) in a live MPD; its segments cannot be followed")
            }
            timescale = Int128(try information.positive("timescale") ?? 1)
            presentationTimeOffset = Int128(try information.integer("presentationTimeOffset") ?? 0)
            startNumber = try information.integer("startNumber") ?? 1
            let bases = representation.bases
            switch information.kind {
            case .base:
                return nil
            case .list:
                guard !information.segmentURLs.isEmpty else { return nil }
                var references: [SegmentPlan.Reference] = []
                for element in information.segmentURLs {
                    let media = element[attribute: "media"].flatMap { $0.trimmingCharacters(in: .whitespaces).isEmpty ? nil : $0 }
                    let range = try element[attribute: "mediaRange"].map { text throws(DownloadError) in
                        try parseByteRange(text, attribute: "mediaRange", of: element)
                    }
                    references.append(SegmentPlan.Reference(url: media, range: range))
                }
                media = .list(references, duration: try information.positive("duration").map { Int128($0) })
                initialization = try SegmentPlanner.initialization(information).map { reference throws(DownloadError) in
                    try SegmentPlan.segment(reference.url, range: reference.range, bases: bases, context: "a segment URL")
                }
            case .template:
                guard let mediaText = information.string("media") else {
                    throw MPDErrors.invalid(information.element, "has no @media template (representation \"\(SafePathText.printable(representation.id))\")")
                }
                let template = try SegmentPlanner.template(mediaText, attribute: "media", information: information)
                if template.usesBandwidth, representation.bandwidth == nil {
                    throw SegmentPlanner.missingBandwidth(representation, template: mediaText)
                }
                let pattern = SegmentPlan.pattern(template, representation: representation)
                if let timeline = information.timeline {
                    media = .timeline(pattern, try Self.entries(of: timeline), usesTime: template.usesTime)
                } else if let duration = try information.positive("duration") {
                    media = .numbered(pattern, duration: Int128(duration), endNumber: try information.integer("endNumber"), usesTime: template.usesTime)
                } else {
                    throw MPDErrors.invalid(
                        information.element,
                        "has neither @duration nor a <SegmentTimeline>, so the live segments of representation \"\(SafePathText.printable(representation.id))\" cannot be counted")
                }
                var initReference: SegmentPlan.Reference?
                if let initText = information.string("initialization") {
                    let initTemplate = try SegmentPlanner.template(initText, attribute: "initialization", information: information)
                    if initTemplate.usesNumber || initTemplate.usesTime {
                        throw MPDErrors.invalid(
                            information.origin(of: "initialization"),
                            "uses $Number$ or $Time$ in @initialization=\"\(SafePathText.printable(initText))\"")
                    }
                    initReference = SegmentPlan.Reference(
                        url: initTemplate.expand(representationID: representation.id, bandwidth: representation.bandwidth), range: nil)
                } else if var reference = try SegmentPlanner.initialization(information) {
                    if let source = reference.url {
                        let initTemplate = try SegmentPlanner.template(source, attribute: "sourceURL", information: information)
                        reference.url = initTemplate.expand(representationID: representation.id, bandwidth: representation.bandwidth)
                    }
                    initReference = reference
                }
                initialization = try initReference.map { reference throws(DownloadError) in
                    try SegmentPlan.segment(reference.url, range: reference.range, bases: bases, context: "a segment URL")
                }
            }
        }

        /// The `S` elements: `@t` (default: where the previous ended), `@d`, `@r` (`-1`: up to
        /// the next `@t`, or open when it is the last).
        private static func entries(of timeline: SafeXMLElement) throws(DownloadError) -> [TimelineEntry] {
            let elements = timeline.dashChildren(named: "S")
            var entries: [TimelineEntry] = []
            var next: Int128 = 0
            var index: Int128 = 0
            for (position, element) in elements.enumerated() {
                let start = try MPDErrors.integer(element, "t").map { Int128($0) } ?? next
                guard let duration = try MPDErrors.integer(element, "d"), duration > 0 else {
                    throw MPDErrors.invalid(element, "has no @d greater than zero (every S element needs a duration)")
                }
                var repeats: Int128 = 0
                if let text = element[attribute: "r"] {
                    guard let value = Int64(text.trimmingCharacters(in: .whitespaces)), value >= -1 else {
                        throw MPDErrors.invalid(element, "has @r=\"\(SafePathText.printable(text))\", which is not a whole number ≥ -1")
                    }
                    repeats = Int128(value)
                }
                var count: Int128? = repeats + 1
                if repeats == -1 {
                    if position + 1 < elements.count, let nextStart = try MPDErrors.integer(elements[position + 1], "t") {
                        count = max(1, MPDTime.ceilDivide(Int128(nextStart) - start, Int128(duration)))
                    } else {
                        count = nil
                    }
                }
                entries.append(TimelineEntry(start: start, duration: Int128(duration), count: count, index: index))
                let segments = count ?? 0
                next = start + Int128(duration) * segments
                index += segments
                guard next <= Int128(Int64.max), index <= Int128(Int64.max) else {
                    throw MPDErrors.invalid(element, "runs the timeline past 2^63 timescale units")
                }
            }
            return entries
        }

        var longestDuration: Double {
            switch media {
            case .numbered(_, let duration, _, _): Double(duration) / Double(timescale)
            case .list(_, let duration): duration.map { Double($0) / Double(timescale) } ?? 0
            case .timeline(_, let entries, _): Double(entries.map(\.duration).max() ?? 0) / Double(timescale)
            }
        }

        /// The segments available `elapsed` seconds after `availabilityStartTime` (infinity: a
        /// static MPD, everything), kept for `depth` seconds; when the next one becomes
        /// available (seconds after `availabilityStartTime`), when that follows from the MPD; and
        /// whether the part's last segment is out (it has a known end and the clock is past it).
        func available(elapsed: Double, depth: Double?) -> (ranges: [Range], next: Double?, complete: Bool) {
            let scale = Double(timescale)
            /// Which of `count` segments (index j from 0, the media of j ending at
            /// `firstEnd + j × step` on the presentation timeline) are out: end ≤ elapsed and
            /// end + depth ≥ elapsed, and none starting at or after the period's end.
            func bounds(firstEnd: Double, step: Double, count: Double?) -> (low: Double, high: Double, all: Bool)? {
                var last = count
                if let periodEnd {
                    let byPeriod = max(0, ((periodEnd - (firstEnd - step)) / step - 1e-9).rounded(.up))
                    last = min(last ?? byPeriod, byPeriod)
                }
                var high = last
                if elapsed.isFinite {
                    let out = max(0, ((elapsed - firstEnd) / step + 1e-9).rounded(.down) + 1)
                    high = min(high ?? out, out)
                }
                // A static MPD whose segments cannot be counted offers none (a resolve refuses it).
                guard let high, high.isFinite, high < 1e15 else { return nil }
                var low = 0.0
                if elapsed.isFinite, let depth { low = max(0, ((elapsed - depth - firstEnd) / step - 1e-9).rounded(.up)) }
                return (min(low, high), high, last.map { high >= $0 } ?? false)
            }
            switch media {
            case .list(let references, nil):
                // No durations: every segment of the list is offered.
                return (references.isEmpty ? [] : [Range(entry: 0, first: 0, count: references.count)], nil, true)
            case .numbered, .list:
                var count: Double?
                let duration: Int128
                switch media {
                case .numbered(_, let value, let endNumber, _):
                    duration = value
                    if let endNumber { count = Double(max(0, Int128(endNumber) - Int128(startNumber) + 1)) }
                case .list(let references, let value):
                    duration = value ?? 1
                    count = Double(references.count)
                case .timeline:
                    return ([], nil, false)
                }
                let step = Double(duration) / scale
                guard let (low, high, all) = bounds(firstEnd: periodStart + step, step: step, count: count) else { return ([], nil, false) }
                let next: Double? = elapsed.isFinite && !all ? periodStart + step * (high + 1) : nil
                guard high > low else { return ([], next, all) }
                return ([Range(entry: 0, first: Int128(low), count: Int(high - low))], next, all)
            case .timeline(_, let entries, _):
                var ranges: [Range] = []
                var next: Double?
                var complete = periodEnd != nil
                for (index, entry) in entries.enumerated() {
                    let step = Double(entry.duration) / scale
                    let firstStart = periodStart + Double(entry.start - presentationTimeOffset) / scale
                    guard let (low, high, all) = bounds(firstEnd: firstStart + step, step: step, count: entry.count.map { Double($0) }) else {
                        complete = false
                        continue
                    }
                    complete = complete && all
                    if entry.count == nil, elapsed.isFinite, !all { next = firstStart + step * (high + 1) }
                    if high > low { ranges.append(Range(entry: index, first: Int128(low), count: Int(high - low))) }
                }
                return (ranges, next, complete)
            }
        }

        /// How many segments of `range` have a key not after `key`.
        func count(of range: Range, notAfter key: LiveSegmentKey) -> Int {
            if key.period < periodKey { return 0 }
            if key.period > periodKey { return range.count }
            // Keys grow with the index: a binary search.
            var low = 0, high = range.count
            while low < high {
                let middle = (low + high) / 2
                if self.key(entry: range.entry, index: range.first + Int128(middle)) <= key { low = middle + 1 } else { high = middle }
            }
            return low
        }

        /// The number and the media time of segment `index` of `entry`.
        private func numberAndTime(entry: Int, index: Int128) -> (number: Int128, time: Int128, duration: Int128?) {
            switch media {
            case .numbered(_, let duration, _, _): (Int128(startNumber) + index, index * duration, duration)
            case .list(_, let duration): (Int128(startNumber) + index, index * (duration ?? 0), duration)
            case .timeline(_, let entries, _):
                (Int128(startNumber) + entries[entry].index + index, entries[entry].start + index * entries[entry].duration, entries[entry].duration)
            }
        }

        private func key(entry: Int, index: Int128) -> LiveSegmentKey {
            let (number, time, _) = numberAndTime(entry: entry, index: index)
            let usesTime: Bool =
                switch media {
                case .numbered(_, _, _, let usesTime), .timeline(_, _, let usesTime): usesTime
                case .list: false
                }
            return LiveSegmentKey(period: periodKey, position: Int64(clamping: usesTime ? time : number))
        }

        /// The segments of `range`, built; the first segment of the part's period is marked as a
        /// discontinuity when `startsPeriod` (a period after the first).
        func segments(_ range: Range, startsPeriod: Bool) throws(DownloadError) -> [LiveSegment] {
            guard range.count > 0 else { return [] }
            let (firstNumber, firstTime, _) = numberAndTime(entry: range.entry, index: range.first)
            guard firstNumber <= Int128(Int64.max), firstTime >= 0, firstTime <= Int128(Int64.max) else {
                throw MPDErrors.invalid(representation.element, "has segment times or numbers past 2^63")
            }
            let list: SegmentList
            let scale = Double(timescale)
            var durations: [Double] = []
            var starts: [Double] = []
            switch media {
            case .numbered(let pattern, let duration, _, _):
                let numbering: SegmentNumbering
                do {
                    numbering = try SegmentNumbering(
                        firstNumber: Int64(firstNumber),
                        runs: [SegmentNumbering.Run(start: Int64(firstTime), duration: Int64(clamping: duration), count: range.count)])
                } catch {
                    throw MPDErrors.invalid(representation.element, "has segment times or numbers past 2^63")
                }
                list = try .numbered(pattern, against: representation.bases, numbering: numbering, context: context)
                let step = Double(duration) / scale
                for offset in 0..<range.count {
                    durations.append(step)
                    starts.append(periodStart + Double(range.first + Int128(offset)) * step)
                }
            case .timeline(let pattern, let entries, _):
                let entry = entries[range.entry]
                let numbering: SegmentNumbering
                do {
                    numbering = try SegmentNumbering(
                        firstNumber: Int64(firstNumber),
                        runs: [SegmentNumbering.Run(start: Int64(firstTime), duration: Int64(clamping: entry.duration), count: range.count)])
                } catch {
                    throw MPDErrors.invalid(representation.element, "has segment times or numbers past 2^63")
                }
                list = try .numbered(pattern, against: representation.bases, numbering: numbering, context: context)
                let step = Double(entry.duration) / scale
                for offset in 0..<range.count {
                    durations.append(step)
                    starts.append(periodStart + Double(firstTime + Int128(offset) * entry.duration - presentationTimeOffset) / scale)
                }
            case .list(let references, let duration):
                var builder = try SegmentList.Builder(bases: representation.bases, context: context)
                let step = duration.map { Double($0) / scale } ?? 0
                for offset in 0..<range.count {
                    let reference = references[Int(range.first) + offset]
                    try builder.append(reference: reference.url, range: reference.range)
                    durations.append(step)
                    starts.append(periodStart + Double(range.first + Int128(offset)) * step)
                }
                list = builder.list()
            }
            var segments: [LiveSegment] = []
            segments.reserveCapacity(range.count)
            for offset in 0..<range.count {
                segments.append(LiveSegment(
                    key: key(entry: range.entry, index: range.first + Int128(offset)), duration: durations[offset],
                    start: starts[offset], segment: list[offset], initSection: initialization,
                    isDiscontinuity: offset == 0 && startsPeriod && range.entry == 0 && range.first == 0))
            }
            return segments
        }
    }
}
