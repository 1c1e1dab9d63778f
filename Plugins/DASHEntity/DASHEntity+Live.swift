import Foundation
import Tessera

extension DASHEntity {
    /// The manifest of a dynamic MPD: one output per track as for a static one, each holding
    /// the segments available at `now` (at most ten, for `tessera resolve`), marked live.
    func liveManifest(_ mpd: MPD, tracks: [Track], selected: Set<Int>, url: URL, now: Date) throws(DownloadError) -> DownloadManifest {
        let view = DASHLiveView(mpd: mpd)
        let directory = mpd.title.map { SafePath.sanitizedFileName($0, fallback: outputDirectory) } ?? outputDirectory
        var outputs: [DownloadOutput] = []
        let fileNames = Self.fileNames(of: tracks)
        var names: [String: Int] = [:]
        var info: LiveManifestInfo?
        for (index, track) in tracks.enumerated() {
            let representation = track.first
            let reference = DASHTrackReference(id: representation.id, kind: representation.kind, bandwidth: representation.bandwidth)
            let isSelected = selected.contains(index)
            // A track not taken may be one a recording could not follow: it is listed anyway.
            let window: LiveWindow?
            do {
                window = try view.window(for: reference, now: now, after: nil, offset: 0, limit: 10)
            } catch {
                if isSelected { throw DownloadError(error.code, error.message, url: url.absoluteString) }
                window = nil
            }
            var segments = SegmentList()
            var lastInitialization: DownloadSegment?
            for segment in window?.segments ?? [] {
                if let initialization = segment.initSection, initialization != lastInitialization {
                    segments.append(initialization)
                    lastInitialization = initialization
                }
                segments.append(segment.segment)
            }
            if isSelected, info == nil, let window {
                info = LiveManifestInfo(kind: "DASH", targetDuration: window.targetDuration, windowSegments: window.segments.count + window.segmentsAfter)
            }
            let name = try Self.outputName(
                of: tracks, at: index, fileNames: fileNames, directory: directory, firstMedia: window?.segments.first?.segment,
                names: &names, url: url)
            outputs.append(DownloadOutput(
                name: name, assembly: .concatenated, segments: segments, isSelected: isSelected, media: Self.mediaInfo(of: representation)))
        }
        var metadata: [String: String] = [
            "format": payload.format.description, "periods": String(mpd.periods.count), "representations": String(tracks.count),
            "type": "dynamic",
        ]
        if let start = mpd.availabilityStartTime { metadata["availabilityStartTime"] = ISO8601Time.string(from: start) }
        if let depth = mpd.timeShiftBufferDepth { metadata["timeShiftBufferDepth"] = MPDTime.describe(depth) }
        if let period = mpd.minimumUpdatePeriod { metadata["minimumUpdatePeriod"] = MPDTime.describe(period) }
        if let profiles = mpd.profiles { metadata["profiles"] = profiles }
        return DownloadManifest(
            title: mpd.title ?? directory, outputs: outputs, sourceURL: url, metadata: metadata,
            live: info ?? LiveManifestInfo(kind: "DASH", targetDuration: 2, windowSegments: 0))
    }

    /// Reloads the MPD of a live manifest this entity resolved (see ``DASHLiveSource``).
    public func liveSource(for manifest: DownloadManifest, in context: ResolveContext) throws(DownloadError) -> any LiveSource {
        var tracks: [Int: DASHTrackReference] = [:]
        for (index, output) in manifest.outputs.enumerated() where output.isSelected {
            guard let media = output.media, let id = media.identifier else {
                throw DownloadError(.manifestInvalid, "the live manifest does not say which representation \(output.name) records")
            }
            tracks[index] = DASHTrackReference(id: id, kind: media.kind, bandwidth: media.bandwidth.map { Int64($0) })
        }
        return DASHLiveSource(url: payload.url, tracks: tracks)
    }
}

/// Follows a live MPD: fetches it when `minimumUpdatePeriod` has passed since the last fetch
/// (every minute when it has none), and between fetches computes from the clock what its
/// templates make available. An MPD with an older `publishTime` than the one held (a stale
/// cache) is not taken; one that cannot be fetched leaves the last one in use.
///
/// The MPD's clock is read from its first `UTCTiming` that works (`http-iso`, `http-xsdate`,
/// `http-head`, `direct`; 2012 and 2014 schemes) when the MPD is first fetched; without one, the
/// recorder's clock. A segment is taken as available a quarter of a second after its time (a
/// second more with `http-head`, whose dates have whole seconds), so a clock a little ahead of
/// the server's does not ask for a segment before it exists.
struct DASHLiveSource: LiveSource {
    let url: URL
    let tracks: [Int: DASHTrackReference]
    private var mpd: MPD?
    private var fetchedAt: Date?
    /// The MPD's clock minus the recorder's, once measured.
    private var offset: Double?
    private var margin = 0.25

