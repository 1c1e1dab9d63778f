import Foundation
import Tessera

/// What a ``DASHEntity`` stores: the MPD's URL and which representations to download.
public struct DASHPayload: Codable, Sendable, Hashable {
    /// The MPD's URL, as given (without a fragment).
    public var url: URL
    /// Which representations to download.
    public var format: FormatSelector

    /// Creates a payload.
    public init(url: URL, format: FormatSelector = .best) {
        self.url = url
        self.format = format
    }
}

/// An MPEG-DASH presentation (ISO/IEC 23009-1): an MPD URL resolved into one output per
/// representation, each its initialization segment followed by its media segments.
///
/// ```swift
/// let registry = EntityRegistry()
/// DASHEntity.register(in: registry)
/// let entity = try registry.makeEntity(for: EntityInput("https://example.com/stream.mpd", format: "best"))
/// ```
///
/// What it reads:
/// - The MPD in the `urn:mpeg:dash:schema:mpd:2011` namespace, prefixed or default (also in
///   YouTube's `urn:mpeg:DASH:schema:MPD:2011` spelling, read as the standard one); another
///   root or namespace is refused (``DownloadError/Code/manifestInvalid``), and
///   `ContentProtection` on a selected representation is refused with
///   ``DownloadError/Code/unsupportedContent``.
/// - Live MPDs (`type="dynamic"`): a live manifest (``DownloadManifest/live``) that the manager
///   records through ``liveSource(for:in:)``: `availabilityStartTime`, `timeShiftBufferDepth`,
///   `minimumUpdatePeriod`, `publishTime` (an older MPD than the last one is not taken),
///   `SegmentTemplate` with `$Number$` and `@duration` or a `SegmentTimeline` that grows
///   between reloads (`$Time$` or `$Number$`), several periods, and `UTCTiming` for the clock
///   (see ``DASHLiveSource``). It ends when the MPD turns `static` or reaches its
///   `mediaPresentationDuration`, without asking for segments past the end.
/// - `BaseURL` at MPD, Period, AdaptationSet and Representation level, each resolved against
///   the one above (the MPD's own URL after redirects at the top); an absolute BaseURL starts
///   over; several BaseURLs at one level are mirrors, the first one primary. Each segment
///   lists every candidate URL, primary first (at most 8).
/// - `SegmentTemplate` (`$RepresentationID$`, `$Number$`, `$Time$`, `$Bandwidth$`, `$$`,
///   `%0<width>d`; `@startNumber`, `@endNumber`, `@timescale`, `@duration` or a
///   `SegmentTimeline` with `S@t`, `S@d`, `S@r` including `-1`), `SegmentList` (`SegmentURL`
///   `@media`/`@mediaRange`, `Initialization@sourceURL`/`@range`) and `SegmentBase` or a plain
///   BaseURL (the whole file as one segment; its `sidx` is not read). Their attributes are
///   inherited Period → AdaptationSet → Representation, attribute by attribute;
///   `SegmentTimeline`, `Initialization` and the `SegmentURL` list as a whole.
/// - Several periods: each output concatenates its representation's segments period after
///   period. A later period's representation is the one with the same `@id`; failing that,
///   the one of the same kind (video, audio, …) with the closest bandwidth (the first such in
///   document order on a tie); a period with no representation of that kind adds nothing. A
///   later period's initialization segment is left out when it is the same resource (URL and
///   range) as the one before it in the output.
///
/// Outputs are named `<MPD name>/<representation id>.<ext>` (`stream.mpd`'s representation
/// `v720` with `video/mp4` → `stream/v720.mp4`); every representation is listed, the selected
/// ones (``DASHPayload/format``, default ``FormatSelector/best``: the best video plus the best
/// audio by bandwidth) have ``DownloadOutput/isSelected`` set.
public final class DASHEntity: PayloadEntity<DASHPayload>, LiveStreamParser, @unchecked Sendable {
    /// `"dash"`.
    override public class var entityType: String { "dash" }

    /// The MPEG-DASH MPD namespace.
    public static let namespace = MPDReader.namespace

    /// The URLs taken as MPDs: a path ending in `.mpd` (case-insensitive), before a query or a
    /// fragment (what the matcher's ``EntityMatcher/Rule/pathExtensions(_:)`` rule accepts).
    public static let urlPattern = #"\.mpd(\?|#|$)"#

