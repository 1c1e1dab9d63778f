import DASHEntity
import Foundation
import Tessera
import TesseraTestSupport
import TesseraTesting
import Testing

/// Live DASH recorded through the manager from the test origin's live mode (real ffmpeg-made
/// fragmented MP4, a video and an audio track), on a clock four times as fast as the real one,
/// with ten-second time-shift buffers (a loaded machine may fall behind without losing a segment).
@Suite(.enabled(if: MediaTools.available, "needs ffmpeg and ffprobe (apt-get install ffmpeg; make test installs it)"), .timeLimit(.minutes(2)))
struct DASHLiveRecordingTests {
    static func withLiveHarness(clock: ScaledLiveClock, _ change: @escaping (inout LiveRecordingPolicy) -> Void = { _ in }, _ body: (PluginHarness) async throws -> Void) async throws {
        try await withPluginHarness(name: "dash-live", register: DASHEntity.register(in:), configure: { configuration in
            // Each track is checked as recorded (the merge is the CLI tests' and the merger's).
            configuration.merging = nil
            configuration.live.clock = clock
            change(&configuration.live)
        }, body)
    }

    static func stream(
        _ clock: ScaledLiveClock, segments: Int, _ change: (inout LiveStreamFixture.Options) -> Void = { _ in }
    ) async throws -> LiveStreamFixture {
        var options = LiveStreamFixture.Options()
        options.clock = clock
        options.format = .dashNumber
        options.window = 10
        change(&options)
        return LiveStreamFixture(try await LiveMedia.dash(segments: segments), options: options)
    }

