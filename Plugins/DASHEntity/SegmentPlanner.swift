import Foundation
import Tessera

/// Turns a representation in a period into a ``SegmentPlan``: which addressing applies, its
/// templates and ranges checked, and the number of segments counted (never enumerated).
enum SegmentPlanner {
    /// The plan for `representation` in `period`; more than `limit` segments are refused as
    /// soon as they are counted.
    static func plan(_ representation: MPDRepresentation, in period: MPDPeriod, limit: Int) throws(DownloadError) -> SegmentPlan {
        let levels = [period.element, representation.adaptationSet, representation.element]
        guard let information = SegmentInformation(levels: levels) else {
            // No SegmentBase, SegmentList or SegmentTemplate: the BaseURL is the whole file.
            return SegmentPlan(
                representation: representation, initialization: nil, media: .wholeFile, mediaCount: 1,
                element: representation.element)
        }
        switch information.kind {
        case .base: return try baseAddressing(representation, information)
        case .list: return try listAddressing(representation, information, limit: limit)
        case .template: return try templateAddressing(representation, information, period: period, limit: limit)
        }
    }

    /// `Initialization@sourceURL` (else the BaseURL) with `@range`; `nil` when there is no
    /// `Initialization` element.
    static func initialization(_ information: SegmentInformation) throws(DownloadError) -> SegmentPlan.Reference? {
        guard let element = information.initialization else { return nil }
        let source = element[attribute: "sourceURL"].flatMap { $0.trimmingCharacters(in: .whitespaces).isEmpty ? nil : $0 }
        let range = try element[attribute: "range"].map { text throws(DownloadError) in
            try parseByteRange(text, attribute: "range", of: element)
        }
        return SegmentPlan.Reference(url: source, range: range)
    }

    /// `SegmentBase`: the whole BaseURL file is one segment (its `sidx` is not read); a separate
    /// initialization resource (`Initialization@sourceURL`) comes first. An `Initialization@range`
    /// into the file itself is already part of the whole file.
    private static func baseAddressing(
        _ representation: MPDRepresentation, _ information: SegmentInformation
    ) throws(DownloadError) -> SegmentPlan {
        var initialization = try initialization(information)
        if initialization?.url == nil { initialization = nil }
        if let indexRange = information.string("indexRange") {
            _ = try parseByteRange(indexRange, attribute: "indexRange", of: information.origin(of: "indexRange"))
        }
        return SegmentPlan(
            representation: representation, initialization: initialization, media: .wholeFile, mediaCount: 1,
            element: information.element)
    }

    /// `SegmentList`: `Initialization`, then one segment per `SegmentURL` (`@media` resolved
    /// against the BaseURL, `@mediaRange` as the range; a range without `@media` is a part of
    /// the BaseURL file).
    private static func listAddressing(
        _ representation: MPDRepresentation, _ information: SegmentInformation, limit: Int
    ) throws(DownloadError) -> SegmentPlan {
        guard !information.segmentURLs.isEmpty else {
            throw MPDErrors.invalid(information.element, "has no <SegmentURL> (representation \"\(SafePathText.printable(representation.id))\")")
        }
        if information.segmentURLs.count > limit { throw tooMany(information.element, limit: limit) }
        var references: [SegmentPlan.Reference] = []
        references.reserveCapacity(information.segmentURLs.count)
        for element in information.segmentURLs {
            let media = element[attribute: "media"].flatMap { $0.trimmingCharacters(in: .whitespaces).isEmpty ? nil : $0 }
            let range = try element[attribute: "mediaRange"].map { text throws(DownloadError) in
                try parseByteRange(text, attribute: "mediaRange", of: element)
            }
            references.append(SegmentPlan.Reference(url: media, range: range))
        }
        return SegmentPlan(
            representation: representation, initialization: try initialization(information), media: .list(references),
            mediaCount: Int128(references.count), element: information.element)
    }