    /// The path extensions taken as MPDs.
    public static let pathExtensions = ["mpd"]

    /// The `Content-Type` of MPDs.
    public static let contentTypes = ["application/dash+xml"]

    /// Accepts http(s) URLs whose path ends in `.mpd` or served as `application/dash+xml`; the
    /// entity key is the URL (without its fragment) and the variant the format selector.
    public static let matcher = EntityMatcher(
        plugin: "dash", summary: "MPEG-DASH MPD URLs (.mpd, application/dash+xml): every representation, best video + audio by default",
        rules: [.pathExtensions(pathExtensions), .contentType(contentTypes)]
    ) { input, key in
        guard let url = URL(string: key) else {
            throw DownloadError(.invalidRequest, "\"\(key)\" is not a URL")
        }
        let format = try FormatSelector(input.format ?? "best")
        return DASHEntity(url: url, format: format, destinationDirectory: input.destinationDirectory)
    }

    /// The inputs this plugin accepts: ``matcher``.
    public static var matchers: [EntityMatcher] { [matcher] }

    /// Registers the class and its matchers.
    public static func register(in registry: EntityRegistry) {
        registry.register(DASHEntity.self, matchers: matchers)
    }

    /// Creates an entity for the MPD at `url` (its fragment, which no server sees, is dropped).
    public convenience init(url: URL, format: FormatSelector = .best, destinationDirectory: String = "") {
        var components = URLComponents(url: url, resolvingAgainstBaseURL: true)
        components?.fragment = nil
        let url = components?.url ?? url
        let name = Self.directoryName(for: url)
        self.init(
            payload: DASHPayload(url: url, format: format), entityKey: url.absoluteString, variantKey: format.description,
            title: name, destinationDirectory: destinationDirectory)
    }

    /// The directory the outputs go in when the MPD has no title (`<ProgramInformation><Title>`;
    /// with one, the folder is named by the title, made a safe file name, as yt-dlp names its
    /// files): the MPD's file name without `.mpd`, made safe
    /// (`https://cdn/a/stream.mpd?x=1` → `stream`). A file named just `.mpd` (Unified
    /// Streaming's `…/movie.ism/.mpd`) takes its directory's name without `.ism`/`.isml`
    /// (`movie`); `manifest` when the URL names nothing.
    public var outputDirectory: String { Self.directoryName(for: payload.url) }

    static func directoryName(for url: URL) -> String {
        let path = URLComponents(url: url, resolvingAgainstBaseURL: true)?.percentEncodedPath ?? url.path
        let components = path.split(separator: "/").map { $0.removingPercentEncoding ?? String($0) }
        var name = components.last ?? ""
        if name.lowercased().hasSuffix(".mpd") { name.removeLast(4) }
        if name.isEmpty, components.count >= 2 {
            name = components[components.count - 2]
            for suffix in [".ism", ".isml"] where name.lowercased().hasSuffix(suffix) {
                name.removeLast(suffix.count)
            }
        }
        return SafePath.sanitizedFileName(name, fallback: "manifest")
    }

    /// Fetches the MPD through the context (the same engine, headers and limits as the
    /// segments) and builds the manifest against the URL it was finally served from.
    public func resolve(in context: ResolveContext) async throws -> DownloadManifest {
        try URLSafety.check(payload.url, context: "the MPD URL")
        let (document, source) = try await context.fetchXML(payload.url)
        return try manifest(from: document, url: source.url, maxSegments: context.maxSegments)
    }

