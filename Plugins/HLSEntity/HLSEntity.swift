import Foundation
import Tessera

/// The state of an ``HLSEntity``: what to fetch and which variants to take.
public struct HLSEntityPayload: Codable, Sendable, Hashable {
    /// The playlist's URL (master or media), as given.
    public var url: URL
    /// The format selector's text (`best`, `worst`, `all`, `720p+English`).
    public var format: String

    /// Creates a payload.
    public init(url: URL, format: String = "best") {
        self.url = url
        self.format = format
    }
}

/// HTTP Live Streaming (RFC 8216): an `.m3u8` playlist becomes one concatenated file per
/// selected variant or rendition.
///
/// A master playlist is fetched, its variants (`#EXT-X-STREAM-INF`) and renditions
/// (`#EXT-X-MEDIA`) are named (``HLSVariant/identifier``: `720p`, `v2-64000`;
/// ``HLSRendition/identifier``: the `NAME`), the format selector picks some of them, and every
/// media playlist is fetched (relative URIs against each playlist's URL after redirects). A
/// media playlist given directly is one output. Outputs are `<folder>/<identifier>.<ext>`, the
/// folder named by the stream's title (``HLSMasterPlaylist/title``) or else by the playlist's
/// name: `.ts`, `.mp4` for fragmented MP4 (with `#EXT-X-MAP`),
/// `.aac`/`.m4a` for audio, `.vtt` for subtitles; each starts with its initialisation section
/// and holds the segments in order, decrypted by the manager (`METHOD=AES-128`). Every variant
/// and rendition with a playlist is an output of the manifest; the unselected ones are listed,
/// not downloaded.
///
/// ```swift
/// let registry = EntityRegistry()
/// HLSEntity.register(in: registry)
/// let entity = try registry.makeEntity(for: EntityInput("https://example.com/show/master.m3u8", format: "best"))
/// ```
///
/// Live and event playlists (no `#EXT-X-ENDLIST`) resolve into a live manifest
/// (``DownloadManifest/live``): the manager records them, reloading each selected media playlist
/// (``liveSource(for:in:)``, ``HLSMediaPlaylist/liveWindow()``).
///
/// Refused: `SAMPLE-AES` and key formats other than `identity`
/// (``DownloadError/Code/unsupportedContent``); URLs that are not http(s)
/// (``DownloadError/Code/unsafeInput``); rendition names that would leave the download
/// directory (``DownloadError/Code/unsafePath``); more segments than the limit
/// (``DownloadError/Code/manifestTooLarge``).
public final class HLSEntity: PayloadEntity<HLSEntityPayload>, LiveStreamParser, @unchecked Sendable {
    /// `"hls"`.
    override public class var entityType: String { "hls" }

    /// The `Content-Type`s of HLS playlists.
    public static let contentTypes = [
        "application/vnd.apple.mpegurl", "application/x-mpegurl", "audio/mpegurl", "audio/x-mpegurl",
    ]

    /// URLs whose path ends in `.m3u8` (what the matcher's
    /// ``EntityMatcher/Rule/pathExtensions(_:)`` rule accepts).
    public static let urlPattern = #"\.m3u8(\?|#|$)"#

    /// The path extensions taken as HLS playlists.
    public static let pathExtensions = ["m3u8"]

    /// At most this many media playlists (variants and renditions) are fetched for one master
    /// playlist; a master that lists more is refused with ``DownloadError/Code/manifestTooLarge``.
    public static let maxMediaPlaylists = 256

    /// Accepts http(s) URLs ending in `.m3u8` and URLs probed as one of ``contentTypes``; the key
    /// is the URL and the input's format (default `best`) becomes the variant key.
    public static var matchers: [EntityMatcher] {
        [
            EntityMatcher(
                plugin: "hls", summary: "HLS playlists (.m3u8): variants and renditions, byte ranges, fMP4, AES-128",
                rules: [.pathExtensions(pathExtensions), .contentType(contentTypes)]
            ) { input, key in
                guard let url = input.url ?? URL(string: key) else {
                    throw DownloadError(.noMatchingEntity, "\"\(input.text)\" is not an http or https URL")
                }
                return HLSEntity(
                    url: url, format: try FormatSelector(input.format ?? "best"), destinationDirectory: input.destinationDirectory)
            }
        ]
    }