    init(url: URL, tracks: [Int: DASHTrackReference]) {
        self.url = url
        self.tracks = tracks
    }

    /// How often an MPD without `minimumUpdatePeriod` is fetched anyway (it may turn static).
    static let defaultRefetch = 60.0

    mutating func reload(from hints: [Int: LiveSegmentKey], clock: any LiveClock, in context: ResolveContext) async throws(DownloadError)
        -> [Int: LiveWindow]
    {
        if needsFetch(at: clock.now()) {
            let fetchStarted = clock.now()
            do {
                let (document, source) = try await context.fetchXML(url)
                let fresh = try MPDReader(document: document, url: source.url).read()
                if let held = mpd?.publishTime, let published = fresh.publishTime, published < held {
                    context.logger.info("DASH: the MPD fetched is older than the one held (publishTime): kept the newer")
                } else {
                    mpd = fresh
                }
                fetchedAt = fetchStarted
                if offset == nil, let mpd, mpd.isDynamic {
                    let measured = await Self.clockOffset(mpd.utcTimings, clock: clock, context: context)
                    offset = measured?.offset ?? 0
                    margin = 0.25 + (measured?.uncertainty ?? 0)
                }
            } catch {
                // A template's segments follow from the clock: the MPD held still serves.
                guard mpd != nil, !error.isCancellation else { throw error }
                context.logger.warning("DASH: the MPD could not be fetched again (\(error.message)); the last one is used")
            }
        }
        guard let mpd else { throw DownloadError(.manifestInvalid, "the MPD could not be read", url: url.absoluteString) }
        let view = DASHLiveView(mpd: mpd)
        let offset = offset ?? 0
        let mpdNow = clock.now().addingTimeInterval(offset - margin)
        var windows: [Int: LiveWindow] = [:]
        for (index, track) in tracks {
            var window = try view.window(for: track, now: mpdNow, after: hints[index], offset: offset - margin)
            if mpd.isDynamic, !window.isComplete, let fetchedAt {
                let interval = max(mpd.minimumUpdatePeriod.map { Double($0) / 1e9 } ?? Self.defaultRefetch, window.targetDuration / 2)
                let refetch = fetchedAt.addingTimeInterval(interval)
                window.suggestedReload = min(window.suggestedReload ?? refetch, refetch)
            }
            windows[index] = window
        }
        return windows
    }

    private func needsFetch(at now: Date) -> Bool {
        guard let mpd, let fetchedAt else { return true }
        guard mpd.isDynamic else { return false }
        let interval = mpd.minimumUpdatePeriod.map { Double($0) / 1e9 } ?? Self.defaultRefetch
        return now >= fetchedAt.addingTimeInterval(interval)
    }

    /// The MPD's clock minus `clock`, from the first `UTCTiming` that answers (against the
    /// middle of the request on `clock`), and how far off the answer may be (seconds).
    static func clockOffset(_ timings: [MPDUTCTiming], clock: any LiveClock, context: ResolveContext) async -> (offset: Double, uncertainty: Double)? {
        for timing in timings {
            let before = clock.now()
            func middle() -> Date { before.addingTimeInterval(clock.now().timeIntervalSince(before) / 2) }
            let scheme = timing.scheme.lowercased()
            let kind = scheme.split(separator: ":").dropFirst(4).first.map(String.init) ?? ""
            guard scheme.hasPrefix("urn:mpeg:dash:utc:") else { continue }
            switch kind {
            case "direct":
                // The MPD's own time when it was fetched (a little before `before`).
                if let date = ISO8601Time.date(from: timing.value) { return (date.timeIntervalSince(before), 0) }
            case "http-iso", "http-xsdate", "http-head":
                for text in timing.value.split(whereSeparator: \.isWhitespace) {
                    guard let url = URL(string: String(text)), (try? URLSafety.check(url, context: "a UTCTiming URL")) != nil else { continue }
                    if kind == "http-head" {
                        guard let probe = try? await context.probe(url), let header = probe.headers["Date"],
                            let seconds = HTTPDate.parse(header)
                        else { continue }
                        return (Double(seconds) + 0.5 - middle().timeIntervalSince1970, 1)
                    }
                    guard let document = try? await context.fetch(url),
                        let date = ISO8601Time.date(from: document.text.trimmingCharacters(in: .whitespacesAndNewlines))
                    else { continue }
                    return (date.timeIntervalSince(middle()), 0)
                }
            default:
                continue
            }
        }
        if !timings.isEmpty { context.logger.warning("DASH: no UTCTiming of the MPD could be read; the local clock is used") }
        return nil
    }
}