    /// Builds the manifest from a parsed MPD, without any network access.
    ///
    /// - Parameters:
    ///   - document: The MPD.
    ///   - url: The URL the MPD was served from, after redirects: relative BaseURLs and
    ///     segment URLs resolve against it.
    ///   - maxSegments: More segments than this (over every representation) is refused with
    ///     ``DownloadError/Code/manifestTooLarge`` before any is built.
    /// - Throws: ``DownloadError``: `manifestInvalid` (naming the element and line),
    ///   `manifestTooLarge`, `unsafeInput` (a URL that is not http(s) or has control
    ///   characters), `unsafePath` (a representation id that cannot be a file name),
    ///   `unsupportedContent` (DRM, remote elements), `invalidRequest` (a format naming
    ///   no representation).
    ///   - now: For a live (dynamic) MPD, the time on the MPD's clock the outputs' segments are
    ///     shown for (the recording computes its own windows).
    public func manifest(from document: SafeXMLDocument, url: URL, maxSegments: Int = 1_000_000, now: Date = Date()) throws(DownloadError)
        -> DownloadManifest
    {
        try URLSafety.check(url, context: "the MPD's URL")
        let mpd = try MPDReader(document: document, url: url).read()
        let tracks = try Self.tracks(of: mpd)
        let selected = try Self.select(tracks.map(\.first), format: payload.format)
        for index in selected.sorted() {
            try Self.refuseProtected(tracks[index])
        }
        if mpd.isDynamic { return try liveManifest(mpd, tracks: tracks, selected: selected, url: url, now: now) }

        // Count every segment before building any.
        var plans: [[SegmentPlan]] = []
        var total: Int128 = 0
        for track in tracks {
            var trackPlans: [SegmentPlan] = []
            for representation in track.parts {
                let remaining = max(0, Int128(maxSegments) - total)
                let plan: SegmentPlan
                do {
                    plan = try SegmentPlanner.plan(
                        representation, in: mpd.periods[representation.periodIndex], limit: Int(min(remaining, Int128(Int.max))))
                } catch where error.code == .manifestTooLarge {
                    throw DownloadError(
                        .manifestTooLarge,
                        "\(error.message): the MPD may describe at most \(maxSegments) segments in all (the limit, ResolveContext.maxSegments)",
                        url: url.absoluteString)
                }
                total += plan.segmentCount
                if total > Int128(maxSegments) {
                    throw DownloadError(
                        .manifestTooLarge,
                        "the MPD describes more than \(maxSegments) segments (the limit, ResolveContext.maxSegments); representation \"\(SafePathText.printable(representation.id))\" alone has \(plan.segmentCount)",
                        url: url.absoluteString)
                }
                trackPlans.append(plan)
            }
            plans.append(trackPlans)
        }

        let directory = mpd.title.map { SafePath.sanitizedFileName($0, fallback: outputDirectory) } ?? outputDirectory
        let fileNames = Self.fileNames(of: tracks)
        var outputs: [DownloadOutput] = []
        var names: [String: Int] = [:]
        for (index, track) in tracks.enumerated() {
            let representation = track.first
            var segments = SegmentList()
            var lastInitialization: DownloadSegment?
            var firstMedia: DownloadSegment?
            for plan in plans[index] {
                let (initialization, media) = try plan.segments()
                if let initialization {
                    if lastInitialization?.urls != initialization.urls || lastInitialization?.range != initialization.range {
                        segments.append(initialization)
                    }
                    lastInitialization = initialization
                }
                if firstMedia == nil { firstMedia = media.first }
                segments.append(contentsOf: media)
            }
            let name = try Self.outputName(
                of: tracks, at: index, fileNames: fileNames, directory: directory, firstMedia: firstMedia, names: &names, url: url)
            outputs.append(DownloadOutput(
                name: name, assembly: .concatenated, segments: segments, isSelected: selected.contains(index),
                media: Self.mediaInfo(of: representation)))
        }

        var metadata: [String: String] = [
            "format": payload.format.description,
            "periods": String(mpd.periods.count),
            "representations": String(tracks.count),
            "segments": String(total),
        ]
        if let duration = mpd.duration ?? mpd.periods.last.flatMap({ period in period.duration.map { period.start + $0 } }) {
            metadata["duration"] = MPDTime.describe(duration)
        }
        if let profiles = mpd.profiles { metadata["profiles"] = profiles }
        let modes = Set(plans.flatMap { $0.map(\.mode) }).sorted()
        metadata["addressing"] = modes.joined(separator: ", ")
        var manifest = DownloadManifest(title: mpd.title ?? directory, outputs: outputs, sourceURL: url, metadata: metadata)
        // `all`: every representation, each a file of its own (never merged together).
        manifest.selectsAlternatives = payload.format == .all
        return manifest
    }

