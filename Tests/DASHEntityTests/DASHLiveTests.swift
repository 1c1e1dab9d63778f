import Foundation
import Tessera
import TesseraTestSupport
import Testing

@testable import DASHEntity

/// Live MPDs (`type="dynamic"`) as a recording reads them: what the clock makes available,
/// growing timelines, several periods, the end. No network: ``DASHLiveView`` on parsed MPDs.
@Suite struct DASHLiveTests {
    static let start = ISO8601Time.date(from: "2024-05-01T10:00:00Z")!

    /// A dynamic MPD with one video representation addressed by `segments`.
    static func live(
        _ segments: String, attributes: String = #"timeShiftBufferDepth="PT10S" minimumUpdatePeriod="PT2S""#,
        periods: String? = nil
    ) -> String {
        """
        <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="dynamic" availabilityStartTime="2024-05-01T10:00:00Z"
             publishTime="2024-05-01T10:00:30Z" \(attributes)>
          \(periods ?? """
          <Period id="p0" start="PT0S">
            <AdaptationSet contentType="video" mimeType="video/mp4">
              \(segments)
              <Representation id="v" bandwidth="1000" codecs="avc1.64001f"/>
            </AdaptationSet>
          </Period>
          """)
        </MPD>
        """
    }

    static func view(_ text: String) throws -> DASHLiveView {
        DASHLiveView(mpd: try MPDReader(document: try SafeXMLDocument.parse(text), url: mpdURL).read())
    }

    static let video = DASHTrackReference(id: "v", kind: .video, bandwidth: 1000)

    func window(_ text: String, at seconds: Double, after: LiveSegmentKey? = nil) throws -> LiveWindow {
        try Self.view(text).window(for: Self.video, now: Self.start.addingTimeInterval(seconds), after: after, offset: 0)
    }

    static let numbered = #"<SegmentTemplate timescale="1000" duration="2000" startNumber="1" initialization="init.mp4" media="seg-$Number$.m4s"/>"#

    @Test func aLiveMPDResolvesToALiveManifest() throws {
        let document = try SafeXMLDocument.parse(Self.live(Self.numbered))
        let entity = DASHEntity(url: mpdURL)
        let manifest = try entity.manifest(from: document, url: mpdURL, now: Self.start.addingTimeInterval(31))
        #expect(manifest.isLive)
        #expect(manifest.live?.kind == "DASH" && manifest.live?.targetDuration == 2)
        let output = try #require(manifest.outputs.first)
        #expect(output.name == "stream/v.mp4")
        // The init segment, then what is out at 31 s with 10 s of time shift: 11 … 15.
        #expect(urls(output).map { ($0 as NSString).lastPathComponent } == ["init.mp4", "seg-11.m4s", "seg-12.m4s", "seg-13.m4s", "seg-14.m4s", "seg-15.m4s"])
        #expect(manifest.metadata["type"] == "dynamic")
        #expect(throws: Never.self) { try manifest.validate() }
    }

    @Test func numberedSegmentsAreAvailableFromTheirEndForTheTimeShiftBuffer() throws {
        let window = try window(Self.live(Self.numbered), at: 31)
        // Segment n (from 1) covers [2(n-1), 2n) and is out from 2n until 2n + 10.
        #expect(window.segments.map(\.key.position) == [11, 12, 13, 14, 15])
        #expect(window.segments.map(\.start) == [20, 22, 24, 26, 28])
        #expect(window.segments.allSatisfy { $0.duration == 2 && $0.key.period == 0 })
        #expect(window.segments[0].initSection?.urls[0].lastPathComponent == "init.mp4")
        #expect(!window.isComplete)
        // The next one (16) is out at 32 s: the tracker looks then.
        #expect(window.suggestedReload == Self.start.addingTimeInterval(32))
        #expect(window.targetDuration == 2)
        // After a key: only what follows it.
        let after = try self.window(Self.live(Self.numbered), at: 31, after: LiveSegmentKey(position: 13))
        #expect(after.segments.map(\.key.position) == [14, 15])
        // After a key that left the buffer: from the oldest still there.
        let late = try self.window(Self.live(Self.numbered), at: 31, after: LiveSegmentKey(position: 3))
        #expect(late.segments.map(\.key.position) == [11, 12, 13, 14, 15])
        // Before the stream starts: nothing.
        #expect(try self.window(Self.live(Self.numbered), at: 1).segments.isEmpty)
    }

