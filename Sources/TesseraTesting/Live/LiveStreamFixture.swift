import Foundation
import Tessera

/// A live stream on a ``LoopbackOrigin``: it publishes the segments of a ``LiveMedia`` one by
/// one on a clock (a segment is out once its media's end has passed), offers a sliding window of
/// them, and ends, stalls or goes on as told. HLS (a media playlist, or a master playlist with a
/// video variant and an audio rendition; discontinuities, AES-128 keys that rotate, a media
/// sequence that restarts) or DASH (`type="dynamic"` with `$Number$` and `@duration`, or a
/// `SegmentTimeline` that grows; `UTCTiming`; it turns `static` or announces its duration).
///
/// Run the stream and its recorder on one ``ScaledLiveClock`` to publish a minute of segments in
/// seconds. Everything is computed from the clock when a request comes: nothing runs between
/// requests.
///
/// ```swift
/// let clock = ScaledLiveClock(rate: 10)
/// var options = LiveStreamFixture.Options()
/// options.clock = clock
/// let stream = LiveStreamFixture(try await LiveMedia.hls(segments: 30), options: options)
/// let url = stream.install(on: origin)     // the playlist's URL; segment 0 … window-1 are out
/// ```
public final class LiveStreamFixture: Sendable {
    /// How the stream is described.
    public enum Format: String, Sendable, Hashable {
        /// HLS: a media playlist (one track) or a master playlist (video and audio).
        case hls
        /// DASH with `SegmentTemplate` `$Number$` and `@duration`.
        case dashNumber
        /// DASH with `SegmentTemplate` `$Time$` and a `SegmentTimeline` that grows.
        case dashTimeline
    }

    /// How a DASH stream says it ended.
    public enum DASHEnding: String, Sendable, Hashable {
        /// The MPD turns `type="static"` once the last segment is out.
        case turnsStatic
        /// The MPD stays dynamic and announces `mediaPresentationDuration` from the start.
        case announcesDuration
    }

    /// What the stream does.
    public struct Options: Sendable {
        /// HLS or DASH.
        public var format: Format = .hls
        /// Segments the playlist (or the time-shift buffer) offers.
        public var window = 6
        /// Segments out when the stream is installed (default: a full window).
        public var preroll: Int?
        /// Segments published in all (default: all the media has).
        public var total: Int?
        /// Whether the stream says it ended after the last segment (`#EXT-X-ENDLIST`, a static
        /// MPD); `false`: it stalls (the playlist stops changing, nothing says it ended).
        public var ends = true
        /// How a DASH stream ends.
        public var dashEnding: DASHEnding = .turnsStatic
        /// HLS: a discontinuity before every `n`-th segment, the media switching between the
        /// fixture's two ``LiveMedia`` (needs the alternate).
        public var discontinuityEvery: Int?
        /// HLS: AES-128, a new key (`key-<n>.bin`) every `n` segments, IV from the media sequence.
        public var keyRotationEvery: Int?
        /// HLS: the media sequence number of the first segment.
        public var firstSequence = 0
        /// HLS: the packager restarts before this segment: media sequence numbers start again from
        /// 0 (the segments keep their own URIs).
        public var sequenceResetAt: Int?
        /// Whether a segment that left the window (and two more) is still served; otherwise 404.
        public var servesGoneSegments = false
        /// DASH: whether the MPD has a `UTCTiming` (`http-iso`) pointing at this origin.
        public var utcTiming = true
        /// DASH: `minimumUpdatePeriod`, seconds.
        public var minimumUpdatePeriod = 1.0
        /// The clock publication follows.
        public var clock: any LiveClock = SystemLiveClock()
        /// How far the origin's own clock is ahead of ``clock`` (seconds): its MPD times and its
        /// `UTCTiming` answers are on its own clock.
        public var serverClockOffset = 0.0

        /// The defaults: an HLS stream of six-segment windows that ends after its last segment.
        public init() {}
    }

    private struct State {
        var start: Date?
        var base = ""
        var port = 0
        var encrypted: [Int: [UInt8]] = [:]
    }

    /// What the stream does.
    public let options: Options
    /// The media it publishes.
    public let media: LiveMedia
    /// The media of the other side of each discontinuity, if any.
    public let alternate: LiveMedia?
    private let state = Locked(State())