    /// The file names of the tracks, before their extensions: the representation id, but for an
    /// audio or subtitle track whose id is only a kind and a number, its language, unless another
    /// track's file would have the same name.
    static func fileNames(of tracks: [Track]) -> [String] {
        var fileNames = tracks.map { track in
            [.audio, .subtitles].contains(track.first.kind)
                ? MediaInfo.trackFileName(name: track.first.id, language: track.first.language) : track.first.id
        }
        var counts: [String: Int] = [:]
        for name in fileNames + tracks.map(\.first.id) { counts[name.lowercased(), default: 0] += 1 }
        for index in fileNames.indices where fileNames[index] != tracks[index].first.id && counts[fileNames[index].lowercased()]! > 1 {
            fileNames[index] = tracks[index].first.id
        }
        return fileNames
    }

    /// The name of track `index`'s output, `<directory>/<file name>.<ext>` (see
    /// ``fileNames(of:)``), unique among `names` (which it joins).
    static func outputName(
        of tracks: [Track], at index: Int, fileNames: [String], directory: String, firstMedia: DownloadSegment?,
        names: inout [String: Int], url: URL
    ) throws(DownloadError) -> String {
        let representation = tracks[index].first
        let idName: String
        do {
            idName = try SafePath.relative(fileNames[index])
        } catch {
            throw DownloadError(
                .unsafePath,
                "the MPD's representation id \"\(SafePathText.printable(representation.id))\" at line \(representation.element.line) cannot be a file name: \(error.message)",
                url: url.absoluteString)
        }
        let ext = Self.fileExtension(mimeType: representation.mimeType, segment: firstMedia)
        let name = try SafePath.relative("\(directory)/\(idName).\(ext)")
        if let other = names[name] {
            throw DownloadError(
                .manifestInvalid,
                "the MPD's representations \"\(SafePathText.printable(tracks[other].first.id))\" (line \(tracks[other].first.element.line)) and \"\(SafePathText.printable(representation.id))\" (line \(representation.element.line)) would both be saved as \(name)",
                url: url.absoluteString)
        }
        names[name] = index
        return name
    }

    /// What an output of `representation` holds.
    static func mediaInfo(of representation: MPDRepresentation) -> MediaInfo {
        MediaInfo(
            kind: representation.kind, identifier: representation.id, bandwidth: representation.bandwidth.map { Int($0) },
            width: representation.width, height: representation.height, codecs: representation.codecs,
            language: representation.language, quality: representation.height.map { "\($0)p" })
    }

    // MARK: - Tracks across periods

    /// One output: a representation of the first period that has any, and the representation
    /// that continues it in every period (itself first).
    struct Track {
        var first: MPDRepresentation
        var parts: [MPDRepresentation]
    }

    /// The tracks: every representation of the first period that has representations (ids
    /// must be unique there), continued in later periods by id, else by kind and closest
    /// bandwidth.
    static func tracks(of mpd: MPD) throws(DownloadError) -> [Track] {
        guard let firstIndex = mpd.periods.firstIndex(where: { !$0.representations.isEmpty }) else {
            throw DownloadError(.manifestInvalid, "the MPD lists no <Representation>")
        }
        var tracks: [Track] = []
        var seen: [String: MPDRepresentation] = [:]
        for representation in mpd.periods[firstIndex].representations {
            if let other = seen[representation.id] {
                throw MPDErrors.invalid(
                    representation.element,
                    "has the id \"\(SafePathText.printable(representation.id))\" of the representation at line \(other.element.line); ids must be unique within a period")
            }
            seen[representation.id] = representation
            tracks.append(Track(first: representation, parts: [representation]))
        }
        for period in mpd.periods[(firstIndex + 1)...] {
            let candidates = period.representations
            for index in tracks.indices {
                let track = tracks[index].first
                if let same = candidates.first(where: { $0.id == track.id }) {
                    tracks[index].parts.append(same)
                    continue
                }
                var best: MPDRepresentation?
                var bestDistance = Int64.max
                for candidate in candidates where candidate.kind == track.kind {
                    let distance = abs((candidate.bandwidth ?? 0) - (track.bandwidth ?? 0))
                    if best == nil || distance < bestDistance {
                        best = candidate
                        bestDistance = distance
                    }
                }
                if let best { tracks[index].parts.append(best) }
            }
        }
        return tracks
    }