    static func record(_ harness: PluginHarness, _ url: URL) async throws -> DownloadTaskInfo {
        let entities = try await harness.entities(for: EntityInput(url.absoluteString))
        let id = try await harness.manager.start(try #require(entities.first)).id
        return try #require(await harness.finalSnapshots(of: [id])[id])
    }

    /// The segments of `track` asked for, by index, in order.
    static func requested(_ stream: LiveStreamFixture, _ origin: LoopbackOrigin, track: Int) -> [Int] {
        origin.requests.compactMap { stream.segment(atPath: $0.path) }.filter { $0.track == track }.map(\.index)
    }

    /// Checks each output against the stream: every segment from the join point once, in
    /// order, byte for byte after its initialisation section, decoding end to end.
    static func expectRecorded(_ info: DownloadTaskInfo, _ stream: LiveStreamFixture, _ origin: LoopbackOrigin, through last: Int) async throws {
        #expect(info.state == .completed, "\(String(describing: info.error))")
        #expect(info.outputs.count == 2)
        var firsts: [Int] = []
        for (track, output) in info.outputs.enumerated() {
            let requested = requested(stream, origin, track: track)
            let first = try #require(requested.first)
            firsts.append(first)
            #expect(requested == Array(first...last), "\(output.name): \(requested)")
            #expect(fileBytes(output.path) == stream.expectedRecording(track: track, segments: first...last), "\(output.name)")
            let frames = try await MediaTools.decode(output.path)
            #expect(frames == (track == 0 ? (last - first + 1) * 10 : 0), "\(output.name)")
        }
        #expect(Set(firsts).count == 1, "the video and its audio join at one segment: \(firsts)")
        // Nothing asked for past the end.
        #expect(!origin.requests.contains { $0.path.hasSuffix("seg-\(last + 2).m4s") })
    }

    @Test func numberedSegmentsOfBothTracksUntilTheMPDTurnsStatic() async throws {
        let clock = ScaledLiveClock(rate: 4)
        let stream = try await Self.stream(clock, segments: 24)
        try await Self.withLiveHarness(clock: clock) { harness in
            let url = stream.install(on: harness.origin)
            let info = try await Self.record(harness, url)
            try await Self.expectRecorded(info, stream, harness.origin, through: 23)
            #expect(info.live?.ending == .streamEnded && info.live?.gaps == 0)
            // The UTCTiming was read once.
            #expect(harness.origin.requestCount(for: "/live/time") == 1)
        }
    }

    @Test func aGrowingTimelineUntilItsAnnouncedEnd() async throws {
        let clock = ScaledLiveClock(rate: 4)
        let stream = try await Self.stream(clock, segments: 20) {
            $0.format = .dashTimeline
            $0.dashEnding = .announcesDuration
        }
        try await Self.withLiveHarness(clock: clock) { harness in
            let url = stream.install(on: harness.origin)
            let info = try await Self.record(harness, url)
            try await Self.expectRecorded(info, stream, harness.origin, through: 19)
            #expect(info.live?.ending == .streamEnded)
            // The MPD reloaded as minimumUpdatePeriod says (1 s), not more than twice as often.
            #expect(harness.origin.requestCount(for: "/live/stream.mpd") <= 2 * 20 + 4)
        }
    }

    @Test func fromTheStartTakesTheWholeTimeShiftBuffer() async throws {
        let clock = ScaledLiveClock(rate: 4)
        let stream = try await Self.stream(clock, segments: 18)
        try await Self.withLiveHarness(clock: clock, { $0.start = .oldest }) { harness in
            let info = try await Self.record(harness, stream.install(on: harness.origin))
            try await Self.expectRecorded(info, stream, harness.origin, through: 17)
            #expect(Self.requested(stream, harness.origin, track: 0).first == 0)
        }
    }

    @Test func theMPDClockComesFromUTCTiming() async throws {
        // The origin's clock is an hour ahead of ours: its UTCTiming says so.
        let clock = ScaledLiveClock(rate: 4)
        let stream = try await Self.stream(clock, segments: 16) { $0.serverClockOffset = 3600 }
        try await Self.withLiveHarness(clock: clock) { harness in
            let info = try await Self.record(harness, stream.install(on: harness.origin))
            try await Self.expectRecorded(info, stream, harness.origin, through: 15)
        }
        // Without it, the local clock alone: the stream looks an hour away, nothing is out yet,
        // and the recording ends as stalled (30 s of the fast clock: 7.5 s) with nothing recorded.
        let blind = try await Self.stream(clock, segments: 12) {
            $0.serverClockOffset = 3600
            $0.utcTiming = false
            $0.ends = false
        }
        try await Self.withLiveHarness(clock: clock) { harness in
            let info = try await Self.record(harness, blind.install(on: harness.origin))
            #expect(info.state == .failed && info.error?.code == .timeout, "\(String(describing: info.error))")
            #expect(Self.requested(blind, harness.origin, track: 0).isEmpty)
        }
    }

    @Test func anOlderMPDThanTheOneHeldIsNotTaken() async throws {
        try await withLoopbackOrigin { origin in
            func mpd(published: String, segments: Int) -> String {
                """
                <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="dynamic" availabilityStartTime="2024-05-01T10:00:00Z" publishTime="\(published)" minimumUpdatePeriod="PT0S">
                  <Period start="PT0S"><AdaptationSet contentType="video" mimeType="video/mp4">
                    <SegmentTemplate timescale="1" media="t-$Time$.m4s"><SegmentTimeline><S t="0" d="2" r="\(segments - 1)"/></SegmentTimeline></SegmentTemplate>
                    <Representation id="v" bandwidth="1000"/></AdaptationSet></Period>
                </MPD>
                """
            }
            let engine = try CurlEngine(configuration: .forTests())
            let context = ResolveContext(engine: engine)
            let entity = DASHEntity(url: origin.url("/s.mpd"))
            origin.serve("/s.mpd", .text(mpd(published: "2024-05-01T10:01:00Z", segments: 10), contentType: "application/dash+xml"))
            let now = ISO8601Time.date(from: "2024-05-01T10:01:00Z")!
            let manifest = try await entity.resolve(in: context)
            var source = try entity.liveSource(for: manifest, in: context)
            let clock = ManualLiveClock(start: now)
            #expect(try await source.reload(from: [:], clock: clock, in: context)[0]?.segments.count == 10)
            // A cache serves the version of a minute before: the newer one stays in use.
            origin.serve("/s.mpd", .text(mpd(published: "2024-05-01T10:00:00Z", segments: 5), contentType: "application/dash+xml"))
            #expect(try await source.reload(from: [:], clock: clock, in: context)[0]?.segments.count == 10)
            #expect(origin.requestCount(for: "/s.mpd") == 3)
            await engine.shutdown()
        }
    }
}