    /// A stream of `media` (and `alternate` after every other discontinuity).
    public init(_ media: LiveMedia, alternate: LiveMedia? = nil, options: Options = Options()) {
        self.media = media
        self.alternate = alternate
        self.options = options
    }

    // MARK: - Serving

    /// Serves the stream under `prefix` (ending in `/`) on `origin` and starts its schedule:
    /// ``preroll`` segments are out now. Returns the URL of its playlist or MPD.
    @discardableResult
    public func install(on origin: LoopbackOrigin, at prefix: String = "/live/") -> URL {
        let now = originNow()
        let preroll = Double(options.preroll ?? options.window)
        state.withLock { state in
            state.start = now.addingTimeInterval(-preroll * media.segmentDuration)
            state.base = prefix
            state.port = origin.port
        }
        origin.serve(prefix: prefix) { [self] path in self.answer(String(path.dropFirst(prefix.count))) }
        return origin.url(prefix + entryName)
    }

    /// The name of the stream's entry document under the prefix.
    public var entryName: String {
        switch options.format {
        case .hls: media.tracks.count > 1 ? "master.m3u8" : "\(media.tracks[0].id).m3u8"
        case .dashNumber, .dashTimeline: "stream.mpd"
        }
    }

    /// The segments published in all.
    public var total: Int { min(options.total ?? media.segmentCount, media.segmentCount) }

    /// The origin's clock now.
    public func originNow() -> Date { options.clock.now().addingTimeInterval(options.serverClockOffset) }

    /// When segment 0 began (segment `i` is out once its end has passed).
    public var start: Date { state.withLock { $0.start } ?? originNow() }

    /// Segments of track `track` out at `date` on the origin's clock (now by default).
    public func published(track: Int = 0, at date: Date? = nil) -> Int {
        let elapsed = (date ?? originNow()).timeIntervalSince(start)
        let count: Int
        if options.format == .dashTimeline {
            let timeline = media.tracks[track].timeline, scale = Double(media.tracks[track].timescale)
            count = timeline.prefix { Double($0.start + $0.duration) / scale <= elapsed + 1e-9 }.count
        } else {
            count = max(0, Int((elapsed / media.segmentDuration + 1e-9).rounded(.down)))
        }
        return min(count, total)
    }

    /// The media sequence number of segment `index` (HLS).
    public func sequence(of index: Int) -> Int {
        if let reset = options.sequenceResetAt, index >= reset { return index - reset }
        return options.firstSequence + index
    }

    /// The bytes of segment `index` of `track`, as published before any encryption.
    public func plainSegment(track: Int, index: Int) -> [UInt8] {
        source(of: index).tracks[track].segments[index]
    }

    /// What a recording of `track` holding segments `segments` (in order) is, byte for byte:
    /// the initialisation section, then the segments.
    public func expectedRecording(track: Int, segments: some Sequence<Int>) -> [UInt8] {
        var bytes = media.tracks[track].initSection ?? []
        for index in segments { bytes += plainSegment(track: track, index: index) }
        return bytes
    }

    /// Which segment a request for `path` (on the origin) asked for: its track and index.
    public func segment(atPath path: String) -> (track: Int, index: Int)? {
        let base = state.withLock { $0.base }
        guard path.hasPrefix(base) else { return nil }
        let parts = path.dropFirst(base.count).split(separator: "/")
        guard parts.count == 2, let track = media.tracks.firstIndex(where: { $0.id == parts[0] }) else { return nil }
        let name = parts[1]
        if name.hasPrefix("s-"), name.hasSuffix(".ts"), let index = Int(name.dropFirst(2).dropLast(3)) { return (track, index) }
        if name.hasPrefix("seg-"), name.hasSuffix(".m4s"), let number = Int(name.dropFirst(4).dropLast(4)) { return (track, number - 1) }
        if name.hasPrefix("t-"), name.hasSuffix(".m4s"), let time = Int64(name.dropFirst(2).dropLast(4)),
            let index = media.tracks[track].timeline.firstIndex(where: { $0.start == time })
        {
            return (track, index)
        }
        return nil
    }

    private func source(of index: Int) -> LiveMedia {
        guard let alternate, let every = options.discontinuityEvery, every > 0 else { return media }
        return (index / every) % 2 == 1 ? alternate : media
    }

