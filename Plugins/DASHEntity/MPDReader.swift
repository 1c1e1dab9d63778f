import Foundation
import Tessera

/// Reads an MPD's XML tree into an ``MPD``: checks the root and namespace, reads a live
/// presentation's timing (`type="dynamic"`), computes the periods' timing and resolves BaseURLs
/// level by level.
struct MPDReader {
    /// The MPEG-DASH namespace (ISO/IEC 23009-1).
    static let namespace = "urn:mpeg:dash:schema:mpd:2011"
    /// The namespaces read as DASH's: the standard one, and the same name in other letter case
    /// as YouTube's and some older packagers' MPDs declare it (`urn:mpeg:DASH:schema:MPD:2011`).
    /// XML compares namespace names exactly, so strictly the second is not DASH's; players
    /// (dash.js, ExoPlayer, yt-dlp) read it anyway.
    static let namespaces: Set<String> = [namespace, "urn:mpeg:DASH:schema:MPD:2011"]
    /// The XLink namespace (remote elements).
    static let xlinkNamespace = "http://www.w3.org/1999/xlink"
    /// At most this many BaseURL candidates are kept at each level; the product of several
    /// levels of mirrors would otherwise grow without bound.
    static let maxMirrors = 8

    let document: SafeXMLDocument
    /// The MPD's URL after redirects: relative BaseURLs and segment URLs resolve against it.
    let url: URL

    func read() throws(DownloadError) -> MPD {
        let root = document.root
        guard root.name == "MPD", root.namespaceURI.map(Self.namespaces.contains) == true else {
            let namespace = root.namespaceURI.map { "in the namespace \"\($0)\"" } ?? "in no namespace"
            if root.name == "MPD" {
                throw DownloadError(
                    .manifestInvalid,
                    "the document's root <MPD> is \(namespace), not in MPEG-DASH's \"\(Self.namespace)\"; it is not an MPD this plugin reads",
                    url: url.absoluteString)
            }
            throw DownloadError(
                .manifestInvalid,
                "the document is not an MPEG-DASH MPD: its root is \(root.description) \(namespace), not <MPD> in \"\(Self.namespace)\"",
                url: url.absoluteString)
        }
        let type = root[attribute: "type"]?.trimmingCharacters(in: .whitespaces) ?? "static"
        guard type == "static" || type == "dynamic" else {
            throw MPDErrors.invalid(root, "has the unknown type \"\(type)\" (expected \"static\" or \"dynamic\")")
        }
        let isDynamic = type == "dynamic"
        let availabilityStart = try MPDErrors.dateTime(root, "availabilityStartTime")
        if isDynamic, availabilityStart == nil {
            throw MPDErrors.invalid(root, "is dynamic (live) but has no @availabilityStartTime, so its segments cannot be placed in time")
        }
        let duration = try MPDErrors.duration(root, "mediaPresentationDuration")
        let title = root.firstDASHChild(named: "ProgramInformation")?
            .firstDASHChild(named: "Title")?.text.trimmingCharacters(in: .whitespacesAndNewlines)
        let mpdBases = try bases(of: root, parents: [url])

        let periodElements = root.dashChildren(named: "Period")
        guard !periodElements.isEmpty else { throw MPDErrors.invalid(root, "has no <Period>") }
        // Starts: @start, else the previous period's start plus its duration (static MPDs).
        var starts: [Int128] = []
        var explicitDurations: [Int128?] = []
        for (index, period) in periodElements.enumerated() {
            try refuseRemote(period)
            let explicitStart = try MPDErrors.duration(period, "start")
            let explicitDuration = try MPDErrors.duration(period, "duration")
            let start: Int128
            if let explicitStart {
                start = explicitStart
            } else if index == 0 {
                start = 0
            } else if let previous = explicitDurations[index - 1] {
                start = starts[index - 1] + previous
            } else {
                throw MPDErrors.invalid(
                    period, "has no @start and the period before it has no @duration, so it cannot be placed in time")
            }
            starts.append(start)
            explicitDurations.append(explicitDuration)
        }
        var periods: [MPDPeriod] = []
        for (index, element) in periodElements.enumerated() {
            var periodDuration = explicitDurations[index]
            if periodDuration == nil {
                if index + 1 < periodElements.count {
                    periodDuration = starts[index + 1] - starts[index]
                } else if let duration {
                    periodDuration = duration - starts[index]
                }
            }
            if let value = periodDuration, value < 0 {
                throw MPDErrors.invalid(element, "ends before it starts (the next period or the presentation ends first)")
            }
            let periodBases = try bases(of: element, parents: mpdBases)
            var sets: [MPDAdaptationSet] = []
            for set in element.dashChildren(named: "AdaptationSet") {
                try refuseRemote(set)
                sets.append(try adaptationSet(set, period: element, periodIndex: index, parents: periodBases))
            }
            periods.append(MPDPeriod(
                element: element, index: index, id: element[attribute: "id"], start: starts[index], duration: periodDuration,
                adaptationSets: sets))
        }
        var mpd = MPD(title: title?.isEmpty == false ? title : nil, duration: duration, profiles: root[attribute: "profiles"], periods: periods)
        mpd.isDynamic = isDynamic
        mpd.availabilityStartTime = availabilityStart
        mpd.publishTime = try MPDErrors.dateTime(root, "publishTime")
        mpd.minimumUpdatePeriod = try MPDErrors.duration(root, "minimumUpdatePeriod")
        mpd.timeShiftBufferDepth = try MPDErrors.duration(root, "timeShiftBufferDepth")
        mpd.suggestedPresentationDelay = try MPDErrors.duration(root, "suggestedPresentationDelay")
        mpd.utcTimings = root.dashChildren(named: "UTCTiming").compactMap { element in
            guard let scheme = element[attribute: "schemeIdUri"] else { return nil }
            return MPDUTCTiming(scheme: scheme.trimmingCharacters(in: .whitespaces), value: element[attribute: "value"] ?? "")
        }
        return mpd
    }