    /// Registers the class and its matchers.
    public static func register(in registry: EntityRegistry) {
        registry.register(HLSEntity.self, matchers: matchers)
    }

    /// Creates an entity for the playlist at `url` (its fragment, which no server sees, is
    /// dropped: the URL is the entity key), taking what `format` selects.
    public convenience init(url: URL, format: FormatSelector = .best, destinationDirectory: String = "") {
        var components = URLComponents(url: url, resolvingAgainstBaseURL: true)
        components?.fragment = nil
        let url = components?.url ?? url
        let name = Self.playlistName(of: url)
        self.init(
            payload: HLSEntityPayload(url: url, format: format.description), entityKey: url.absoluteString,
            variantKey: format.description, title: name, destinationDirectory: destinationDirectory)
    }

    /// The format selector.
    public var format: FormatSelector { (try? FormatSelector(payload.format)) ?? .best }

    /// The name of the file a media playlist's output gets, and of the folder a master
    /// playlist's outputs go in when it names no title (with `#EXT-X-SESSION-DATA` of
    /// `DATA-ID="com.apple.hls.title"`, ``HLSMasterPlaylist/title``, the folder is named by the
    /// title): the URL's last path component without `.m3u8`, made safe.
    public var playlistName: String { Self.playlistName(of: payload.url) }

    /// The last path component of `url` without its extension, made a safe file name
    /// (`playlist` when nothing is left).
    public static func playlistName(of url: URL) -> String {
        let last = url.deletingPathExtension().lastPathComponent
        return last == "/" ? "playlist" : SafePath.sanitizedFileName(last, fallback: "playlist")
    }

    /// An output's name, `<directory>/<identifier>.<fileExtension>`, or
    /// ``DownloadError/Code/unsafePath`` when the identifier (a rendition's `NAME` from the
    /// playlist) is empty, absolute, has a `..` component or a control character.
    public static func outputName(directory: String, identifier: String, fileExtension: String) throws(DownloadError) -> String {
        let checked = try SafePath.relative(identifier)
        return try SafePath.relative("\(directory)/\(checked).\(fileExtension)")
    }

    /// The file extension for a media playlist holding `kind`: `mp4`/`m4a` for fragmented MP4
    /// (with `#EXT-X-MAP`), the segments' own for packed audio (`aac`, `mp3`, `ac3`, `ec3`) and
    /// MPEG-TS audio, `aac` for other audio, `vtt` for subtitles, `ts` otherwise.
    package static func fileExtension(for playlist: HLSMediaPlaylist, kind: MediaInfo.Kind) -> String {
        let segmentExtension = playlist.segments.first?.url.pathExtension.lowercased() ?? ""
        switch kind {
        case .audio:
            if playlist.hasInitSection { return "m4a" }
            return ["aac", "mp3", "ac3", "ec3", "ts"].contains(segmentExtension) ? segmentExtension : "aac"
        case .subtitles:
            return playlist.hasInitSection ? "mp4" : "vtt"
        default:
            return playlist.hasInitSection ? "mp4" : "ts"
        }
    }

    /// Fetches the playlist (and, for a master, the media playlists) and builds the manifest.
    public func resolve(in context: ResolveContext) async throws -> DownloadManifest {
        let selector = try FormatSelector(payload.format)
        let document = try await context.fetch(payload.url)
        switch try HLSPlaylist.parse(document.data, url: document.url, maxSegments: context.maxSegments) {
        case .media(let media):
            return try manifest(for: media, selector: selector, context: context)
        case .master(let master):
            return try await manifest(for: master, selector: selector, context: context)
        }
    }

    // MARK: - A media playlist given directly