    @Test func withoutATimeShiftBufferEverySegmentSinceTheStartIsOffered() throws {
        let text = Self.live(Self.numbered, attributes: #"minimumUpdatePeriod="PT2S""#)
        let window = try window(text, at: 3600)
        #expect(window.segments.count == 1800 && window.segments.first?.key.position == 1)
        // A template numbered for years builds only the newest segments.
        let old = try Self.view(text).window(for: Self.video, now: Self.start.addingTimeInterval(86_400 * 365), after: nil, offset: 0)
        #expect(old.segments.count == DASHLiveView.maxWindow)
        #expect(old.segmentsAfter == 0 && old.segments.last?.key.position == 86_400 * 365 / 2)
    }

    @Test func aGrowingTimelineIsKeyedByTime() throws {
        let first = Self.live("""
            <SegmentTemplate timescale="90000" media="t-$Time$.m4s" initialization="init.mp4">
              <SegmentTimeline><S t="900000" d="180000" r="2"/></SegmentTimeline>
            </SegmentTemplate>
            """)
        // 3 segments from 10 s: [10,12) [12,14) [14,16); at 17 s all are out.
        let one = try window(first, at: 17)
        #expect(one.segments.map(\.key.position) == [900_000, 1_080_000, 1_260_000])
        #expect(one.segments.map { $0.segment.urls[0].lastPathComponent } == ["t-900000.m4s", "t-1080000.m4s", "t-1260000.m4s"])
        #expect(one.segments.map(\.start) == [10, 12, 14])
        // The next version of the MPD: the first entry slid out, two more came.
        let second = Self.live("""
            <SegmentTemplate timescale="90000" media="t-$Time$.m4s" initialization="init.mp4">
              <SegmentTimeline><S t="1080000" d="180000" r="3"/></SegmentTimeline>
            </SegmentTemplate>
            """)
        let two = try window(second, at: 21, after: LiveSegmentKey(position: 1_260_000))
        #expect(two.segments.map(\.key.position) == [1_440_000, 1_620_000])
        // r="-1" at the end: as many as the clock makes.
        let open = Self.live("""
            <SegmentTemplate timescale="1" media="t-$Time$.m4s"><SegmentTimeline><S t="0" d="2" r="-1"/></SegmentTimeline></SegmentTemplate>
            """)
        let opened = try window(open, at: 9)
        #expect(opened.segments.map(\.key.position) == [0, 2, 4, 6])
        #expect(opened.suggestedReload == Self.start.addingTimeInterval(10))
    }

    @Test func aTimelineNumberedByNumberIsKeyedByNumber() throws {
        let text = Self.live("""
            <SegmentTemplate timescale="1" startNumber="40" media="n-$Number$.m4s">
              <SegmentTimeline><S t="10" d="2" r="2"/><S d="3"/></SegmentTimeline>
            </SegmentTemplate>
            """)
        let window = try window(text, at: 20)
        #expect(window.segments.map(\.key.position) == [40, 41, 42, 43])
        #expect(window.segments.map(\.duration) == [2, 2, 2, 3])
        #expect(window.targetDuration == 3)
    }

    @Test func severalPeriodsFollowOneAnother() throws {
        let periods = """
            <Period id="a" start="PT0S">
              <AdaptationSet contentType="video" mimeType="video/mp4">
                <SegmentTemplate timescale="1" duration="2" media="a-$Number$.m4s" initialization="a-init.mp4"/>
                <Representation id="v" bandwidth="1000"/>
              </AdaptationSet>
            </Period>
            <Period id="b" start="PT6S">
              <AdaptationSet contentType="video" mimeType="video/mp4">
                <SegmentTemplate timescale="1" duration="2" media="b-$Number$.m4s" initialization="b-init.mp4"/>
                <Representation id="v2" bandwidth="900"/>
              </AdaptationSet>
            </Period>
            """
        let text = Self.live("", attributes: #"minimumUpdatePeriod="PT2S""#, periods: periods)
        let window = try window(text, at: 10)
        #expect(window.segments.map { $0.segment.urls[0].lastPathComponent } == ["a-1.m4s", "a-2.m4s", "a-3.m4s", "b-1.m4s", "b-2.m4s"])
        #expect(window.segments.map(\.key) == [
            LiveSegmentKey(period: 0, position: 1), LiveSegmentKey(period: 0, position: 2), LiveSegmentKey(period: 0, position: 3),
            LiveSegmentKey(period: 6000, position: 1), LiveSegmentKey(period: 6000, position: 2),
        ])
        #expect(window.segments.map(\.isDiscontinuity) == [false, false, false, true, false])
        #expect(window.segments[3].initSection?.urls[0].lastPathComponent == "b-init.mp4")
        #expect(window.segments.map(\.start) == [0, 2, 4, 6, 8])
    }

    @Test func theAnnouncedEndCompletesTheWindowWithoutSegmentsPastIt() throws {
        let text = Self.live(Self.numbered, attributes: #"mediaPresentationDuration="PT9S" minimumUpdatePeriod="PT2S""#)
        let running = try window(text, at: 7)
        #expect(running.segments.map(\.key.position) == [1, 2, 3])
        #expect(!running.isComplete)
        // 9 s of media: five segments, the last one short of its 2 s; nothing after it.
        let ended = try window(text, at: 60)
        #expect(ended.segments.map(\.key.position) == [1, 2, 3, 4, 5])
        #expect(ended.isComplete && ended.suggestedReload == nil)
    }

    @Test func anMPDThatTurnedStaticOffersEverySegmentAndIsComplete() throws {
        let text = """
            <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT8S">
              <Period start="PT0S"><AdaptationSet contentType="video" mimeType="video/mp4">
                \(Self.numbered)<Representation id="v" bandwidth="1000"/></AdaptationSet></Period>
            </MPD>
            """
        let window = try Self.view(text).window(for: Self.video, now: .distantPast, after: LiveSegmentKey(position: 2), offset: 0)
        #expect(window.segments.map(\.key.position) == [3, 4])
        #expect(window.isComplete)
    }

    @Test func theMPDClockOffsetShiftsAvailability() throws {
        // The MPD's clock is 100 s ahead of ours: at our 31 s it is 131 s there.
        let view = try Self.view(Self.live(Self.numbered))
        let window = try view.window(for: Self.video, now: Self.start.addingTimeInterval(131), after: nil, offset: 100)
        #expect(window.segments.last?.key.position == 65)
        #expect(window.suggestedReload == Self.start.addingTimeInterval(32))
    }

    @Test func aSingleFileRepresentationCannotBeRecordedLive() {
        let text = Self.live("<BaseURL>whole.mp4</BaseURL>")
        expectDownloadError(.manifestInvalid, "is one file") { _ = try window(text, at: 10) }
    }
}
