import Foundation
import HLSEntity
import Tessera
import TesseraTestSupport
import TesseraTesting
import Testing

/// Live HLS recorded through the manager from the test origin's live mode (real ffmpeg-made
/// segments), on a clock four times as fast as the real one, with ten-segment windows (a loaded
/// machine may fall a few seconds behind without losing a segment).
@Suite(.enabled(if: MediaTools.available, "needs ffmpeg and ffprobe (apt-get install ffmpeg; make test installs it)"), .timeLimit(.minutes(2)))
struct HLSLiveRecordingTests {
    static let rate = 4.0

    /// A harness whose recordings run on `clock`; `change` adjusts the live policy.
    static func withLiveHarness(
        clock: ScaledLiveClock, _ change: @escaping (inout LiveRecordingPolicy) -> Void = { _ in },
        _ body: (PluginHarness) async throws -> Void
    ) async throws {
        try await withPluginHarness(name: "hls-live", register: HLSEntity.register(in:), configure: { configuration in
            // Each track is checked as recorded (the merge is the CLI tests' and the merger's).
            configuration.merging = nil
            configuration.live.clock = clock
            change(&configuration.live)
        }, body)
    }

    static func options(_ clock: ScaledLiveClock, _ change: (inout LiveStreamFixture.Options) -> Void = { _ in }) -> LiveStreamFixture.Options {
        var options = LiveStreamFixture.Options()
        options.clock = clock
        options.window = 10
        change(&options)
        return options
    }

    /// The segments of track 0 the origin was asked for, by index, in order.
    static func requested(_ stream: LiveStreamFixture, _ origin: LoopbackOrigin, track: Int = 0) -> [Int] {
        origin.requests.compactMap { stream.segment(atPath: $0.path) }.filter { $0.track == track }.map(\.index)
    }