    /// `SegmentTemplate`: `@initialization` (or an `Initialization` element), and media segments
    /// from a `SegmentTimeline`, else from `@duration` over the period, else one segment when
    /// the media URL has neither `$Number$` nor `$Time$`.
    private static func templateAddressing(
        _ representation: MPDRepresentation, _ information: SegmentInformation, period: MPDPeriod, limit: Int
    ) throws(DownloadError) -> SegmentPlan {
        let id = SafePathText.printable(representation.id)
        guard let mediaText = information.string("media") else {
            throw MPDErrors.invalid(information.element, "has no @media template (representation \"\(id)\")")
        }
        let media = try template(mediaText, attribute: "media", information: information)
        var initialization: SegmentPlan.Reference?
        if let initText = information.string("initialization") {
            let initTemplate = try template(initText, attribute: "initialization", information: information)
            if initTemplate.usesNumber || initTemplate.usesTime {
                throw MPDErrors.invalid(
                    information.origin(of: "initialization"), "uses $Number$ or $Time$ in @initialization=\"\(SafePathText.printable(initText))\"")
            }
            if initTemplate.usesBandwidth, representation.bandwidth == nil {
                throw missingBandwidth(representation, template: initText)
            }
            initialization = SegmentPlan.Reference(
                url: initTemplate.expand(representationID: representation.id, bandwidth: representation.bandwidth), range: nil)
        } else if var reference = try self.initialization(information) {
            if let source = reference.url {
                let initTemplate = try template(source, attribute: "sourceURL", information: information)
                reference.url = initTemplate.expand(representationID: representation.id, bandwidth: representation.bandwidth)
            }
            initialization = reference
        }
        if media.usesBandwidth, representation.bandwidth == nil { throw missingBandwidth(representation, template: mediaText) }
        let timescale = try information.positive("timescale") ?? 1
        let startNumber = try information.integer("startNumber") ?? 1
        let endNumber = try information.integer("endNumber")
        let presentationTimeOffset = try information.integer("presentationTimeOffset") ?? 0

        if let timeline = information.timeline {
            let entries = try timelineEntries(
                timeline, timescale: timescale, presentationTimeOffset: presentationTimeOffset, period: period, limit: limit)
            var count: Int128 = 0
            for entry in entries { count += entry.count }
            return SegmentPlan(
                representation: representation, initialization: initialization,
                media: .timeline(media, startNumber: startNumber, entries: entries), mediaCount: count, element: timeline)
        }
        if let duration = try information.positive("duration") {
            var count: Int128?
            if let periodDuration = period.duration {
                // ceil(period × timescale / duration), exactly.
                guard let span = MPDTime.product(periodDuration, Int128(timescale)) else {
                    throw tooMany(information.origin(of: "duration"), limit: limit)
                }
                count = MPDTime.ceilDivide(span, Int128(duration) * MPDTime.nanosecondsPerSecond)
            }
            if let endNumber {
                let byNumber = max(0, Int128(endNumber) - Int128(startNumber) + 1)
                count = count.map { min($0, byNumber) } ?? byNumber
            }
            if let count, count > Int128(limit) { throw tooMany(information.origin(of: "duration"), limit: limit) }
            guard let count else {
                throw MPDErrors.invalid(
                    information.origin(of: "duration"),
                    "gives segments of @duration=\(duration) but neither Period@duration, a next Period@start nor MPD@mediaPresentationDuration says how long the period is, so its segments cannot be counted")
            }
            return SegmentPlan(
                representation: representation, initialization: initialization,
                media: .fixed(media, startNumber: startNumber, duration: duration), mediaCount: count,
                element: information.origin(of: "duration"))
        }
        if !media.usesNumber, !media.usesTime {
            return SegmentPlan(
                representation: representation, initialization: initialization, media: .once(media), mediaCount: 1,
                element: information.element)
        }
        throw MPDErrors.invalid(
            information.element,
            "has neither @duration nor a <SegmentTimeline>, so the segments of representation \"\(id)\" cannot be counted")
    }