    private func isBoundary(_ index: Int) -> Bool {
        guard index > 0 else { return false }
        if index == options.sequenceResetAt { return true }
        if let every = options.discontinuityEvery, every > 0, index % every == 0 { return true }
        return false
    }

    /// The answer to a request for `name` (under the prefix).
    private func answer(_ name: String) -> LoopbackOrigin.Resource? {
        switch name {
        case "master.m3u8" where options.format == .hls && media.tracks.count > 1:
            return .text(masterPlaylist(), contentType: "application/vnd.apple.mpegurl")
        case "stream.mpd" where options.format != .hls:
            return .text(mpd(), contentType: "application/dash+xml")
        case "time":
            return .text(ISO8601Time.string(from: originNow()), contentType: "text/plain")
        default:
            break
        }
        if name.hasSuffix(".m3u8"), options.format == .hls, let track = media.tracks.firstIndex(where: { "\($0.id).m3u8" == name }) {
            return .text(mediaPlaylist(track: track), contentType: "application/vnd.apple.mpegurl")
        }
        if name.hasPrefix("key-"), name.hasSuffix(".bin"), let number = Int(name.dropFirst(4).dropLast(4)), options.keyRotationEvery != nil {
            return .bytes(Self.key(number))
        }
        let parts = name.split(separator: "/")
        if parts.count == 2, parts[1] == "init.mp4", let track = media.tracks.firstIndex(where: { $0.id == parts[0] }),
            let initSection = media.tracks[track].initSection
        {
            return .bytes(initSection, contentType: media.tracks[track].contentType)
        }
        let base = state.withLock { $0.base }
        guard let (track, index) = segment(atPath: base + name), index < total else { return nil }
        let published = self.published(track: track)
        guard index < published else { return nil }
        if !options.servesGoneSegments, index < published - options.window - 2 { return nil }
        return .bytes(segmentBytes(track: track, index: index), contentType: media.tracks[track].contentType)
    }

    // MARK: - HLS

    /// The 16 bytes of key `number`.
    public static func key(_ number: Int) -> [UInt8] {
        (0..<16).map { UInt8(truncatingIfNeeded: number &* 31 &+ $0 &* 7 &+ 1) }
    }

    private func segmentBytes(track: Int, index: Int) -> [UInt8] {
        let plain = plainSegment(track: track, index: index)
        guard options.format == .hls, let every = options.keyRotationEvery, every > 0 else { return plain }
        let key = track * 1_000_000 + index
        if let cached = state.withLock({ $0.encrypted[key] }) { return cached }
        let encrypted = (try? AES128CBC.encrypt(plain, key: Self.key(index / every), iv: AES128CBC.sequenceIV(UInt64(sequence(of: index))))) ?? []
        state.withLock { $0.encrypted[key] = encrypted }
        return encrypted
    }

    private func masterPlaylist() -> String {
        let video = media.tracks[0], audio = media.tracks[1]
        return """
            #EXTM3U
            #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aud",NAME="English",LANGUAGE="en",DEFAULT=YES,AUTOSELECT=YES,URI="\(audio.id).m3u8"
            #EXT-X-STREAM-INF:BANDWIDTH=\(video.bandwidth + audio.bandwidth),RESOLUTION=160x120,CODECS="\(video.codecs),\(audio.codecs)",AUDIO="aud"
            \(video.id).m3u8

            """
    }

    private func mediaPlaylist(track: Int) -> String {
        let published = self.published(track: track)
        var first = max(0, published - options.window)
        if let reset = options.sequenceResetAt, published > reset { first = max(first, reset) }
        let durations = media.tracks[track].durations
        // RFC 8216 §4.3.3.1: every duration, rounded to the nearest second, at most the target.
        let target = Int((durations.prefix(total).max() ?? media.segmentDuration).rounded())
        // RFC 8216 §6.2.2: the tag counts the discontinuities of the segments removed.
        let removedTags = (1..<max(1, first)).filter(isBoundary).count
        var lines = [
            "#EXTM3U", "#EXT-X-VERSION:3", "#EXT-X-TARGETDURATION:\(max(1, target))", "#EXT-X-MEDIA-SEQUENCE:\(sequence(of: first))",
            "#EXT-X-DISCONTINUITY-SEQUENCE:\(removedTags)",
        ]
        var key: Int?
        for index in first..<published {
            if isBoundary(index) { lines.append("#EXT-X-DISCONTINUITY") }
            if let every = options.keyRotationEvery, every > 0, key != index / every {
                key = index / every
                lines.append("#EXT-X-KEY:METHOD=AES-128,URI=\"key-\(index / every).bin\"")
            }
            lines.append("#EXTINF:\(String(format: "%.6f", durations[index])),")
            lines.append("\(media.tracks[track].id)/s-\(index).ts")
        }
        if options.ends, published == total { lines.append("#EXT-X-ENDLIST") }
        return lines.joined(separator: "\n") + "\n"
    }