    /// Starts recording the stream at `url`; returns its task.
    static func start(_ harness: PluginHarness, _ url: URL) async throws -> DownloadTaskID {
        let entities = try await harness.entities(for: EntityInput(url.absoluteString))
        return try await harness.manager.start(try #require(entities.first)).id
    }

    /// Whether task `id` recorded `count` segments within 20 s.
    static func recorded(_ harness: PluginHarness, _ id: DownloadTaskID, atLeast count: Int) async -> Bool {
        await eventually(within: .seconds(20)) { await harness.manager.check(id)?.live?.segmentsRecorded ?? 0 >= count }
    }

    static func record(_ harness: PluginHarness, _ url: URL, timeout: Duration = .seconds(60)) async throws -> DownloadTaskInfo {
        let id = try await start(harness, url)
        let final = await harness.finalSnapshots(of: [id], timeout: timeout)
        return try #require(final[id])
    }

    @Test func everySegmentFromTheJoinPointIsRecordedOnceInOrderAndTheFileDecodes() async throws {
        let clock = ScaledLiveClock(rate: Self.rate)
        let stream = LiveStreamFixture(try await LiveMedia.hls(segments: 24), options: Self.options(clock))
        try await Self.withLiveHarness(clock: clock) { harness in
            let url = stream.install(on: harness.origin)
            let info = try await Self.record(harness, url)
            #expect(info.state == .completed, "\(String(describing: info.error))")
            let requested = Self.requested(stream, harness.origin)
            // Joined three target durations from the end of the first window it saw (segments
            // 0 … 9 when the recording began at once; later on a loaded machine).
            let first = try #require(requested.first)
            #expect(first >= 7 && first <= 14, "\(requested)")
            #expect(requested == Array(first..<24), "each once, in order: \(requested)")
            let count = 24 - first
            let output = try #require(info.outputs.first)
            #expect(output.isComplete && output.path.hasSuffix("muxed.ts"))
            #expect(fileBytes(output.path) == stream.expectedRecording(track: 0, segments: first..<24))
            #expect(try await MediaTools.decode(output.path) == count * 10, "every frame of the one-second segments at 10 frames a second")
            let probe = try await MediaTools.probe(output.path)
            #expect(probe.streams.sorted() == ["audio", "video"])
            #expect(abs(probe.duration - Double(count)) < 0.5, "\(probe)")
            let live = try #require(info.live)
            #expect(live.segmentsRecorded == count && live.recordedSeconds == Double(count) && live.gaps == 0 && live.ending == .streamEnded)
            #expect(info.bytesTotal == nil, "a live task's progress has no total")
            // Nothing is left in the work directory.
            #expect(filesUnder(harness.downloadRoot).allSatisfy { !$0.contains(".tessera") }, "\(filesUnder(harness.downloadRoot))")
        }
    }

    @Test func fromTheStartDiscontinuitiesAndRotatingKeys() async throws {
        let clock = ScaledLiveClock(rate: Self.rate)
        let options = Self.options(clock) {
            $0.discontinuityEvery = 5
            $0.keyRotationEvery = 3
            $0.firstSequence = 1000
        }
        let stream = LiveStreamFixture(
            try await LiveMedia.hls(segments: 16), alternate: try await LiveMedia.hls(segments: 16, pattern: "smptebars"), options: options)
        try await Self.withLiveHarness(clock: clock, { $0.start = .oldest }) { harness in
            let url = stream.install(on: harness.origin)
            let info = try await Self.record(harness, url)
            #expect(info.state == .completed, "\(String(describing: info.error))")
            #expect(Self.requested(stream, harness.origin) == Array(0..<16))
            let output = try #require(info.outputs.first)
            // Decrypted, each key in its turn, across the discontinuities.
            #expect(fileBytes(output.path) == stream.expectedRecording(track: 0, segments: 0..<16))
            #expect(try await MediaTools.decode(output.path) == 160)
            // Six keys, each fetched once.
            for key in 0..<6 { #expect(harness.origin.requestCount(for: "/live/key-\(key).bin") == 1) }
        }
    }

    @Test func aVariantAndItsAudioRenditionAreRecordedSideBySide() async throws {
        let clock = ScaledLiveClock(rate: Self.rate)
        let stream = LiveStreamFixture(try await LiveMedia.hls(segments: 18, separateAudio: true), options: Self.options(clock))
        try await Self.withLiveHarness(clock: clock) { harness in
            let url = stream.install(on: harness.origin)
            #expect(url.path == "/live/master.m3u8")
            let info = try await Self.record(harness, url)
            #expect(info.state == .completed, "\(String(describing: info.error))")
            #expect(info.outputs.count == 2)
            // Both join at the same moment (three of the longer target duration from the end).
            let first = try #require(Self.requested(stream, harness.origin, track: 0).first)
            #expect(first >= 0 && first <= 12)
            for (track, output) in info.outputs.enumerated() {
                let requested = Self.requested(stream, harness.origin, track: track)
                #expect(requested == Array(first..<18), "\(output.name): \(requested)")
                #expect(fileBytes(output.path) == stream.expectedRecording(track: track, segments: first..<18))
                #expect(try await MediaTools.decode(output.path) == (track == 0 ? (18 - first) * 10 : 0))
            }
        }
    }

    @Test func aReloadLateByTwoTargetDurationsLosesNothingTheWindowStillHolds() async throws {
        let clock = ScaledLiveClock(rate: Self.rate)
        let stream = LiveStreamFixture(try await LiveMedia.hls(segments: 24), options: Self.options(clock))
        try await Self.withLiveHarness(clock: clock) { harness in
            let url = stream.install(on: harness.origin)
            // The fourth and the fifth loads of the playlist answer two target durations late.
            harness.origin.inject(.stall(.milliseconds(500), afterBytes: nil), at: "/live/muxed.m3u8")
            Task {
                _ = await eventually(within: .seconds(10)) { harness.origin.requestCount(for: "/live/muxed.m3u8") >= 5 }
                harness.origin.clearFaults()
            }
            let info = try await Self.record(harness, url)
            #expect(info.state == .completed)
            // (The first loads being late too, the recording joins later; from there, nothing is lost.)
            let requested = Self.requested(stream, harness.origin)
            #expect(requested == Array((requested.first ?? 0)..<24), "\(requested)")
            #expect(info.live?.gaps == 0)
        }
    }

    @Test func segmentsThatLeftTheWindowAreAGapWithItsLength() async throws {
        let clock = ScaledLiveClock(rate: Self.rate)
        let stream = LiveStreamFixture(try await LiveMedia.hls(segments: 40), options: Self.options(clock))
        try await Self.withLiveHarness(clock: clock) { harness in
            let url = stream.install(on: harness.origin)
            // Once a few are recorded, the playlist stays away for sixteen segments.
            let id = try await Self.start(harness, url)
            #expect(await eventually(within: .seconds(20)) { Self.requested(stream, harness.origin).count >= 3 })
            harness.origin.inject(.stall(.milliseconds(4000), afterBytes: nil), at: "/live/muxed.m3u8", times: 1)
            let info = try #require(await harness.finalSnapshots(of: [id])[id])
            #expect(info.state == .completed)
            let requested = Self.requested(stream, harness.origin)
            #expect(requested == requested.sorted(), "in order: \(requested)")
            // A segment the stalled playlist still listed when it arrived was gone when asked for:
            // asked twice (a 404 is asked again once), not recorded, part of the gap.
            let recorded = requested.filter { index in requested.count { $0 == index } == 1 }
            let live = try #require(info.live)
            #expect(live.gaps == 1, "\(live) \(requested)")
            let missing = Array((requested.first ?? 0)..<40).filter { !recorded.contains($0) }
            #expect(!missing.isEmpty && Double(missing.count) == live.gapSeconds && live.segmentsRecorded == recorded.count, "\(missing) \(live)")
            #expect(requested.last == 39)
            let output = try #require(info.outputs.first)
            #expect(fileBytes(output.path) == stream.expectedRecording(track: 0, segments: recorded))
            #expect(try await MediaTools.decode(output.path) == recorded.count * 10, "the frames around the gap decode")
        }
    }

    @Test func aStalledStreamEndsTheRecordingAfterTheStallTimeout() async throws {
        let clock = ScaledLiveClock(rate: Self.rate)
        let stream = LiveStreamFixture(try await LiveMedia.hls(segments: 10), options: Self.options(clock) { $0.ends = false })
        try await Self.withLiveHarness(clock: clock) { harness in
            let url = stream.install(on: harness.origin)
            let started = clock.now()
            let info = try await Self.record(harness, url)
            #expect(info.state == .completed, "\(String(describing: info.error))")
            #expect(info.live?.ending == .stalled)
            // The last segment was out right away (a full window); 30 s (the default for 1 s
            // segments) later it ended.
            let ended = clock.now().timeIntervalSince(started)
            #expect(ended >= 30 && ended < 40, "\(ended)")
            let output = try #require(info.outputs.first)
            let requested = Self.requested(stream, harness.origin)
            #expect(requested == Array((requested.first ?? 0)..<10))
            #expect(fileBytes(output.path) == stream.expectedRecording(track: 0, segments: requested))
            #expect(try await MediaTools.decode(output.path) == requested.count * 10)
        }
    }

    @Test func theDurationLimitAndEndRecordingLeaveAPlayableFile() async throws {
        let clock = ScaledLiveClock(rate: Self.rate)
        let stream = LiveStreamFixture(try await LiveMedia.hls(segments: 40), options: Self.options(clock))
        try await Self.withLiveHarness(clock: clock, { $0.maxDuration = .seconds(5) }) { harness in
            let info = try await Self.record(harness, stream.install(on: harness.origin))
            #expect(info.state == .completed && info.live?.ending == .durationReached)
            let requested = Self.requested(stream, harness.origin)
            #expect(requested.count == 5 && requested == Array(requested[0]..<requested[0] + 5))
            let output = try #require(info.outputs.first)
            #expect(abs(try await MediaTools.probe(output.path).duration - 5) < 0.5)
        }
        let other = LiveStreamFixture(try await LiveMedia.hls(segments: 40), options: Self.options(clock))
        try await Self.withLiveHarness(clock: clock) { harness in
            let url = other.install(on: harness.origin, at: "/other/")
            let id = try await Self.start(harness, url)
            #expect(await Self.recorded(harness, id, atLeast: 4))
            #expect(harness.manager.endRecording(id))
            let info = try #require(await harness.finalSnapshots(of: [id])[id])
            #expect(info.state == .completed && info.live?.ending == .stopped)
            let output = try #require(info.outputs.first)
            let recorded = info.live?.segmentsRecorded ?? 0
            #expect(try await MediaTools.decode(output.path) == recorded * 10)
            let first = Self.requested(other, harness.origin).first ?? 0
            #expect(recorded >= 4 && fileBytes(output.path) == other.expectedRecording(track: 0, segments: first..<(first + recorded)))
        }
    }

    @Test func pauseAndResumeContinueWithAGapAndNothingTwice() async throws {
        let clock = ScaledLiveClock(rate: Self.rate)
        let stream = LiveStreamFixture(try await LiveMedia.hls(segments: 40), options: Self.options(clock))
        try await Self.withLiveHarness(clock: clock) { harness in
            let url = stream.install(on: harness.origin)
            let id = try await Self.start(harness, url)
            #expect(await Self.recorded(harness, id, atLeast: 3))
            await harness.manager.stop(id)
            #expect(await harness.manager.waitForState(id, .paused)?.state == .paused)
            // Paused for longer than the window: what left it is a gap.
            let pausedAt = stream.published()
            #expect(await eventually(within: .seconds(10)) { stream.published() >= pausedAt + 14 })
            try await harness.manager.resume(id)
            let info = try #require(await harness.finalSnapshots(of: [id])[id])
            #expect(info.state == .completed, "\(String(describing: info.error))")
            let requested = Self.requested(stream, harness.origin)
            #expect(Set(requested).count == requested.count && requested == requested.sorted(), "\(requested)")
            #expect(info.live?.gaps == 1 && requested.last == 39, "\(String(describing: info.live)) \(requested)")
            let output = try #require(info.outputs.first)
            #expect(fileBytes(output.path) == stream.expectedRecording(track: 0, segments: requested))
            #expect(try await MediaTools.decode(output.path) == requested.count * 10)
        }
    }

    @Test func aRestartedPackagerIsFollowedWithoutRecordingAnythingTwice() async throws {
        let clock = ScaledLiveClock(rate: Self.rate)
        let stream = LiveStreamFixture(try await LiveMedia.hls(segments: 24), options: Self.options(clock) { $0.sequenceResetAt = 16; $0.firstSequence = 500 })
        try await Self.withLiveHarness(clock: clock) { harness in
            let info = try await Self.record(harness, stream.install(on: harness.origin))
            #expect(info.state == .completed, "\(String(describing: info.error))")
            let requested = Self.requested(stream, harness.origin)
            #expect(requested.first.map { $0 < 16 } == true && requested == Array(requested[0]..<24), "\(requested)")
            let output = try #require(info.outputs.first)
            #expect(fileBytes(output.path) == stream.expectedRecording(track: 0, segments: requested))
        }
    }
}