    private func adaptationSet(
        _ set: SafeXMLElement, period: SafeXMLElement, periodIndex: Int, parents: [URL]
    ) throws(DownloadError) -> MPDAdaptationSet {
        let setBases = try bases(of: set, parents: parents)
        let setProtections = protections(of: set)
        var representations: [MPDRepresentation] = []
        for element in set.dashChildren(named: "Representation") {
            guard let id = element[attribute: "id"], !id.isEmpty else {
                throw MPDErrors.invalid(element, "has no @id (every Representation needs one)")
            }
            let mimeType = element[attribute: "mimeType"] ?? set[attribute: "mimeType"]
            let codecs = element[attribute: "codecs"] ?? set[attribute: "codecs"]
            let contentType = set[attribute: "contentType"]
                ?? set.firstDASHChild(named: "ContentComponent")?[attribute: "contentType"]
            representations.append(MPDRepresentation(
                element: element, adaptationSet: set, period: period, periodIndex: periodIndex, id: id,
                bandwidth: try MPDErrors.integer(element, "bandwidth"),
                width: try Self.inherited(element, set, "width").map(Int.init),
                height: try Self.inherited(element, set, "height").map(Int.init),
                codecs: codecs, mimeType: mimeType, language: set[attribute: "lang"],
                kind: Self.kind(contentType: contentType, mimeType: mimeType, codecs: codecs),
                bases: try bases(of: element, parents: setBases),
                protections: setProtections + protections(of: element)))
        }
        return MPDAdaptationSet(element: set, representations: representations)
    }

    /// A whole-number attribute of the representation, else of its adaptation set.
    private static func inherited(_ element: SafeXMLElement, _ set: SafeXMLElement, _ name: String) throws(DownloadError) -> Int64? {
        if let own = try MPDErrors.integer(element, name) { return own }
        return try MPDErrors.integer(set, name)
    }

    /// `ContentProtection` children of an element.
    private func protections(of element: SafeXMLElement) -> [MPDProtection] {
        element.dashChildren(named: "ContentProtection").map {
            MPDProtection(scheme: $0[attribute: "schemeIdUri"] ?? "(no schemeIdUri)", value: $0[attribute: "value"], line: $0.line)
        }
    }

    /// Remote elements (`xlink:href`) would need another fetch and a merge; they are refused
    /// rather than silently downloaded without their content.
    private func refuseRemote(_ element: SafeXMLElement) throws(DownloadError) {
        if let href = element.attribute("href", namespaceURI: Self.xlinkNamespace) {
            throw DownloadError(
                .unsupportedContent,
                "the MPD's \(element.description) is a remote element (xlink:href=\"\(SafePathText.printable(href))\"), which is not supported",
                url: url.absoluteString)
        }
    }

    /// The BaseURL candidates of `element`: its `BaseURL` children, in order (the first is the
    /// primary, the others mirrors), each resolved against every parent candidate; the parents
    /// themselves when it has none. Absolute BaseURLs reset the chain. Duplicates are dropped
    /// and at most ``maxMirrors`` are kept.
    func bases(of element: SafeXMLElement, parents: [URL]) throws(DownloadError) -> [URL] {
        let children = element.dashChildren(named: "BaseURL")
        guard !children.isEmpty else { return parents }
        var result: [URL] = []
        var seen = Set<String>()
        for parent in parents {
            for child in children {
                let text = child.text.trimmingCharacters(in: .whitespacesAndNewlines)
                let resolved: URL
                if text.isEmpty {
                    resolved = parent
                } else {
                    do {
                        resolved = try URLSafety.resolve(text, against: parent, context: "BaseURL at line \(child.line)")
                    } catch {
                        throw DownloadError(error.code, "the MPD's " + error.message, url: url.absoluteString)
                    }
                }
                if result.count < Self.maxMirrors, seen.insert(resolved.absoluteString).inserted { result.append(resolved) }
            }
        }
        return result
    }