    // MARK: - DASH

    private func mpd() -> String {
        let now = originNow()
        let start = self.start
        let published = (0..<media.tracks.count).map { self.published(track: $0) }
        let ended = options.ends && published.allSatisfy { $0 == total }
        let isStatic = ended && options.dashEnding == .turnsStatic
        let duration = Double(total) * media.segmentDuration
        let (port, base) = state.withLock { ($0.port, $0.base) }
        var attributes = [
            #"xmlns="urn:mpeg:dash:schema:mpd:2011""#, #"profiles="urn:mpeg:dash:profile:isoff-live:2011""#,
            #"minBufferTime="PT2S""#, "availabilityStartTime=\"\(ISO8601Time.string(from: start))\"",
            "publishTime=\"\(ISO8601Time.string(from: now))\"",
        ]
        if isStatic {
            attributes += [#"type="static""#, "mediaPresentationDuration=\"PT\(duration)S\""]
        } else {
            attributes += [
                #"type="dynamic""#, "minimumUpdatePeriod=\"PT\(options.minimumUpdatePeriod)S\"",
                "timeShiftBufferDepth=\"PT\(Double(options.window) * media.segmentDuration)S\"",
            ]
            if options.dashEnding == .announcesDuration { attributes.append("mediaPresentationDuration=\"PT\(duration)S\"") }
        }
        var sets = ""
        for (index, track) in media.tracks.enumerated() {
            let mime = track.kind == .audio ? "audio/mp4" : "video/mp4"
            let size = track.kind == .audio ? "" : #" width="160" height="120""#
            let template: String
            switch options.format {
            case .dashTimeline:
                let first = isStatic ? 0 : max(0, published[index] - options.window)
                let last = isStatic ? total : published[index]
                var entries = ""
                var position = first
                while position < last {
                    var run = position + 1
                    while run < last, track.timeline[run].duration == track.timeline[position].duration { run += 1 }
                    let repeats = run - position - 1
                    entries += "<S t=\"\(track.timeline[position].start)\" d=\"\(track.timeline[position].duration)\"\(repeats > 0 ? " r=\"\(repeats)\"" : "")/>"
                    position = run
                }
                template = """
                    <SegmentTemplate timescale="\(track.timescale)" initialization="$RepresentationID$/init.mp4" media="$RepresentationID$/t-$Time$.m4s"><SegmentTimeline>\(entries)</SegmentTimeline></SegmentTemplate>
                    """
            default:
                template = """
                    <SegmentTemplate timescale="1000" duration="\(Int(media.segmentDuration * 1000))" startNumber="1" initialization="$RepresentationID$/init.mp4" media="$RepresentationID$/seg-$Number$.m4s"/>
                    """
            }
            sets += """
                <AdaptationSet contentType="\(track.kind == .audio ? "audio" : "video")" mimeType="\(mime)" segmentAlignment="true">
                  <Representation id="\(track.id)" bandwidth="\(track.bandwidth)" codecs="\(track.codecs)"\(size)>\(template)</Representation>
                </AdaptationSet>

                """
        }
        let timing = options.utcTiming
            ? "<UTCTiming schemeIdUri=\"urn:mpeg:dash:utc:http-iso:2014\" value=\"http://127.0.0.1:\(port)\(base)time\"/>" : ""
        return """
            <?xml version="1.0" encoding="UTF-8"?>
            <MPD \(attributes.joined(separator: " "))>
              <Period id="0" start="PT0S">
            \(sets)  </Period>
              \(timing)
            </MPD>

            """
    }
}
