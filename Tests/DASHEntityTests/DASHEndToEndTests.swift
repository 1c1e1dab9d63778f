import Foundation
import Tessera
import TesseraTesting
import Testing

@testable import DASHEntity

/// Downloads through a ``DownloadTaskManager`` from a ``LoopbackOrigin``.
@Suite(.timeLimit(.minutes(2))) struct DASHEndToEndTests {
    @Test func theDefaultSelectionIsTheBestVideoAndTheBestAudio() async throws {
        try await withHarness { harness in
            let fixture = DASHFixture.install(on: harness.origin)
            let info = try await harness.download(fixture.inputs[0])
            #expect(info.state == .completed, "\(String(describing: info.error))")
            #expect(await fixture.verify(downloadRoot: harness.downloadRoot) == [])
            // The folder is named by the MPD's <Title>, as yt-dlp names its files.
            #expect(filesUnder(harness.downloadRoot) == ["Tessera DASH fixture/a128.m4a", "Tessera DASH fixture/v720.mp4"])
            #expect(fixture.expectedFiles == ["Tessera DASH fixture/v720.mp4", "Tessera DASH fixture/a128.m4a"])
            for track in fixture.tracks where track.isDefault {
                #expect(sameBytes(harness.root.file("downloads/" + track.file), fixture.expectedBytes(of: track)), "\(track.id)")
                // Each part fetched exactly once.
                for part in track.parts { #expect(harness.origin.requestCount(for: part.path) == 1, "\(part.path)") }
            }
            // Nothing of the other representations.
            for track in fixture.tracks where !track.isDefault {
                for part in track.parts { #expect(harness.origin.requestCount(for: part.path) == 0, "\(part.path)") }
            }
            #expect(info.title == "Tessera DASH fixture")
        }
    }

    @Test func theManifestOfTheFixtureNamesTheTemplatedPaths() async throws {
        try await withLoopbackOrigin { origin in
            let fixture = DASHFixture.install(on: origin)
            let engine = try CurlEngine(configuration: CurlEngine.Configuration.forTests())
            defer { Task { await engine.shutdown() } }
            let entity = DASHEntity(url: URL(string: fixture.inputs[0])!)
            let manifest = try await entity.resolve(in: ResolveContext(engine: engine))
            #expect(manifest.outputs.map(\.name) == fixture.tracks.map(\.file))
            for (output, track) in zip(manifest.outputs, fixture.tracks) {
                #expect(output.segments.map { $0.urls.map(\.path) } == track.parts.map { [$0.path] })
                #expect(output.isSelected == track.isDefault)
            }
            await engine.shutdown()
        }
    }

    @Test func withoutATitleTheFolderIsTheMPDsNameAndAHostileTitleStaysInside() async throws {
        try await withHarness { harness in
            let untitled = DASHFixture.install(on: harness.origin, directory: "/dash/untitled", name: "stream", title: nil)
            let hostile = DASHFixture.install(on: harness.origin, directory: "/dash/hostile", name: "other", title: "../../etc/x\u{202E}")
            for fixture in [untitled, hostile] {
                let info = try await harness.download(fixture.inputs[0])
                #expect(info.state == .completed, "\(String(describing: info.error))")
            }
            #expect(filesUnder(harness.downloadRoot) == [
                "_.._etc_x_/a128.m4a", "_.._etc_x_/v720.mp4", "stream/a128.m4a", "stream/v720.mp4",
            ])
        }
    }

    @Test func formatAllDownloadsEveryRepresentation() async throws {
        try await withHarness { harness in
            let fixture = DASHFixture.install(on: harness.origin, directory: "/dash/all", name: "everything")
            let info = try await harness.download(fixture.inputs[0], format: "all")
            #expect(info.state == .completed, "\(String(describing: info.error))")
            #expect(filesUnder(harness.downloadRoot) == fixture.tracks.map(\.file).sorted())
            for track in fixture.tracks { #expect(await fixture.verify(track, downloadRoot: harness.downloadRoot) == []) }
        }
    }

    @Test func aSegmentListWithMediaRangesIsAssembledFromRanges() async throws {
        try await withHarness { harness in
            let origin = harness.origin
            origin.serve("/sl/video.mp4", .generated(size: 50_000, contentType: "video/mp4"))
            origin.serve("/sl/extra.m4s", .generated(size: 3_000, contentType: "video/mp4"))
            origin.serve("/sl/list.mpd", .text(mpd(duration: "PT12S", """
                <AdaptationSet mimeType="video/mp4">
                  <Representation id="r" bandwidth="1000">
                    <BaseURL>video.mp4</BaseURL>
                    <SegmentList timescale="1" duration="4">
                      <Initialization range="0-999"/>
                      <SegmentURL mediaRange="1000-20999"/>
                      <SegmentURL mediaRange="21000-49999"/>
                      <SegmentURL media="extra.m4s"/>
                    </SegmentList>
                  </Representation>
                </AdaptationSet>
                """), contentType: "application/dash+xml"))
            let info = try await harness.download(origin.url("/sl/list.mpd").absoluteString)
            #expect(info.state == .completed, "\(String(describing: info.error))")
            let expected = harness.bytes("/sl/video.mp4", 0..<50_000) + harness.bytes("/sl/extra.m4s", 0..<3_000)
            #expect(sameBytes(harness.root.file("downloads/list/r.mp4"), expected))
            let ranges = Set(origin.requests(for: "/sl/video.mp4").compactMap { $0.header("Range") })
            #expect(ranges == ["bytes=0-999", "bytes=1000-20999", "bytes=21000-49999"])
        }
    }

    @Test func aSegmentBaseRepresentationIsOneWholeFile() async throws {
        try await withHarness { harness in
            let origin = harness.origin
            origin.serve("/sb/audio-64k.mp4", .generated(size: 40_000, contentType: "audio/mp4"))
            origin.serve("/sb/ondemand.mpd", .text("""
                <?xml version="1.0"?>
                <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT30S"
                     profiles="urn:mpeg:dash:profile:isoff-on-demand:2011">
                  <Period>
                    <AdaptationSet mimeType="audio/mp4" lang="en">
                      <Representation id="aac" bandwidth="64000" codecs="mp4a.40.2">
                        <BaseURL>audio-64k.mp4</BaseURL>
                        <SegmentBase indexRangeExact="true" indexRange="700-999"><Initialization range="0-699"/></SegmentBase>
                      </Representation>
                    </AdaptationSet>
                  </Period>
                </MPD>
                """, contentType: "application/dash+xml"))
            let info = try await harness.download(origin.url("/sb/ondemand.mpd").absoluteString)
            #expect(info.state == .completed, "\(String(describing: info.error))")
            #expect(filesUnder(harness.downloadRoot) == ["ondemand/aac.m4a"])
            #expect(sameBytes(harness.root.file("downloads/ondemand/aac.m4a"), harness.bytes("/sb/audio-64k.mp4", 0..<40_000)))
        }
    }

    @Test func twoPeriodsAreConcatenatedInOrder() async throws {
        try await withHarness { harness in
            let origin = harness.origin
            let parts = [
                ("/mp/p1/v/init.mp4", 900), ("/mp/p1/v/1.m4s", 20_000), ("/mp/p1/v/2.m4s", 21_000),
                ("/mp/p2/v/init.mp4", 950), ("/mp/p2/v/1.m4s", 19_000),
            ]
            for (path, size) in parts { origin.serve(path, .generated(size: Int64(size), contentType: "video/mp4")) }
            origin.serve("/mp/two.mpd", .text("""
                <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT6S">
                  <Period id="main" duration="PT4S">
                    <BaseURL>p1/</BaseURL>
                    <AdaptationSet contentType="video" mimeType="video/mp4">
                      <SegmentTemplate duration="2" media="$RepresentationID$/$Number$.m4s" initialization="$RepresentationID$/init.mp4"/>
                      <Representation id="v" bandwidth="1000000"/>
                    </AdaptationSet>
                  </Period>
                  <Period id="credits">
                    <BaseURL>p2/</BaseURL>
                    <AdaptationSet contentType="video" mimeType="video/mp4">
                      <SegmentTemplate duration="2" media="$RepresentationID$/$Number$.m4s" initialization="$RepresentationID$/init.mp4"/>
                      <Representation id="v" bandwidth="1000000"/>
                    </AdaptationSet>
                  </Period>
                </MPD>
                """, contentType: "application/dash+xml"))
            let info = try await harness.download(origin.url("/mp/two.mpd").absoluteString)
            #expect(info.state == .completed, "\(String(describing: info.error))")
            let expected = parts.flatMap { harness.bytes($0.0, 0..<Int64($0.1)) }
            #expect(sameBytes(harness.root.file("downloads/two/v.mp4"), expected))
        }
    }

    @Test func relativeBaseURLsFollowARedirectOfTheMPD() async throws {
        try await withHarness { harness in
            let origin = harness.origin
            let fixture = DASHFixture.install(on: origin, directory: "/edge/7/dash", name: "movie")
            origin.inject(.redirect(to: fixture.mpdPath), at: "/short/movie.mpd")
            let info = try await harness.download(origin.url("/short/movie.mpd").absoluteString)
            #expect(info.state == .completed, "\(String(describing: info.error))")
            #expect(await fixture.verify(downloadRoot: harness.downloadRoot) == [])
            #expect(origin.requestCount(for: "/short/movie.mpd") >= 1)
            #expect(origin.requests.filter { $0.path.hasPrefix("/short/") && $0.path != "/short/movie.mpd" }.isEmpty)
        }
    }

    /// YouTube writes the namespace as `urn:mpeg:DASH:schema:MPD:2011`; players read it, so
    /// does the plugin (the DASH fixture's MPD, re-served with that spelling).
    @Test func theLegacyUpperCaseNamespaceIsReadToo() async throws {
        try await withHarness { harness in
            let origin = harness.origin
            let fixture = DASHFixture.install(on: origin, directory: "/legacy/dash", name: "old")
            let legacy = fixture.mpd.replacingOccurrences(of: "urn:mpeg:dash:schema:mpd:2011", with: "urn:mpeg:DASH:schema:MPD:2011")
            #expect(legacy != fixture.mpd)
            origin.serve(fixture.mpdPath, .text(legacy))
            let info = try await harness.download(origin.url(fixture.mpdPath).absoluteString)
            #expect(info.state == .completed, "\(String(describing: info.error))")
            #expect(await fixture.verify(downloadRoot: harness.downloadRoot) == [])
        }
    }

    @Test func aDRMProtectedStreamFailsAsUnsupported() async throws {
        try await withHarness { harness in
            let origin = harness.origin
            origin.serve("/drm/locked.mpd", .text(mpd("""
                <AdaptationSet mimeType="video/mp4">
                  <ContentProtection schemeIdUri="urn:uuid:edef8ba9-79d6-4ace-a3c8-27dcd51d21ed"/>
                  <SegmentTemplate duration="2" media="$Number$.m4s"/>
                  <Representation id="v" bandwidth="1"/>
                </AdaptationSet>
                """), contentType: "application/dash+xml"))
            let info = try await harness.download(origin.url("/drm/locked.mpd").absoluteString)
            #expect(info.state != .completed)
            #expect(info.error?.code == .unsupportedContent, "\(String(describing: info.error))")
            #expect(info.error?.message.contains("Widevine") == true)
        }
    }
}
