import Foundation
import Testing
import Tessera
import TesseraTesting

extension OriginTests {
    /// The origin's live mode (``LiveStreamFixture``), looked at on a clock that moves only when
    /// the test says: what is published when, the sliding window, the end, the keys, DASH.
    @Suite("Live streams")
    struct LiveOriginTests {
        static func stream(_ media: LiveMedia, alternate: LiveMedia? = nil, _ change: (inout LiveStreamFixture.Options) -> Void = { _ in })
            -> (LiveStreamFixture, ManualLiveClock)
        {
            let clock = ManualLiveClock()
            var options = LiveStreamFixture.Options()
            options.clock = clock
            change(&options)
            return (LiveStreamFixture(media, alternate: alternate, options: options), clock)
        }

        /// A DASH stream of eight 2-second segments with init sections (options changed by
        /// `change`) served under `/dash/` on an origin of its own, for `body`: the origin, the
        /// stream, its clock, its media and the MPD's URL.
        static func withDASHStream(
            _ change: (inout LiveStreamFixture.Options) -> Void,
            _ body: (LoopbackOrigin, LiveStreamFixture, ManualLiveClock, LiveMedia, URL) async throws -> Void
        ) async throws {
            try await withLoopbackOrigin { origin in
                let media = LiveMedia.generated(segments: 8, bytesPerSegment: 100, segmentDuration: 2, initSection: true)
                let (stream, clock) = Self.stream(media, change)
                let url = stream.install(on: origin, at: "/dash/")
                try await body(origin, stream, clock, media, url)
            }
        }

        static func text(_ origin: LoopbackOrigin, _ path: String) throws -> String {
            String(decoding: try origin.rawRequest(path).body, as: UTF8.self)
        }

        @Test("HLS: a sliding window of the published segments, then the end list")
        func hlsWindowSlidesAndEnds() async throws {
            try await withLoopbackOrigin { origin in
                let media = LiveMedia.generated(segments: 10, bytesPerSegment: 1000, segmentDuration: 2)
                let (stream, clock) = Self.stream(media) { $0.window = 3; $0.firstSequence = 100 }
                let url = stream.install(on: origin, at: "/tv/")
                #expect(url.path == "/tv/muxed.m3u8")
                var playlist = try Self.text(origin, "/tv/muxed.m3u8")
                #expect(playlist.contains("#EXT-X-MEDIA-SEQUENCE:100\n") && playlist.contains("#EXT-X-TARGETDURATION:2\n"))
                #expect(playlist.contains("muxed/s-2.ts") && !playlist.contains("muxed/s-3.ts") && !playlist.contains("#EXT-X-ENDLIST"))
                #expect(try origin.rawRequest("/tv/muxed/s-3.ts").status == 404, "not out yet")
                clock.advance(by: 2)
                playlist = try Self.text(origin, "/tv/muxed.m3u8")
                #expect(playlist.contains("#EXT-X-MEDIA-SEQUENCE:101\n") && playlist.contains("muxed/s-3.ts"))
                #expect(try origin.rawRequest("/tv/muxed/s-3.ts").body == stream.plainSegment(track: 0, index: 3))
                clock.advance(by: 12)
                #expect(stream.published() == 10)
                playlist = try Self.text(origin, "/tv/muxed.m3u8")
                #expect(playlist.hasSuffix("muxed/s-9.ts\n#EXT-X-ENDLIST\n"), "\(playlist)")
                // Left the window (and the two after it): gone.
                #expect(try origin.rawRequest("/tv/muxed/s-4.ts").status == 404)
                #expect(try origin.rawRequest("/tv/muxed/s-5.ts").status == 200)
            }
        }

        @Test("HLS: discontinuities counted by the discontinuity sequence, keys that rotate, a restart")
        func hlsDiscontinuitiesKeysAndRestart() async throws {
            try await withLoopbackOrigin { origin in
                let media = LiveMedia.generated(segments: 12, bytesPerSegment: 100, segmentDuration: 1)
                let other = LiveMedia.generated(segments: 12, bytesPerSegment: 120, segmentDuration: 1)
                let (stream, clock) = Self.stream(media, alternate: other) {
                    $0.window = 4
                    $0.discontinuityEvery = 3
                    $0.keyRotationEvery = 2
                    $0.sequenceResetAt = 9
                }
                stream.install(on: origin, at: "/tv/")
                clock.advance(by: 3)  // 7 out: 3 … 6
                let playlist = try Self.text(origin, "/tv/muxed.m3u8")
                #expect(playlist.contains("#EXT-X-DISCONTINUITY-SEQUENCE:0\n#EXT-X-DISCONTINUITY\n#EXT-X-KEY:METHOD=AES-128,URI=\"key-1.bin\"\n#EXTINF:1.000000,\nmuxed/s-3.ts"), "\(playlist)")
                #expect(playlist.contains("#EXT-X-KEY:METHOD=AES-128,URI=\"key-2.bin\"\n#EXTINF:1.000000,\nmuxed/s-4.ts"))
                #expect(playlist.contains("#EXT-X-DISCONTINUITY\n#EXT-X-KEY:METHOD=AES-128,URI=\"key-3.bin\"\n#EXTINF:1.000000,\nmuxed/s-6.ts"))
                // Segment 3 is the other media (after a discontinuity), encrypted with key 1.
                let encrypted = try origin.rawRequest("/tv/muxed/s-3.ts").body
                #expect(try AES128CBC.decrypt(encrypted, key: LiveStreamFixture.key(1), iv: AES128CBC.sequenceIV(3)) == other.tracks[0].segments[3])
                clock.advance(by: 1)  // 8 out: 4 … 7; the tag of 3 removed
                #expect(try Self.text(origin, "/tv/muxed.m3u8").contains("#EXT-X-DISCONTINUITY-SEQUENCE:1\n"))
                clock.advance(by: 2)  // 10 out: the restart at 9 hides the older ones
                let restarted = try Self.text(origin, "/tv/muxed.m3u8")
                #expect(restarted.contains("#EXT-X-MEDIA-SEQUENCE:0\n") && restarted.contains("muxed/s-9.ts") && !restarted.contains("muxed/s-8.ts"), "\(restarted)")
            }
        }