    /// The `S` elements of a timeline as entries: `@t` (default: where the previous one ended,
    /// 0 for the first), `@d` (required), `@r` (default 0; `-1` repeats up to the next `S@t`, or
    /// to the end of the period).
    private static func timelineEntries(
        _ timeline: SafeXMLElement, timescale: Int64, presentationTimeOffset: Int64, period: MPDPeriod, limit: Int
    ) throws(DownloadError) -> [SegmentPlan.TimelineEntry] {
        let elements = timeline.dashChildren(named: "S")
        guard !elements.isEmpty else { throw MPDErrors.invalid(timeline, "has no <S> element") }
        var entries: [SegmentPlan.TimelineEntry] = []
        entries.reserveCapacity(elements.count)
        var next: Int128 = 0
        var total: Int128 = 0
        for (index, element) in elements.enumerated() {
            let start = try MPDErrors.integer(element, "t").map { Int128($0) } ?? next
            guard let durationValue = try MPDErrors.integer(element, "d") else {
                throw MPDErrors.invalid(element, "has no @d (every S element needs a duration)")
            }
            guard durationValue > 0 else { throw MPDErrors.invalid(element, "has @d=\"0\"; it must be greater than zero") }
            let duration = Int128(durationValue)
            var repeats: Int128 = 0
            if let text = element[attribute: "r"] {
                guard let value = Int64(text.trimmingCharacters(in: .whitespaces)), value >= -1 else {
                    throw MPDErrors.invalid(element, "has @r=\"\(SafePathText.printable(text))\", which is not a whole number ≥ -1")
                }
                repeats = Int128(value)
            }
            var count: Int128
            if repeats == -1 {
                if index + 1 < elements.count, let nextStart = try MPDErrors.integer(elements[index + 1], "t") {
                    // Up to the next S@t.
                    count = MPDTime.ceilDivide(Int128(nextStart) - start, duration)
                } else if let periodDuration = period.duration {
                    // Up to the end of the period, in media time: offset + length × timescale.
                    guard let span = MPDTime.product(periodDuration, Int128(timescale)),
                        let end = MPDTime.sum(Int128(presentationTimeOffset) * MPDTime.nanosecondsPerSecond, span)
                    else {
                        throw tooMany(element, limit: limit)
                    }
                    count = MPDTime.ceilDivide(end - start * MPDTime.nanosecondsPerSecond, duration * MPDTime.nanosecondsPerSecond)
                } else {
                    throw MPDErrors.invalid(
                        element, "repeats until the end of the period (@r=\"-1\"), but the MPD does not say how long the period is")
                }
                count = max(count, 1)
            } else {
                count = repeats + 1
            }
            total += count
            // Refused here already, before the count grows any further.
            if total > Int128(limit) { throw tooMany(element, limit: limit) }
            entries.append(SegmentPlan.TimelineEntry(start: start, duration: duration, count: count))
            next = start + duration * count
            guard next <= Int128(Int64.max) else {
                throw MPDErrors.invalid(element, "runs the timeline past 2^63 timescale units")
            }
        }
        return entries
    }

    static func template(
        _ text: String, attribute: String, information: SegmentInformation
    ) throws(DownloadError) -> URLTemplate {
        do {
            return try URLTemplate(text)
        } catch {
            let element = information.attributes[attribute]?.element ?? information.initialization ?? information.element
            throw MPDErrors.invalid(element, "has a @\(attribute) template \"\(SafePathText.printable(text))\" that \(error.reason)")
        }
    }

    /// The refusal of a stream with more segments than the limit; `limit` is what is left of
    /// it after the representations counted before (the caller names the whole limit).
    static func tooMany(_ element: SafeXMLElement, limit: Int) -> DownloadError {
        DownloadError(
            .manifestTooLarge,
            "the MPD's \(element.description) describes more segments than the limit leaves room for (\(limit) more)")
    }

    static func missingBandwidth(_ representation: MPDRepresentation, template: String) -> DownloadError {
        MPDErrors.invalid(
            representation.element,
            "has no @bandwidth, which the template \"\(SafePathText.printable(template))\" needs for $Bandwidth$")
    }
}