    private func manifest(for media: HLSMediaPlaylist, selector: FormatSelector, context: ResolveContext) throws(DownloadError)
        -> DownloadManifest
    {
        let name = playlistName
        if case .identifiers(let names) = selector, !names.contains(where: { $0.lowercased() == name.lowercased() }) {
            throw DownloadError(
                .invalidRequest,
                "the media playlist has one stream, called \"\(name)\"; there is nothing called "
                    + names.map { "\"\(HLSAttributeList.excerpt($0))\"" }.joined(separator: " or "),
                url: media.url.absoluteString)
        }
        let count = media.downloadSegmentCount
        guard count <= context.maxSegments else {
            throw DownloadError(
                .manifestTooLarge, "the media playlist has \(count) segments, more than the limit of \(context.maxSegments)",
                url: media.url.absoluteString)
        }
        let audioExtensions: Set<String> = ["aac", "mp3", "ac3", "ec3", "m4a"]
        let kind: MediaInfo.Kind =
            audioExtensions.contains(media.segments.first?.url.pathExtension.lowercased() ?? "") ? .audio : .muxed
        let fileExtension = Self.fileExtension(for: media, kind: kind)
        let output = DownloadOutput(
            name: try SafePath.relative("\(name).\(fileExtension)"), assembly: .concatenated,
            segments: try media.downloadSegments(), media: MediaInfo(kind: kind, identifier: name))
        var metadata = ["playlist": "media", "duration": Self.seconds(media.duration)]
        var live: LiveManifestInfo?
        if media.isLive {
            metadata[Self.playlistKey(0)] = payload.url.absoluteString
            let window = media.liveWindow()
            live = LiveManifestInfo(kind: "HLS", targetDuration: window.targetDuration, windowSegments: window.segments.count)
        }
        return DownloadManifest(title: name, outputs: [output], sourceURL: media.url, metadata: metadata, live: live)
    }

    /// The metadata key under which a live manifest keeps the media playlist of output `index`.
    static func playlistKey(_ index: Int) -> String { "hls.mediaPlaylist.\(index)" }

    // MARK: - A master playlist

    /// One media playlist to fetch and turn into an output.
    private struct Job {
        var identifier: String
        /// Its file's name (without the extension): the identifier, or a rendition's language.
        var fileName: String
        var label: String
        var url: URL
        var kind: MediaInfo.Kind
        var media: MediaInfo
        var isSelected: Bool
    }