        @Test("DASH: a dynamic MPD whose segments come out with the clock, then turns static")
        func dashNumberedThenStatic() async throws {
            try await Self.withDASHStream({ $0.format = .dashNumber; $0.window = 3 }) { origin, stream, clock, media, url in
                #expect(url.path == "/dash/stream.mpd")
                let mpd = try Self.text(origin, "/dash/stream.mpd")
                #expect(mpd.contains("type=\"dynamic\"") && mpd.contains("availabilityStartTime=\"\(ISO8601Time.string(from: stream.start))\""))
                #expect(mpd.contains("timeShiftBufferDepth=\"PT6.0S\"") && mpd.contains("media=\"$RepresentationID$/seg-$Number$.m4s\""))
                #expect(mpd.contains("urn:mpeg:dash:utc:http-iso:2014"))
                #expect(try origin.rawRequest("/dash/muxed/seg-3.m4s").body == stream.plainSegment(track: 0, index: 2))
                #expect(try origin.rawRequest("/dash/muxed/seg-4.m4s").status == 404)
                #expect(try origin.rawRequest("/dash/muxed/init.mp4").body == media.tracks[0].initSection)
                #expect(ISO8601Time.date(from: try Self.text(origin, "/dash/time")) == ISO8601Time.date(from: ISO8601Time.string(from: clock.now())))
                clock.advance(by: 10)
                let ended = try Self.text(origin, "/dash/stream.mpd")
                #expect(ended.contains("type=\"static\"") && ended.contains("mediaPresentationDuration=\"PT16.0S\""))
            }
        }

        @Test("DASH: a timeline that grows, keyed by time")
        func dashTimelineGrows() async throws {
            try await Self.withDASHStream({ $0.format = .dashTimeline; $0.window = 3; $0.ends = false }) { origin, stream, clock, _, _ in
                #expect(try Self.text(origin, "/dash/stream.mpd").contains("<SegmentTimeline><S t=\"0\" d=\"2000\" r=\"2\"/></SegmentTimeline>"))
                clock.advance(by: 4)
                #expect(try Self.text(origin, "/dash/stream.mpd").contains("<S t=\"4000\" d=\"2000\" r=\"2\"/>"))
                #expect(try origin.rawRequest("/dash/muxed/t-8000.m4s").body == stream.plainSegment(track: 0, index: 4))
                #expect(stream.segment(atPath: "/dash/muxed/t-8000.m4s")! == (0, 4))
                // Stalled: no end, the timeline stays.
                clock.advance(by: 60)
                let stalled = try Self.text(origin, "/dash/stream.mpd")
                #expect(stalled.contains("type=\"dynamic\"") && stalled.contains("<S t=\"10000\" d=\"2000\" r=\"2\"/>"))
            }
        }

        @Test("the origin's clock may be off: its MPD and UTCTiming answers are on it")
        func serverClockOffset() async throws {
            try await Self.withDASHStream({ $0.format = .dashNumber; $0.serverClockOffset = 3600 }) { origin, _, clock, _, _ in
                let served = ISO8601Time.date(from: try Self.text(origin, "/dash/time"))!
                #expect(abs(served.timeIntervalSince(clock.now()) - 3600) < 0.01)
            }
        }

        @Test("real media: one-second segments made by ffmpeg", .enabled(if: MediaTools.available, "needs ffmpeg and ffprobe"))
        func realMedia() async throws {
            let hls = try await LiveMedia.hls(segments: 4, separateAudio: true)
            #expect(hls.tracks.map(\.id) == ["video", "audio"])
            #expect(hls.segmentCount == 4 && hls.tracks[0].durations.allSatisfy { abs($0 - 1) < 0.05 })
            #expect(hls.tracks[0].segments.allSatisfy { $0.first == 0x47 }, "MPEG-TS sync byte")
            let dash = try await LiveMedia.dash(segments: 4)
            #expect(dash.tracks.map(\.id) == ["video", "audio"] && dash.segmentCount == 4)
            #expect(dash.tracks.allSatisfy { $0.initSection != nil && $0.timeline.count == 4 })
            #expect(dash.tracks[0].timeline.map(\.start) == [0, 10240, 20480, 30720])
        }
    }
}