    // MARK: - Selection

    /// The indices of the representations `format` selects.
    ///
    /// - `best`: the video (or muxed) representation with the highest bandwidth (then the most
    ///   pixels, then the first) plus the audio one with the highest bandwidth; no subtitles.
    ///   When there is neither video nor audio, the representation with the highest bandwidth.
    /// - `worst`: the same with the lowest bandwidth.
    /// - `all`: every representation.
    /// - identifiers: the representations with these ids; an unknown id is an
    ///   ``DownloadError/Code/invalidRequest`` that lists the ids there are.
    static func select(_ representations: [MPDRepresentation], format: FormatSelector) throws(DownloadError) -> Set<Int> {
        func extreme(_ kinds: Set<MediaInfo.Kind>?, highest: Bool) -> Int? {
            var chosen: Int?
            for (index, representation) in representations.enumerated() where kinds?.contains(representation.kind) ?? true {
                guard let current = chosen else {
                    chosen = index
                    continue
                }
                let a = representations[index], b = representations[current]
                let key = (a.bandwidth ?? 0, Int64(a.width ?? 0) * Int64(a.height ?? 0))
                let other = (b.bandwidth ?? 0, Int64(b.width ?? 0) * Int64(b.height ?? 0))
                if highest ? key > other : key < other { chosen = index }
            }
            return chosen
        }
        switch format {
        case .all:
            return Set(representations.indices)
        case .best, .worst:
            let highest = format == .best
            var chosen = Set<Int>()
            if let video = extreme([.video, .muxed], highest: highest) { chosen.insert(video) }
            if let audio = extreme([.audio], highest: highest) { chosen.insert(audio) }
            if chosen.isEmpty, let any = extreme([.other], highest: highest) ?? extreme(nil, highest: highest) { chosen.insert(any) }
            return chosen
        case .identifiers(let ids):
            var chosen = Set<Int>()
            for id in ids {
                guard let index = representations.firstIndex(where: { $0.id == id }) else {
                    let available = representations.map(describe).joined(separator: ", ")
                    throw DownloadError(
                        .invalidRequest,
                        "the MPD has no representation \"\(SafePathText.printable(id))\"; its representations are: \(available)")
                }
                chosen.insert(index)
            }
            return chosen
        }
    }

    /// `v720 (video 1280x720, 2400 kb/s)`.
    static func describe(_ representation: MPDRepresentation) -> String {
        var facts = [representation.kind.rawValue]
        if let width = representation.width, let height = representation.height { facts[0] += " \(width)x\(height)" }
        if let language = representation.language { facts.append(language) }
        if let bandwidth = representation.bandwidth { facts.append("\(bandwidth / 1000) kb/s") }
        return "\(SafePathText.printable(representation.id)) (\(facts.joined(separator: ", ")))"
    }

    /// Refuses a track with `ContentProtection` in any of its periods.
    static func refuseProtected(_ track: Track) throws(DownloadError) {
        for representation in track.parts {
            guard let protection = representation.protections.first else { continue }
            throw DownloadError(
                .unsupportedContent,
                "the representation \"\(SafePathText.printable(representation.id))\" is DRM-protected (ContentProtection \(SafePathText.printable(protection.label)) at line \(protection.line)); DRM-protected streams are not supported, choose unprotected representations with a format selector")
        }
    }

    // MARK: - Names

    /// The extension for a MIME type, else the first media segment's URL's, else `bin`.
    static func fileExtension(mimeType: String?, segment: DownloadSegment?) -> String {
        let known: [String: String] = [
            "video/mp4": "mp4", "audio/mp4": "m4a", "text/vtt": "vtt", "video/webm": "webm", "audio/webm": "webm",
            "application/ttml+xml": "ttml", "video/mp2t": "ts", "audio/mp2t": "ts", "image/jpeg": "jpg", "image/png": "png",
        ]
        let mime = mimeType?.split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        if let mime, let ext = known[mime] { return ext }
        if let url = segment?.urls.first {
            let ext = url.pathExtension.lowercased()
            if !ext.isEmpty, ext.count <= 8, ext.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) { return ext }
        }
        return "bin"
    }
}