    private func manifest(for master: HLSMasterPlaylist, selector: FormatSelector, context: ResolveContext) async throws
        -> DownloadManifest
    {
        let selection = try master.select(selector)
        var jobs: [Job] = []
        for (index, variant) in master.variants.enumerated() {
            jobs.append(Job(
                identifier: variant.identifier, fileName: variant.identifier,
                label: "the \(variant.identifier) variant (line \(variant.line))",
                url: variant.url, kind: variant.kind,
                media: MediaInfo(
                    kind: variant.kind, identifier: variant.identifier, bandwidth: variant.bandwidth, width: variant.width,
                    height: variant.height, codecs: variant.codecs),
                isSelected: selection.variants.contains(index)))
        }
        for (index, rendition) in master.renditions.enumerated() {
            guard let url = rendition.url else { continue }
            let kind: MediaInfo.Kind =
                switch rendition.type {
                case .audio: .audio
                case .video: .video
                case .subtitles: .subtitles
                case .closedCaptions: .other
                }
            jobs.append(Job(
                identifier: rendition.identifier,
                fileName: MediaInfo.trackFileName(name: rendition.identifier, language: rendition.language),
                label: "the \(rendition.identifier) rendition (line \(rendition.line))",
                url: url, kind: kind,
                media: MediaInfo(kind: kind, identifier: rendition.identifier, language: rendition.language),
                isSelected: selection.renditions.contains(index)))
        }
        guard jobs.count <= Self.maxMediaPlaylists, jobs.count <= context.maxSegments else {
            throw DownloadError(
                .manifestTooLarge,
                "the master playlist lists \(jobs.count) media playlists, more than the limit of "
                    + "\(min(Self.maxMediaPlaylists, context.maxSegments))",
                url: master.url.absoluteString)
        }
        // A file named after a language that another track's name or language also gives keeps
        // the track's own name.
        var fileNames: [String: Int] = [:]
        for job in jobs { fileNames[job.fileName.lowercased(), default: 0] += 1 }
        for index in jobs.indices where jobs[index].fileName != jobs[index].identifier && fileNames[jobs[index].fileName.lowercased()]! > 1 {
            jobs[index].fileName = jobs[index].identifier
        }
        // Names first: a hostile rendition name fails before anything else is fetched.
        let directory = master.title.map { SafePath.sanitizedFileName($0, fallback: playlistName) } ?? playlistName
        for job in jobs { _ = try Self.outputName(directory: directory, identifier: job.fileName, fileExtension: "ts") }
        // Selected outputs first, so their indices stay put whatever happens to the others.
        jobs = jobs.filter(\.isSelected) + jobs.filter { !$0.isSelected }

        var unique: [URL] = []
        var seen = Set<URL>()
        for job in jobs where seen.insert(job.url).inserted { unique.append(job.url) }
        let results = await Self.fetchMediaPlaylists(unique, context: context)
        try Task.checkCancellation()

        var built: [(Job, HLSMediaPlaylist)] = []
        var metadata = [
            "playlist": "master", "variants": "\(master.variants.count)",
            "renditions": "\(master.renditions.filter { $0.url != nil }.count)",
        ]
        var total = 0
        for job in jobs {
            switch results[job.url] ?? .failure(DownloadError(.cancelled, "not fetched")) {
            case .success(let playlist):
                built.append((job, playlist))
                total += playlist.downloadSegmentCount
            case .failure(let error):
                let fatal: Set<DownloadError.Code> = [.unsafeInput, .unsafePath, .manifestTooLarge, .cancelled, .engineShutDown]
                if job.isSelected || fatal.contains(error.code) { throw error.prefixed("\(job.label): ") }
                // An alternative that cannot be had does not stop the selected ones.
                metadata["skipped.\(job.identifier)"] = error.description
                context.logger.warning("HLS: skipping \(job.label) of \(master.url.absoluteString): \(error)")
            }
        }
        guard total <= context.maxSegments else {
            throw DownloadError(
                .manifestTooLarge, "the playlists have \(total) segments in all, more than the limit of \(context.maxSegments)",
                url: master.url.absoluteString)
        }
        var outputs: [DownloadOutput] = []
        outputs.reserveCapacity(built.count)
        var live: LiveManifestInfo?
        for (job, playlist) in built {
            let name = try Self.outputName(
                directory: directory, identifier: job.fileName, fileExtension: Self.fileExtension(for: playlist, kind: job.kind))
            metadata[Self.playlistKey(outputs.count)] = job.url.absoluteString
            outputs.append(DownloadOutput(
                name: name, assembly: .concatenated, segments: try playlist.downloadSegments(), isSelected: job.isSelected,
                media: job.media))
            if job.isSelected, metadata["duration"] == nil { metadata["duration"] = Self.seconds(playlist.duration) }
            if job.isSelected, playlist.isLive, live == nil {
                let window = playlist.liveWindow()
                live = LiveManifestInfo(kind: "HLS", targetDuration: window.targetDuration, windowSegments: window.segments.count)
            }
        }
        if live == nil {
            for index in outputs.indices { metadata[Self.playlistKey(index)] = nil }
        }
        var manifest = DownloadManifest(
            title: master.title ?? directory, outputs: outputs, sourceURL: master.url, metadata: metadata, live: live)
        // `all`: every variant and rendition, each a file of its own (never merged together).
        manifest.selectsAlternatives = selector == .all
        return manifest
    }

    /// Fetches and parses media playlists, four at a time.
    private static func fetchMediaPlaylists(_ urls: [URL], context: ResolveContext) async
        -> [URL: Result<HLSMediaPlaylist, DownloadError>]
    {
        await withTaskGroup(of: (URL, Result<HLSMediaPlaylist, DownloadError>).self) { group in
            var iterator = urls.makeIterator()
            var results: [URL: Result<HLSMediaPlaylist, DownloadError>] = [:]
            func addNext() {
                guard let url = iterator.next() else { return }
                group.addTask { (url, await fetchMediaPlaylist(url, context: context)) }
            }
            for _ in 0..<4 { addNext() }
            while let (url, result) = await group.next() {
                results[url] = result
                addNext()
            }
            return results
        }
    }

    static func fetchMediaPlaylist(_ url: URL, context: ResolveContext) async -> Result<HLSMediaPlaylist, DownloadError> {
        do {
            let document = try await context.fetch(url)
            switch try HLSPlaylist.parse(document.data, url: document.url, maxSegments: context.maxSegments) {
            case .media(let media):
                return .success(media)
            case .master:
                return .failure(DownloadError(
                    .manifestInvalid, "the playlist is a master playlist where a media playlist was expected",
                    url: document.url.absoluteString))
            }
        } catch {
            return .failure(error)
        }
    }

    private static func seconds(_ value: Double) -> String {
        String(format: "%.3f", value)
    }
}
