import Foundation
import Tessera
import Testing

@testable import DASHEntity

/// `SegmentTemplate` addressing: `$Number$`, `$Time$`, `$Bandwidth$`, `$RepresentationID$`,
/// `$$`, printf widths, `@startNumber`, `@duration`/`@timescale`, `SegmentTimeline`.
@Suite struct DASHTemplateTests {
    @Test func aTimelineWithRepeatsGivesTheExactTimes() throws {
        let result = try manifest(mpd(duration: "PT9S", """
            <AdaptationSet contentType="video" mimeType="video/mp4">
              <SegmentTemplate timescale="90000" initialization="$RepresentationID$/init.mp4" media="$RepresentationID$/seg-$Time$.m4s">
                <SegmentTimeline>
                  <S t="0" d="180000" r="3"/>
                  <S d="90000"/>
                </SegmentTimeline>
              </SegmentTemplate>
              <Representation id="v1" bandwidth="1000000" width="1280" height="720" codecs="avc1.64001f"/>
            </AdaptationSet>
            """))
        let video = try output(result, "v1")
        let base = "https://cdn.example.com/vod/show/v1/"
        #expect(urls(video) == [
            base + "init.mp4", base + "seg-0.m4s", base + "seg-180000.m4s", base + "seg-360000.m4s", base + "seg-540000.m4s",
            base + "seg-720000.m4s",
        ])
        #expect(video.segments.allSatisfy { $0.range == nil && $0.urls.count == 1 })
        #expect(result.metadata["addressing"] == "SegmentTemplate+SegmentTimeline")
        #expect(result.metadata["segments"] == "6")
    }

    @Test func numbersInATimelineStartAtStartNumber() throws {
        let result = try manifest(mpd("""
            <AdaptationSet mimeType="video/mp4">
              <SegmentTemplate timescale="1000" startNumber="10" media="n$Number$-t$Time$.m4s">
                <SegmentTimeline><S t="500" d="2000" r="1"/><S t="5000" d="1000"/></SegmentTimeline>
              </SegmentTemplate>
              <Representation id="v" bandwidth="1"/>
            </AdaptationSet>
            """))
        // A later S@t that leaves a gap starts over at that time; numbers keep counting.
        #expect(urls(try output(result, "v")).map { $0.replacingOccurrences(of: "https://cdn.example.com/vod/show/", with: "") } == [
            "n10-t500.m4s", "n11-t2500.m4s", "n12-t5000.m4s",
        ])
    }

    @Test func aRepeatOfMinusOneRunsToTheEndOfThePeriod() throws {
        // 10 s at timescale 1000 in 4 s segments: ceil(10 / 4) = 3, the last one short.
        let result = try manifest(mpd(duration: "PT10S", """
            <AdaptationSet mimeType="audio/mp4">
              <SegmentTemplate timescale="1000" media="a-$Time$.m4a"><SegmentTimeline><S t="0" d="4000" r="-1"/></SegmentTimeline></SegmentTemplate>
              <Representation id="a" bandwidth="1"/>
            </AdaptationSet>
            """))
        #expect(urls(try output(result, "a")).map { URL(string: $0)!.lastPathComponent } == ["a-0.m4a", "a-4000.m4a", "a-8000.m4a"])
    }

    @Test func aRepeatOfMinusOneRunsUpToTheNextTime() throws {
        let result = try manifest(mpd(duration: "PT10S", """
            <AdaptationSet mimeType="audio/mp4">
              <SegmentTemplate timescale="1000" media="a-$Time$.m4a">
                <SegmentTimeline><S t="0" d="2000" r="-1"/><S t="8000" d="2000"/></SegmentTimeline>
              </SegmentTemplate>
              <Representation id="a" bandwidth="1"/>
            </AdaptationSet>
            """))
        #expect(urls(try output(result, "a")).map { URL(string: $0)!.lastPathComponent } == [
            "a-0.m4a", "a-2000.m4a", "a-4000.m4a", "a-6000.m4a", "a-8000.m4a",
        ])
    }

    @Test func presentationTimeOffsetMovesThePeriodEndButNotTheURLs() throws {
        // The media timeline starts at 10 s (PTO 900000 at 90 kHz); the period lasts 10 s.
        let result = try manifest(mpd(duration: "PT10S", """
            <AdaptationSet mimeType="video/mp4">
              <SegmentTemplate timescale="90000" presentationTimeOffset="900000" media="v-$Time$.m4s">
                <SegmentTimeline><S t="900000" d="180000" r="-1"/></SegmentTimeline>
              </SegmentTemplate>
              <Representation id="v" bandwidth="1"/>
            </AdaptationSet>
            """))
        #expect(urls(try output(result, "v")).map { URL(string: $0)!.lastPathComponent } == [
            "v-900000.m4s", "v-1080000.m4s", "v-1260000.m4s", "v-1440000.m4s", "v-1620000.m4s",
        ])
    }

    @Test func durationAndTimescaleGiveTheCeilingOfTheCount() throws {
        // 9 s of 96000/48000 = 2 s segments: ceil(4.5) = 5.
        let result = try manifest(mpd(duration: "PT9S", """
            <AdaptationSet contentType="audio" mimeType="audio/mp4" lang="en">
              <SegmentTemplate timescale="48000" duration="96000" initialization="$RepresentationID$/init.mp4" media="$RepresentationID$/$Number%05d$.m4s"/>
              <Representation id="a128" bandwidth="128000" codecs="mp4a.40.2"/>
            </AdaptationSet>
            """))
        let audio = try output(result, "a128")
        #expect(urls(audio) == ["init.mp4", "00001.m4s", "00002.m4s", "00003.m4s", "00004.m4s", "00005.m4s"].map {
            "https://cdn.example.com/vod/show/a128/" + $0
        })
        #expect(result.metadata["addressing"] == "SegmentTemplate@duration")
    }

    @Test func anExactMultipleAddsNoExtraSegment() throws {
        // 30 s of 2 s segments is 15, not 16 (no floating-point residue); default timescale 1.
        let result = try manifest(mpd(duration: "PT30S", """
            <AdaptationSet mimeType="video/mp4"><SegmentTemplate duration="2" media="$Number$.m4s"/><Representation id="v" bandwidth="1"/></AdaptationSet>
            """))
        let video = try output(result, "v")
        #expect(video.segments.count == 15)
        #expect(urls(video).last == "https://cdn.example.com/vod/show/15.m4s")
        // 10.001 s of 2 s segments: 6.
        let longer = try manifest(mpd(duration: "PT10.001S", """
            <AdaptationSet mimeType="video/mp4"><SegmentTemplate duration="2" startNumber="0" media="$Number$.m4s"/><Representation id="v" bandwidth="1"/></AdaptationSet>
            """))
        #expect(urls(try output(longer, "v")).map { URL(string: $0)!.lastPathComponent } == ["0.m4s", "1.m4s", "2.m4s", "3.m4s", "4.m4s", "5.m4s"])
    }

    @Test func everyIdentifierAndWidthExpands() throws {
        let result = try manifest(mpd(duration: "PT4S", """
            <AdaptationSet mimeType="audio/mp4">
              <SegmentTemplate timescale="10" duration="20" startNumber="7"
                  initialization="init-$RepresentationID$-$Bandwidth$.mp4"
                  media="$RepresentationID$_$Bandwidth%09d$_$Time%012d$_$$_$Number%d$_$Number%03d$.m4s"/>
              <Representation id="aac" bandwidth="128000"/>
            </AdaptationSet>
            """))
        #expect(urls(try output(result, "aac")).map { $0.replacingOccurrences(of: "https://cdn.example.com/vod/show/", with: "") } == [
            "init-aac-128000.mp4",
            "aac_000128000_000000000000_$_7_007.m4s",
            "aac_000128000_000000000020_$_8_008.m4s",
        ])
    }

    @Test func anInitializationElementInATemplateIsExpandedToo() throws {
        let result = try manifest(mpd(duration: "PT2S", """
            <AdaptationSet mimeType="video/mp4">
              <SegmentTemplate duration="2" media="$RepresentationID$-$Number$.m4s">
                <Initialization sourceURL="$RepresentationID$-$Bandwidth$.init"/>
              </SegmentTemplate>
              <Representation id="v" bandwidth="5"/>
            </AdaptationSet>
            """))
        #expect(urls(try output(result, "v")) == ["https://cdn.example.com/vod/show/v-5.init", "https://cdn.example.com/vod/show/v-1.m4s"])
    }

    @Test func aTemplateWithoutNumberOrTimeIsOneSegment() throws {
        let result = try manifest(mpd("""
            <AdaptationSet mimeType="video/mp4"><SegmentTemplate media="$RepresentationID$.mp4"/><Representation id="whole" bandwidth="1"/></AdaptationSet>
            """))
        #expect(urls(try output(result, "whole")) == ["https://cdn.example.com/vod/show/whole.mp4"])
    }

    @Test func endNumberCapsTheCount() throws {
        let result = try manifest(mpd(duration: "PT100S", """
            <AdaptationSet mimeType="video/mp4"><SegmentTemplate duration="2" startNumber="3" endNumber="5" media="$Number$.m4s"/><Representation id="v" bandwidth="1"/></AdaptationSet>
            """))
        #expect(urls(try output(result, "v")).map { URL(string: $0)!.lastPathComponent } == ["3.m4s", "4.m4s", "5.m4s"])
    }

    @Test func templatesParseAndRefuse() throws {
        let template = try URLTemplate("a$$b$Number%04d$c$Time%x$d$Bandwidth%X$")
        #expect(template.expand(representationID: "r", bandwidth: 255, number: 42, time: 255) == "a$b0042cffdFF")
        #expect(template.usesNumber && template.usesTime && template.usesBandwidth)
        for bad in ["$Foo$", "$Number", "$Number%5d$", "$Number%0s$", "$RepresentationID%02d$", "$SubNumber$"] {
            #expect(throws: TemplateError.self, "\(bad)") { try URLTemplate(bad) }
        }
    }

    @Test func isoDurationsParseToNanoseconds() {
        let second: Int128 = 1_000_000_000
        #expect(MPDTime.parseDuration("PT1H2M3.5S") == 3723 * second + second / 2)
        #expect(MPDTime.parseDuration("P1DT2H") == 93_600 * second)
        #expect(MPDTime.parseDuration("PT0S") == 0)
        #expect(MPDTime.parseDuration("P0Y0M0DT0H3M30.000S") == 210 * second)
        #expect(MPDTime.parseDuration("PT634.566S") == 634_566_000_000)
        #expect(MPDTime.parseDuration(" PT0.000000001S ") == 1)
        #expect(MPDTime.parseDuration("P1W") == 7 * 86_400 * second)
        for bad in ["", "P", "PT", "1S", "PT-1S", "-PT1S", "P1H", "PT1S2M", "PT1D", "PTS", "PT1.5", "P1DT", "PT1H1H"] {
            #expect(MPDTime.parseDuration(bad) == nil, "\(bad)")
        }
    }
}