    /// The kind of track: from the adaptation set's `@contentType` (or its `ContentComponent`),
    /// else the MIME type, refined by the codecs (a video MIME type with an audio codec as
    /// well is muxed; `stpp` and `wvtt` are subtitles).
    static func kind(contentType: String?, mimeType: String?, codecs: String?) -> MediaInfo.Kind {
        let codecList = (codecs ?? "").lowercased().split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        let videoCodecs = ["avc1", "avc3", "hev1", "hvc1", "dvh1", "dvhe", "vp08", "vp8", "vp09", "vp9", "av01", "mp4v"]
        let audioCodecs = ["mp4a", "ac-3", "ec-3", "ac-4", "opus", "vorbis", "flac", "dtsc", "dtse", "dtsh", "dtsl", "mha1", "mhm1", "alac"]
        let textCodecs = ["stpp", "wvtt", "tx3g", "c608", "c708"]
        func has(_ family: [String]) -> Bool {
            codecList.contains { codec in family.contains { codec == $0 || codec.hasPrefix($0 + ".") } }
        }
        let hasVideo = has(videoCodecs), hasAudio = has(audioCodecs)
        switch contentType?.lowercased() {
        case "video": return hasAudio && hasVideo ? .muxed : .video
        case "audio": return .audio
        case "text": return .subtitles
        case "image": return .other
        default: break
        }
        let mime = (mimeType ?? "").lowercased()
        if mime.hasPrefix("video/") { return hasAudio && hasVideo ? .muxed : (hasAudio && !hasVideo ? .audio : .video) }
        if mime.hasPrefix("audio/") { return .audio }
        if mime.hasPrefix("text/") || mime == "application/ttml+xml" || has(textCodecs) { return .subtitles }
        if mime.hasPrefix("image/") { return .other }
        if hasVideo { return hasAudio ? .muxed : .video }
        if hasAudio { return .audio }
        return .other
    }
}

/// Error messages that point at the element and line.
enum MPDErrors {
    /// "the MPD's <X> at line N …", code ``DownloadError/Code/manifestInvalid``.
    static func invalid(_ element: SafeXMLElement, _ text: String) -> DownloadError {
        DownloadError(.manifestInvalid, "the MPD's \(element.description) \(text)")
    }

    /// A non-negative whole number attribute, or `nil` when absent.
    static func integer(_ element: SafeXMLElement, _ name: String) throws(DownloadError) -> Int64? {
        guard let text = element[attribute: name] else { return nil }
        guard let value = Int64(text.trimmingCharacters(in: .whitespaces)), value >= 0 else {
            throw invalid(element, "has @\(name)=\"\(SafePathText.printable(text))\", which is not a whole number ≥ 0")
        }
        return value
    }

    /// A positive whole number attribute, or `nil` when absent.
    static func positive(_ element: SafeXMLElement, _ name: String) throws(DownloadError) -> Int64? {
        guard let value = try integer(element, name) else { return nil }
        guard value > 0 else { throw invalid(element, "has @\(name)=\"0\"; it must be greater than zero") }
        return value
    }

    /// An `xs:dateTime` attribute, or `nil` when absent (no zone: UTC).
    static func dateTime(_ element: SafeXMLElement, _ name: String) throws(DownloadError) -> Date? {
        guard let text = element[attribute: name] else { return nil }
        guard let date = ISO8601Time.date(from: text) else {
            throw invalid(element, "has @\(name)=\"\(SafePathText.printable(text))\", which is not a date and time such as 2024-05-01T10:00:00Z")
        }
        return date
    }

    /// An `xs:duration` attribute in nanoseconds, or `nil` when absent.
    static func duration(_ element: SafeXMLElement, _ name: String) throws(DownloadError) -> Int128? {
        guard let text = element[attribute: name] else { return nil }
        guard let value = MPDTime.parseDuration(text) else {
            throw invalid(
                element, "has @\(name)=\"\(SafePathText.printable(text))\", which is not an ISO 8601 duration such as PT1H2M3.5S")
        }
        return value
    }
}

/// Untrusted text made safe to quote in a message.
enum SafePathText {
    /// Control characters replaced by `?`, cut to 200 characters.
    static func printable(_ text: String) -> String { UntrustedText.printable(text, marksCut: false) }
}

extension SafeXMLElement {
    /// The child elements called `name` in the DASH namespace (``MPDReader/namespaces``).
    func dashChildren(named name: String) -> [SafeXMLElement] {
        children(named: name).filter { $0.namespaceURI.map(MPDReader.namespaces.contains) == true }
    }

    /// The first child element called `name` in the DASH namespace.
    func firstDASHChild(named name: String) -> SafeXMLElement? { dashChildren(named: name).first }
}
