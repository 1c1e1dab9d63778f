import Foundation
import Tessera
import Testing
import TesseraTestSupport

@testable import DASHEntity

/// BaseURLs, SegmentList, SegmentBase, inheritance, periods, outputs and namespaces.
@Suite struct DASHStructureTests {
    // MARK: BaseURL

    @Test func baseURLsResolveLevelByLevel() throws {
        let text = """
            <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT2S">
              <BaseURL>../media/</BaseURL>
              <Period>
                <BaseURL>p1/</BaseURL>
                <AdaptationSet mimeType="video/mp4">
                  <BaseURL>video/</BaseURL>
                  <SegmentTemplate duration="2" media="seg-$Number$.m4s" initialization="init.mp4"/>
                  <Representation id="v1" bandwidth="1"><BaseURL>v1/</BaseURL></Representation>
                  <Representation id="v2" bandwidth="2"><BaseURL>https://other.example/x/</BaseURL></Representation>
                  <Representation id="v3" bandwidth="3"><BaseURL>/root/</BaseURL></Representation>
                </AdaptationSet>
              </Period>
            </MPD>
            """
        let result = try manifest(text, format: "all")
        #expect(urls(try output(result, "v1")) == [
            "https://cdn.example.com/vod/media/p1/video/v1/init.mp4", "https://cdn.example.com/vod/media/p1/video/v1/seg-1.m4s",
        ])
        // An absolute BaseURL starts over; a path-absolute one keeps only the host.
        #expect(urls(try output(result, "v2")) == ["https://other.example/x/init.mp4", "https://other.example/x/seg-1.m4s"])
        #expect(urls(try output(result, "v3")) == ["https://cdn.example.com/root/init.mp4", "https://cdn.example.com/root/seg-1.m4s"])
    }

    @Test func severalBaseURLsAreMirrorsPrimaryFirst() throws {
        let text = """
            <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT4S">
              <BaseURL serviceLocation="a">https://cdn1.example.com/dash/</BaseURL>
              <BaseURL serviceLocation="b">https://cdn2.example.com/mirror/</BaseURL>
              <Period>
                <AdaptationSet mimeType="audio/mp4">
                  <BaseURL>audio/</BaseURL>
                  <SegmentTemplate duration="2" media="$Number$.m4a"/>
                  <Representation id="a" bandwidth="1"/>
                </AdaptationSet>
              </Period>
            </MPD>
            """
        let audio = try output(try manifest(text), "a")
        #expect(audio.segments.map { $0.urls.map(\.absoluteString) } == [
            ["https://cdn1.example.com/dash/audio/1.m4a", "https://cdn2.example.com/mirror/audio/1.m4a"],
            ["https://cdn1.example.com/dash/audio/2.m4a", "https://cdn2.example.com/mirror/audio/2.m4a"],
        ])
    }

    @Test func relativeURLsResolveAgainstTheRedirectedURL() throws {
        let redirected = URL(string: "https://edge7.example.net/cache/abc/stream.mpd?token=1")!
        let result = try manifest(mpd("""
            <AdaptationSet mimeType="video/mp4"><BaseURL>v/</BaseURL><SegmentTemplate duration="10" media="$Number$.m4s"/><Representation id="v" bandwidth="1"/></AdaptationSet>
            """), url: redirected)
        #expect(urls(try output(result, "v")) == ["https://edge7.example.net/cache/abc/v/1.m4s"])
        #expect(result.sourceURL == redirected)
    }

    // MARK: SegmentList

    @Test func aSegmentListGivesURLsAndRanges() throws {
        let result = try manifest(mpd("""
            <AdaptationSet mimeType="video/mp4">
              <Representation id="r1" bandwidth="500000">
                <BaseURL>video-500k.mp4</BaseURL>
                <SegmentList timescale="1000" duration="4000">
                  <Initialization sourceURL="init-500k.mp4"/>
                  <SegmentURL media="seg1.m4s"/>
                  <SegmentURL media="seg2.m4s" mediaRange="100-199"/>
                  <SegmentURL mediaRange="1000-1999"/>
                </SegmentList>
              </Representation>
              <Representation id="r2" bandwidth="900000">
                <BaseURL>video-900k.mp4</BaseURL>
                <SegmentList><Initialization range="0-861"/><SegmentURL mediaRange="862-50000"/><SegmentURL mediaRange="50001-"/></SegmentList>
              </Representation>
            </AdaptationSet>
            """), format: "all")
        let base = "https://cdn.example.com/vod/show/"
        let first = try output(result, "r1")
        #expect(urls(first) == [base + "init-500k.mp4", base + "seg1.m4s", base + "seg2.m4s", base + "video-500k.mp4"])
        #expect(first.segments.map(\.range) == [nil, nil, ByteRange(offset: 100, length: 100), ByteRange(offset: 1000, length: 1000)])
        #expect(first.segments.map(\.expectedSize) == [nil, nil, 100, 1000])
        let second = try output(result, "r2")
        #expect(urls(second) == Array(repeating: base + "video-900k.mp4", count: 3))
        #expect(second.segments.map(\.range) == [ByteRange(offset: 0, length: 862), ByteRange(offset: 862, length: 49_139), ByteRange(offset: 50_001)])
        #expect(result.metadata["addressing"] == "SegmentList")
    }

    // MARK: SegmentBase and single files

    @Test func aSegmentBaseIsTheWholeFile() throws {
        // The DASH-IF on-demand shape (ISO BMFF On Demand profile, dash264 test vectors).
        let text = """
            <?xml version="1.0"?>
            <MPD xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xmlns="urn:mpeg:dash:schema:mpd:2011"
                 minBufferTime="PT1.500000S" type="static" mediaPresentationDuration="PT0H9M56.46S"
                 profiles="urn:mpeg:dash:profile:isoff-on-demand:2011">
              <BaseURL>http://dash.edgesuite.net/dash264/TestCases/1a/netflix/</BaseURL>
              <Period start="PT0S">
                <AdaptationSet mimeType="video/mp4" segmentAlignment="true" startWithSAP="1" maxWidth="1280" maxHeight="720">
                  <Representation id="1" codecs="avc1.4d401f" width="512" height="288" frameRate="24" sar="1:1" bandwidth="349952">
                    <BaseURL>ElephantsDream_H264BPL30_0175.264.dash</BaseURL>
                    <SegmentBase indexRangeExact="true" indexRange="839-2086"><Initialization range="0-838"/></SegmentBase>
                  </Representation>
                  <Representation id="2" codecs="avc1.4d401f" width="1280" height="720" frameRate="24" sar="1:1" bandwidth="1524992">
                    <BaseURL>ElephantsDream_H264BPL30_1500.264.dash</BaseURL>
                    <SegmentBase indexRangeExact="true" indexRange="839-2086"/>
                  </Representation>
                </AdaptationSet>
                <AdaptationSet mimeType="audio/mp4" lang="en">
                  <Representation id="5" codecs="mp4a.40.2" audioSamplingRate="48000" bandwidth="67000">
                    <BaseURL>ElephantsDream_AAC48K_064.mp4.dash</BaseURL>
                    <SegmentBase indexRange="592-1243"><Initialization range="0-591"/></SegmentBase>
                  </Representation>
                </AdaptationSet>
                <AdaptationSet contentType="text" mimeType="text/vtt" lang="de">
                  <Representation id="sub-de" bandwidth="256"><BaseURL>subs/de.vtt</BaseURL></Representation>
                </AdaptationSet>
              </Period>
            </MPD>
            """
        let url = URL(string: "http://dash.edgesuite.net/dash264/TestCases/1a/netflix/exMPD_BIP_TC1.mpd")!
        let result = try manifest(text, url: url)
        let base = "http://dash.edgesuite.net/dash264/TestCases/1a/netflix/"
        // The audio track's id is a bare number: its file is named after its language.
        #expect(result.outputs.map(\.name) == ["exMPD_BIP_TC1/1.mp4", "exMPD_BIP_TC1/2.mp4", "exMPD_BIP_TC1/en.m4a", "exMPD_BIP_TC1/sub-de.vtt"])
        #expect(result.outputs.map(\.isSelected) == [false, true, true, false])
        #expect(result.outputs.map { urls($0) } == [
            [base + "ElephantsDream_H264BPL30_0175.264.dash"], [base + "ElephantsDream_H264BPL30_1500.264.dash"],
            [base + "ElephantsDream_AAC48K_064.mp4.dash"], [base + "subs/de.vtt"],
        ])
        #expect(result.outputs.allSatisfy { $0.segments.allSatisfy { $0.range == nil } })
        #expect(result.outputs[3].media == MediaInfo(kind: .subtitles, identifier: "sub-de", bandwidth: 256, language: "de"))
        #expect(result.metadata["duration"] == "9m56.460s")
    }

    @Test func aSegmentBaseWithASeparateInitializationFileListsItFirst() throws {
        let result = try manifest(mpd("""
            <AdaptationSet mimeType="audio/mp4">
              <Representation id="a" bandwidth="1"><BaseURL>a.mp4</BaseURL><SegmentBase><Initialization sourceURL="a-init.mp4"/></SegmentBase></Representation>
            </AdaptationSet>
            """))
        #expect(urls(try output(result, "a")) == ["https://cdn.example.com/vod/show/a-init.mp4", "https://cdn.example.com/vod/show/a.mp4"])
    }

    // MARK: Inheritance

    @Test func segmentTemplateAttributesAreInheritedOneByOne() throws {
        let text = """
            <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT100S">
              <Period duration="PT8S">
                <SegmentTemplate timescale="1000" duration="2000" startNumber="5" media="$RepresentationID$/$Number$.m4s" initialization="$RepresentationID$/init.mp4"/>
                <AdaptationSet mimeType="video/mp4">
                  <SegmentTemplate duration="4000"/>
                  <Representation id="v1" bandwidth="1"><SegmentTemplate startNumber="1" media="$RepresentationID$/m-$Number$.m4s"/></Representation>
                  <Representation id="v2" bandwidth="2"/>
                </AdaptationSet>
                <AdaptationSet mimeType="audio/mp4">
                  <Representation id="a" bandwidth="3"/>
                </AdaptationSet>
              </Period>
            </MPD>
            """
        let result = try manifest(text, format: "all")
        let base = "https://cdn.example.com/vod/show/"
        #expect(urls(try output(result, "v1")) == [base + "v1/init.mp4", base + "v1/m-1.m4s", base + "v1/m-2.m4s"])
        #expect(urls(try output(result, "v2")) == [base + "v2/init.mp4", base + "v2/5.m4s", base + "v2/6.m4s"])
        #expect(urls(try output(result, "a")) == [base + "a/init.mp4", base + "a/5.m4s", base + "a/6.m4s", base + "a/7.m4s", base + "a/8.m4s"])
    }

    @Test func aSegmentTimelineIsInheritedWhole() throws {
        let result = try manifest(mpd("""
            <AdaptationSet mimeType="video/mp4">
              <SegmentTemplate timescale="10" media="x-$Time$.m4s" initialization="x-init.mp4">
                <SegmentTimeline><S t="0" d="20" r="1"/></SegmentTimeline>
              </SegmentTemplate>
              <Representation id="v" bandwidth="1"><SegmentTemplate media="$RepresentationID$-$Time$.m4s"/></Representation>
            </AdaptationSet>
            """))
        #expect(urls(try output(result, "v")).map { URL(string: $0)!.lastPathComponent } == ["x-init.mp4", "v-0.m4s", "v-20.m4s"])
    }

    @Test func aSegmentListIsInheritedFromTheAdaptationSet() throws {
        let result = try manifest(mpd("""
            <AdaptationSet mimeType="video/mp4">
              <SegmentList><Initialization sourceURL="i.mp4"/><SegmentURL media="s1.m4s"/><SegmentURL media="s2.m4s"/></SegmentList>
              <Representation id="lo" bandwidth="1"><BaseURL>lo/</BaseURL></Representation>
              <Representation id="hi" bandwidth="2"><BaseURL>hi/</BaseURL></Representation>
            </AdaptationSet>
            """), format: "all")
        #expect(urls(try output(result, "hi")).map { $0.replacingOccurrences(of: "https://cdn.example.com/vod/show/", with: "") } == [
            "hi/i.mp4", "hi/s1.m4s", "hi/s2.m4s",
        ])
    }

    // MARK: Periods

    @Test func periodLengthsComeFromDurationNextStartOrThePresentation() throws {
        let text = """
            <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT20S">
              <Period id="a" duration="PT6S">
                <AdaptationSet mimeType="video/mp4"><SegmentTemplate duration="2" media="a-$Number$.m4s"/><Representation id="v" bandwidth="1"/></AdaptationSet>
              </Period>
              <Period id="b" start="PT10S">
                <AdaptationSet mimeType="video/mp4"><SegmentTemplate duration="2" media="b-$Number$.m4s"/><Representation id="v" bandwidth="1"/></AdaptationSet>
              </Period>
              <Period id="c" start="PT16S">
                <AdaptationSet mimeType="video/mp4"><SegmentTemplate duration="2" media="c-$Number$.m4s"/><Representation id="v" bandwidth="1"/></AdaptationSet>
              </Period>
            </MPD>
            """
        // a: its own 6 s; b: 10 s → 16 s (the next start); c: 16 s → 20 s (the presentation's end).
        let names = urls(try output(try manifest(text), "v")).map { URL(string: $0)!.lastPathComponent }
        #expect(names == ["a-1.m4s", "a-2.m4s", "a-3.m4s", "b-1.m4s", "b-2.m4s", "b-3.m4s", "c-1.m4s", "c-2.m4s"])
    }

    @Test func periodsAreMatchedByIdThenByKindAndClosestBandwidth() throws {
        let text = """
            <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT6S">
              <Period id="p1" duration="PT4S">
                <BaseURL>p1/</BaseURL>
                <AdaptationSet contentType="video" mimeType="video/mp4">
                  <SegmentTemplate duration="2" media="$RepresentationID$/$Number$.m4s" initialization="$RepresentationID$/init.mp4"/>
                  <Representation id="v1" bandwidth="1000000"/>
                  <Representation id="v2" bandwidth="3000000"/>
                </AdaptationSet>
                <AdaptationSet contentType="audio" mimeType="audio/mp4">
                  <SegmentTemplate duration="2" media="$RepresentationID$/$Number$.m4s" initialization="$RepresentationID$/init.mp4"/>
                  <Representation id="a1" bandwidth="128000"/>
                </AdaptationSet>
              </Period>
              <Period id="p2" duration="PT2S">
                <BaseURL>p2/</BaseURL>
                <AdaptationSet contentType="audio" mimeType="audio/mp4">
                  <SegmentTemplate duration="2" media="$RepresentationID$/$Number$.m4s" initialization="$RepresentationID$/init.mp4"/>
                  <Representation id="a2" bandwidth="96000"/>
                </AdaptationSet>
                <AdaptationSet contentType="video" mimeType="video/mp4">
                  <SegmentTemplate duration="2" media="$RepresentationID$/$Number$.m4s" initialization="$RepresentationID$/init.mp4"/>
                  <Representation id="v3" bandwidth="2500000"/>
                  <Representation id="v1" bandwidth="1500000"/>
                  <Representation id="v4" bandwidth="1000000"/>
                </AdaptationSet>
              </Period>
            </MPD>
            """
        let result = try manifest(text)
        let base = "https://cdn.example.com/vod/show/"
        #expect(result.outputs.map(\.name) == ["stream/v1.mp4", "stream/v2.mp4", "stream/a1.m4a"])
        #expect(result.outputs.map(\.isSelected) == [false, true, true])
        // v1 continues as v1 (by id, although v4 is closer in bandwidth).
        #expect(urls(try output(result, "v1")) == [
            base + "p1/v1/init.mp4", base + "p1/v1/1.m4s", base + "p1/v1/2.m4s", base + "p2/v1/init.mp4", base + "p2/v1/1.m4s",
        ])
        // v2 has no namesake in p2: the video with the closest bandwidth, v3.
        #expect(urls(try output(result, "v2")) == [
            base + "p1/v2/init.mp4", base + "p1/v2/1.m4s", base + "p1/v2/2.m4s", base + "p2/v3/init.mp4", base + "p2/v3/1.m4s",
        ])
        // a1: the only audio of p2, a2.
        #expect(urls(try output(result, "a1")) == [
            base + "p1/a1/init.mp4", base + "p1/a1/1.m4s", base + "p1/a1/2.m4s", base + "p2/a2/init.mp4", base + "p2/a2/1.m4s",
        ])
        #expect(result.metadata["periods"] == "2")
    }

    @Test func aRepeatedInitializationSegmentIsListedOnce() throws {
        let text = """
            <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT8S">
              <Period duration="PT4S">
                <AdaptationSet mimeType="video/mp4"><SegmentTemplate duration="2" media="v-$Number$.m4s" initialization="v-init.mp4"/><Representation id="v" bandwidth="1"/></AdaptationSet>
              </Period>
              <Period duration="PT4S">
                <AdaptationSet mimeType="video/mp4"><SegmentTemplate duration="2" startNumber="3" media="v-$Number$.m4s" initialization="v-init.mp4"/><Representation id="v" bandwidth="1"/></AdaptationSet>
              </Period>
            </MPD>
            """
        #expect(urls(try output(try manifest(text), "v")).map { URL(string: $0)!.lastPathComponent } == [
            "v-init.mp4", "v-1.m4s", "v-2.m4s", "v-3.m4s", "v-4.m4s",
        ])
    }

    // MARK: Outputs and selection

    static let selectionMPD = mpd("""
        <AdaptationSet contentType="video" mimeType="video/mp4" codecs="avc1.64001f">
          <SegmentTemplate duration="10" media="$RepresentationID$/$Number$.m4s"/>
          <Representation id="v480" bandwidth="800000" width="854" height="480"/>
          <Representation id="v1080" bandwidth="4800000" width="1920" height="1080" codecs="avc1.640028"/>
          <Representation id="v720" bandwidth="2400000" width="1280" height="720"/>
        </AdaptationSet>
        <AdaptationSet contentType="audio" mimeType="audio/mp4" lang="en">
          <SegmentTemplate duration="10" media="$RepresentationID$/$Number$.m4s"/>
          <Representation id="a64" bandwidth="64000" codecs="mp4a.40.5"/>
          <Representation id="a128" bandwidth="128000" codecs="mp4a.40.2"/>
        </AdaptationSet>
        <AdaptationSet contentType="text" mimeType="application/mp4" codecs="stpp" lang="fr">
          <SegmentTemplate duration="10" media="$RepresentationID$/$Number$.ttml"/>
          <Representation id="sub-fr" bandwidth="2000"/>
        </AdaptationSet>
        <AdaptationSet mimeType="video/x-matroska">
          <Representation id="mkv" bandwidth="9000000"><BaseURL>film.mkv</BaseURL></Representation>
        </AdaptationSet>
        """)

    @Test func everyRepresentationIsAnOutputWithItsMediaInfo() throws {
        let result = try manifest(Self.selectionMPD)
        #expect(result.outputs.map(\.name) == [
            "stream/v480.mp4", "stream/v1080.mp4", "stream/v720.mp4", "stream/a64.m4a", "stream/a128.m4a", "stream/sub-fr.ttml",
            "stream/mkv.mkv",
        ])
        #expect(result.outputs.allSatisfy { $0.assembly == .concatenated })
        #expect(try output(result, "v720").media == MediaInfo(
            kind: .video, identifier: "v720", bandwidth: 2_400_000, width: 1280, height: 720, codecs: "avc1.64001f", quality: "720p"))
        #expect(try output(result, "v1080").media?.codecs == "avc1.640028")
        #expect(try output(result, "a128").media == MediaInfo(kind: .audio, identifier: "a128", bandwidth: 128_000, codecs: "mp4a.40.2", language: "en"))
        #expect(try output(result, "sub-fr").media?.kind == .subtitles)
        #expect(try output(result, "mkv").media?.kind == .video)
        #expect(result.metadata["representations"] == "7")
    }

    @Test(arguments: [
        ("best", ["v1080", "a128"]), ("default", ["v1080", "a128"]), ("worst", ["v480", "a64"]),
        ("all", ["v480", "v1080", "v720", "a64", "a128", "sub-fr", "mkv"]), ("v720+a64", ["v720", "a64"]), ("sub-fr", ["sub-fr"]),
    ])
    func theFormatSelects(_ format: String, _ expected: [String]) throws {
        let result = try manifest(Self.selectionMPD.replacingOccurrences(of: "mimeType=\"video/x-matroska\"", with: "mimeType=\"video/x-matroska\" contentType=\"image\""), format: format)
        #expect(result.selectedOutputs.compactMap { $0.media?.identifier }.sorted() == expected.sorted())
        #expect(result.outputs.count == 7)
    }

    @Test func theBestVideoIsTheHighestBandwidthEvenWhenMuxedOrUnlabelled() throws {
        // With contentType image, mkv is not a video; without it, the 9 Mb/s mkv is the best video.
        let result = try manifest(Self.selectionMPD)
        #expect(result.selectedOutputs.compactMap { $0.media?.identifier } == ["a128", "mkv"])
    }

    @Test func anUnknownIdListsTheRepresentations() throws {
        expectDownloadError(.invalidRequest, "no representation \"v2160\"", "v480 (video 854x480, 800 kb/s)", "a128 (audio, en, 128 kb/s)") {
            _ = try manifest(Self.selectionMPD, format: "v2160")
        }
    }

    @Test func theOutputDirectoryComesFromTheMPDName() throws {
        let urls = [
            ("https://cdn.example.com/a/Stream.MPD?x=1#t=3", "Stream"),
            ("https://demo.unified-streaming.com/video/tears-of-steel/tears-of-steel.ism/.mpd", "tears-of-steel"),
            ("https://cdn.example.com/manifest%20one.mpd", "manifest one"),
            ("https://cdn.example.com/", "manifest"),
        ]
        for (text, name) in urls {
            #expect(DASHEntity(url: URL(string: text)!).outputDirectory == name, "\(text)")
        }
    }

    // MARK: Namespaces and real-world shapes

    @Test func aPrefixedNamespaceReadsLikeTheDefaultOne() throws {
        let prefixed = """
            <?xml version="1.0"?>
            <dash:MPD xmlns:dash="urn:mpeg:dash:schema:mpd:2011" xmlns:cenc="urn:mpeg:cenc:2013" type="static" mediaPresentationDuration="PT4S">
              <dash:BaseURL>media/</dash:BaseURL>
              <dash:Period>
                <dash:AdaptationSet mimeType="video/mp4" contentType="video">
                  <dash:SegmentTemplate timescale="10" initialization="$RepresentationID$-i.mp4" media="$RepresentationID$-$Number$.m4s" duration="20"/>
                  <dash:Representation id="v" bandwidth="1" width="2" height="3"/>
                </dash:AdaptationSet>
              </dash:Period>
            </dash:MPD>
            """
        let plain = """
            <?xml version="1.0"?>
            <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT4S">
              <BaseURL>media/</BaseURL>
              <Period>
                <AdaptationSet mimeType="video/mp4" contentType="video">
                  <SegmentTemplate timescale="10" initialization="$RepresentationID$-i.mp4" media="$RepresentationID$-$Number$.m4s" duration="20"/>
                  <Representation id="v" bandwidth="1" width="2" height="3"/>
                </AdaptationSet>
              </Period>
            </MPD>
            """
        let a = try manifest(prefixed), b = try manifest(plain)
        #expect(a.outputs == b.outputs)
        #expect(urls(a.outputs[0]) == ["i.mp4", "1.m4s", "2.m4s"].map { "https://cdn.example.com/vod/show/media/v-" + $0 })
    }

    @Test func unknownElementsAndAttributesAreIgnored() throws {
        let result = try manifest(mpd("""
            <AdaptationSet mimeType="video/mp4" futureAttribute="x" xmlns:ext="urn:example:ext" ext:flag="1">
              <ext:BaseURL>https://evil.example/</ext:BaseURL>
              <Role schemeIdUri="urn:mpeg:dash:role:2011" value="main"/>
              <SupplementalProperty schemeIdUri="urn:example" value="1"/>
              <Wibble><BaseURL>https://evil.example/</BaseURL></Wibble>
              <SegmentTemplate duration="10" media="$Number$.m4s" newThing="7"/>
              <Representation id="v" bandwidth="1" scanType="progressive" madeUp="yes"><Label>Main</Label></Representation>
            </AdaptationSet>
            """))
        #expect(urls(try output(result, "v")) == ["https://cdn.example.com/vod/show/1.m4s"])
    }

    @Test func theAkamaiBigBuckBunnyShape() throws {
        // dash.akamaized.net/akamai/bbb_30fps/bbb_30fps.mpd, abridged.
        let text = """
            <?xml version="1.0" encoding="UTF-8"?>
            <MPD mediaPresentationDuration="PT634.566S" minBufferTime="PT2.00S"
                 profiles="urn:hbbtv:dash:profile:isoff-live:2012,urn:mpeg:dash:profile:isoff-live:2011" type="static"
                 xmlns="urn:mpeg:dash:schema:mpd:2011" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
                 xsi:schemaLocation="urn:mpeg:DASH:schema:MPD:2011 DASH-MPD.xsd">
             <BaseURL>./</BaseURL>
             <Period>
              <AdaptationSet mimeType="video/mp4" contentType="video" subsegmentAlignment="true" subsegmentStartsWithSAP="1" par="16:9">
               <SegmentTemplate duration="120" timescale="30" media="$RepresentationID$/$RepresentationID$_$Number$.m4v" startNumber="1" initialization="$RepresentationID$/$RepresentationID$_0.m4v"/>
               <Representation id="bbb_30fps_1024x576_2500k" codecs="avc1.64001f" bandwidth="3134488" width="1024" height="576" frameRate="30" sar="1:1" scanType="progressive"/>
               <Representation id="bbb_30fps_3840x2160_12000k" codecs="avc1.640033" bandwidth="14931538" width="3840" height="2160" frameRate="30" sar="1:1" scanType="progressive"/>
               <Representation id="bbb_30fps_320x180_200k" codecs="avc1.64000d" bandwidth="254320" width="320" height="180" frameRate="30" sar="1:1" scanType="progressive"/>
              </AdaptationSet>
              <AdaptationSet mimeType="audio/mp4" contentType="audio" subsegmentAlignment="true" subsegmentStartsWithSAP="1">
               <Accessibility schemeIdUri="urn:tva:metadata:cs:AudioPurposeCS:2007" value="6"/>
               <Role schemeIdUri="urn:mpeg:dash:role:2011" value="main"/>
               <SegmentTemplate duration="192512" timescale="48000" media="$RepresentationID$/$RepresentationID$_$Number$.m4a" startNumber="1" initialization="$RepresentationID$/$RepresentationID$_0.m4a"/>
               <Representation id="bbb_a64k" codecs="mp4a.40.5" bandwidth="67071" audioSamplingRate="48000">
                <AudioChannelConfiguration schemeIdUri="urn:mpeg:dash:23003:3:audio_channel_configuration:2011" value="2"/>
               </Representation>
              </AdaptationSet>
             </Period>
            </MPD>
            """
        let result = try manifest(text, url: URL(string: "https://dash.akamaized.net/akamai/bbb_30fps/bbb_30fps.mpd")!)
        #expect(result.selectedOutputs.map(\.name) == ["bbb_30fps/bbb_30fps_3840x2160_12000k.mp4", "bbb_30fps/bbb_a64k.m4a"])
        let video = try output(result, "bbb_30fps_3840x2160_12000k")
        let base = "https://dash.akamaized.net/akamai/bbb_30fps/bbb_30fps_3840x2160_12000k/bbb_30fps_3840x2160_12000k_"
        // ceil(634.566 × 30 / 120) = 159 media segments, numbered from 1, after the _0 init.
        #expect(video.segments.count == 160)
        #expect(urls(video).prefix(3) == [base + "0.m4v", base + "1.m4v", base + "2.m4v"])
        #expect(urls(video).last == base + "159.m4v")
        // ceil(634.566 × 48000 / 192512) = ceil(158.22) = 159.
        let audio = try output(result, "bbb_a64k")
        #expect(audio.segments.count == 160)
        #expect(urls(audio).last == "https://dash.akamaized.net/akamai/bbb_30fps/bbb_a64k/bbb_a64k_159.m4a")
        #expect(result.metadata["segments"] == "\(160 * 4)")
    }

    @Test func theUnifiedStreamingTimelineShape() throws {
        // demo.unified-streaming.com …/tears-of-steel.ism/.mpd, abridged: timelines with irregular
        // durations, ids with "=" in them, a separate text track.
        let text = """
            <?xml version="1.0" encoding="utf-8"?>
            <MPD xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xmlns="urn:mpeg:dash:schema:mpd:2011"
                 xsi:schemaLocation="urn:mpeg:dash:schema:mpd:2011 http://standards.iso.org/ittf/PubliclyAvailableStandards/MPEG-DASH_schema_files/DASH-MPD.xsd"
                 type="static" mediaPresentationDuration="PT12M14.167S" maxSegmentDuration="PT5S" minBufferTime="PT10S"
                 profiles="urn:mpeg:dash:profile:isoff-live:2011,urn:com:dashif:dash264">
              <Period id="1" start="PT0S">
                <AdaptationSet id="1" group="1" contentType="audio" lang="en" segmentAlignment="true" audioSamplingRate="44100"
                               mimeType="audio/mp4" codecs="mp4a.40.2" startWithSAP="1">
                  <AudioChannelConfiguration schemeIdUri="urn:mpeg:dash:23003:3:audio_channel_configuration:2011" value="2"/>
                  <Role schemeIdUri="urn:mpeg:dash:role:2011" value="main"/>
                  <SegmentTemplate timescale="44100" initialization="tears-of-steel-$RepresentationID$.dash"
                                   media="tears-of-steel-$RepresentationID$-$Time$.dash">
                    <SegmentTimeline>
                      <S t="0" d="177341"/>
                      <S d="176128"/>
                      <S d="177152"/>
                      <S d="176128" r="1"/>
                    </SegmentTimeline>
                  </SegmentTemplate>
                  <Representation id="audio_eng=64008" bandwidth="64008"/>
                  <Representation id="audio_eng=128002" bandwidth="128002"/>
                </AdaptationSet>
                <AdaptationSet id="2" group="2" contentType="video" par="16:7" minBandwidth="100000" maxBandwidth="1500000"
                               segmentAlignment="true" sar="1:1" frameRate="24" mimeType="video/mp4" codecs="avc1.4D401F" startWithSAP="1">
                  <SegmentTemplate timescale="12288" initialization="tears-of-steel-$RepresentationID$.dash"
                                   media="tears-of-steel-$RepresentationID$-$Time$.dash">
                    <SegmentTimeline><S t="0" d="49152" r="2"/></SegmentTimeline>
                  </SegmentTemplate>
                  <Representation id="video_eng=401000" bandwidth="401000" width="784" height="340"/>
                  <Representation id="video_eng=1001000" bandwidth="1001000" width="1680" height="732"/>
                </AdaptationSet>
              </Period>
            </MPD>
            """
        let url = URL(string: "https://demo.unified-streaming.com/k8s/features/stable/video/tears-of-steel/tears-of-steel.ism/.mpd")!
        let result = try manifest(text, url: url)
        #expect(result.selectedOutputs.map(\.name) == ["tears-of-steel/audio_eng=128002.m4a", "tears-of-steel/video_eng=1001000.mp4"])
        let base = "https://demo.unified-streaming.com/k8s/features/stable/video/tears-of-steel/tears-of-steel.ism/tears-of-steel-"
        #expect(urls(try output(result, "audio_eng=128002")) == [
            base + "audio_eng=128002.dash", base + "audio_eng=128002-0.dash", base + "audio_eng=128002-177341.dash",
            base + "audio_eng=128002-353469.dash", base + "audio_eng=128002-530621.dash", base + "audio_eng=128002-706749.dash",
        ])
        #expect(urls(try output(result, "video_eng=1001000")).suffix(3) == [
            base + "video_eng=1001000-0.dash", base + "video_eng=1001000-49152.dash", base + "video_eng=1001000-98304.dash",
        ])
    }
}
