import Foundation
import HLSEntity
import Tessera
import TesseraTesting
import Testing

@Suite(.timeLimit(.minutes(2))) struct HLSEndToEndTests {
    // MARK: The fixture

    @Test func theDefaultSelectionIsTheDecryptedBestVariantAndItsAudio() async throws {
        try await withHarness { harness in
            let fixture = HLSFixture.install(on: harness.origin)
            let info = try await harness.download(fixture.inputs[0])
            #expect(info.state == .completed, "\(String(describing: info.error))")
            #expect(await fixture.verify(downloadRoot: harness.downloadRoot) == [])
            #expect(filesUnder(harness.downloadRoot) == ["hls-demo/720p.mp4", "hls-demo/English.aac"])
            #expect(info.outputs.map(\.name) == ["hls-demo/720p.mp4", "hls-demo/English.aac"])
            // The map first, then the decrypted segments: byte-identical plaintext.
            let video = try #require(fileBytes(harness.root.file("downloads/hls-demo/720p.mp4")))
            #expect(video == fixture.expectedContents["hls-demo/720p.mp4"])
            // Each key fetched once; the I-frame playlist and unselected segments never.
            for path in fixture.keyPaths { #expect(harness.origin.requestCount(for: path) == 1) }
            #expect(harness.origin.requestCount(for: fixture.iFramePlaylistPath) == 0)
            #expect(harness.origin.requestCount(for: "/hls/fixture/v360/seg0.ts") == 0)
            #expect(harness.origin.requestCount(for: "/hls/fixture/audio/de/a0.aac") == 0)
            // The packed resource was asked for in three ranges, the last after the gap.
            let ranges = harness.origin.requests(for: fixture.packedSegmentPath).compactMap { $0.header("Range") }.sorted()
            #expect(ranges.count == 3)
            #expect(ranges.allSatisfy { $0.hasPrefix("bytes=") })
        }
    }

    @Test func theManifestListsEveryVariantAndRendition() async throws {
        try await withLoopbackOrigin { origin in
            let fixture = HLSFixture.install(on: origin)
            let engine = try CurlEngine(configuration: CurlEngine.Configuration.forTests())
            let manifest = try await HLSEntity(url: fixture.masterURL).resolve(in: ResolveContext(engine: engine))
            #expect(manifest.title == "hls-demo")
            #expect(manifest.sourceURL == fixture.masterURL)
            #expect(manifest.outputs.map(\.name) == ["hls-demo/720p.mp4", "hls-demo/English.aac", "hls-demo/360p.ts", "hls-demo/Deutsch.aac"])
            #expect(manifest.outputs.map(\.isSelected) == [true, true, false, false])
            #expect(manifest.outputs.allSatisfy { $0.assembly == .concatenated })
            #expect(manifest.outputs.map { $0.media?.kind } == [.video, .audio, .video, .audio])
            #expect(manifest.outputs[0].media == MediaInfo(
                kind: .video, identifier: "720p", bandwidth: 2_400_000, width: 1280, height: 720, codecs: "avc1.64001f,mp4a.40.2"))
            #expect(manifest.outputs[1].media == MediaInfo(kind: .audio, identifier: "English", language: "en"))
            #expect(manifest.outputs[3].media?.language == "de")
            // The best variant: the map, then six segments; key 1 with its IV, then key 2 with sequence IVs.
            let segments = manifest.outputs[0].segments
            #expect(segments.count == 7)
            #expect(segments.map { $0.urls[0].path } == [
                "/hls/fixture/v720/init.mp4", "/hls/fixture/v720/seg-100.m4s", "/hls/fixture/v720/seg-101.m4s",
                "/hls/fixture/v720/seg-102.m4s", fixture.packedSegmentPath, fixture.packedSegmentPath, fixture.packedSegmentPath,
            ])
            #expect(segments.map { $0.encryption?.keyURL.path } == [fixture.keyPaths[0], fixture.keyPaths[0], fixture.keyPaths[0]]
                + Array(repeating: fixture.keyPaths[1], count: 4))
            #expect(segments[1].encryption?.iv == segments[0].encryption?.iv)
            #expect(segments[3...].map { $0.encryption?.iv } == (102...105).map { AES128CBC.sequenceIV(UInt64($0)) })
            #expect(segments[4].range?.offset == 0)
            #expect(segments[5].range?.offset == segments[4].range!.length!)
            #expect(segments[6].range!.offset > segments[5].range!.offset + segments[5].range!.length!)
            #expect(manifest.metadata["playlist"] == "master")
            #expect(manifest.metadata["duration"] == "22.500")
            try manifest.validate(includingUnselected: true)
            await engine.shutdown()
        }
    }

    @Test func allDownloadsEveryVariantAndRendition() async throws {
        try await withHarness { harness in
            let fixture = HLSFixture.install(on: harness.origin)
            let info = try await harness.download(fixture.inputs[0], format: "all")
            #expect(info.state == .completed, "\(String(describing: info.error))")
            #expect(HLSFixture.problems(downloadRoot: harness.downloadRoot, expected: fixture.allContents) == [])
            #expect(filesUnder(harness.downloadRoot) == fixture.allContents.keys.sorted())
        }
    }

    @Test func worstAndNamedSelections() async throws {
        try await withHarness { harness in
            let fixture = HLSFixture.install(on: harness.origin)
            let worst = try await harness.download(fixture.inputs[0], format: "worst")
            #expect(worst.state == .completed, "\(String(describing: worst.error))")
            let named = try await harness.download(fixture.inputs[0], format: "Deutsch")
            #expect(named.state == .completed, "\(String(describing: named.error))")
            var expected = fixture.allContents
            expected["hls-demo/720p.mp4"] = nil
            #expect(HLSFixture.problems(downloadRoot: harness.downloadRoot, expected: expected) == [])
            #expect(filesUnder(harness.downloadRoot) == ["hls-demo/360p.ts", "hls-demo/Deutsch.aac", "hls-demo/English.aac"])
            // An unknown name: the task is invalid, and the message lists the names there are.
            let unknown = try await harness.download(fixture.inputs[0], format: "4k")
            #expect(unknown.state == .invalid)
            #expect(unknown.error?.code == .invalidRequest)
            #expect(unknown.error?.message.contains("it has: 360p, 720p, English, Deutsch") == true, "\(String(describing: unknown.error))")
        }
    }

    /// `tessera cache` (startCache) fills the cache with decrypted segments; a download then
    /// needs neither the segments nor the key. (A download does not copy its own segments into
    /// the cache: that would write every byte twice.)
    @Test func aDownloadAfterACacheOnlyTaskComesDecryptedFromTheCache() async throws {
        try await withLoopbackOrigin { origin in
            let fixture = HLSFixture.install(on: origin)
            let cache = TemporaryDirectory("hls-cache")
            defer { cache.cleanUp() }
            for round in 0..<2 {
                let harness = try HLSHarness(origin: origin)
                let manager = DownloadTaskManager(
                    configuration: .init(downloadRoot: harness.downloadRoot), engine: harness.engine,
                    cache: try SegmentCache(directory: cache.path), registry: harness.registry)
                origin.resetCounters()
                let entity = try await harness.entity(fixture.inputs[0])
                let id = round == 0 ? try await manager.startCache(entity).id : try await manager.start(entity).id
                #expect(await manager.waitFor(id, timeout: .seconds(60)) { $0.state.isFinal }?.state == .completed)
                if round == 1 {
                    #expect(await fixture.verify(downloadRoot: harness.downloadRoot) == [])
                    // Only the playlists: no segment, no key.
                    #expect(origin.requestCount(for: fixture.packedSegmentPath) == 0)
                    #expect(origin.requestCount(for: fixture.keyPaths[0]) == 0)
                }
                await manager.shutdown()
                await harness.tearDown()
            }
        }
    }

    // MARK: Byte ranges

    @Test func byteRangesWithAndWithoutOffsets() async throws {
        try await withHarness { harness in
            let origin = harness.origin
            origin.serve("/ranges/all.ts", .generated(size: 100_000))
            origin.serve("/ranges/index.m3u8", .text("""
                #EXTM3U
                #EXT-X-VERSION:4
                #EXT-X-TARGETDURATION:4
                #EXTINF:4,
                #EXT-X-BYTERANGE:18800@0
                all.ts
                #EXTINF:4,
                #EXT-X-BYTERANGE:9400
                all.ts
                #EXTINF:4,
                #EXT-X-BYTERANGE:1880@50000
                all.ts
                #EXTINF:4,
                #EXT-X-BYTERANGE:376
                all.ts
                #EXTINF:4,
                #EXT-X-BYTERANGE:188@10
                all.ts
                #EXT-X-ENDLIST
                """, contentType: "application/vnd.apple.mpegurl"))
            let info = try await harness.download(origin.url("/ranges/index.m3u8").absoluteString)
            #expect(info.state == .completed, "\(String(describing: info.error))")
            let content = origin.content(at: "/ranges/all.ts")
            let expected = content.bytes(0..<28_200) + content.bytes(50_000..<52_256) + content.bytes(10..<198)
            #expect(fileBytes(harness.root.file("downloads/index.ts")) == expected)
            let ranges = Set(origin.requests(for: "/ranges/all.ts").compactMap { $0.header("Range") })
            #expect(ranges == ["bytes=0-18799", "bytes=18800-28199", "bytes=50000-51879", "bytes=51880-52255", "bytes=10-197"])
        }
    }

    // MARK: Keys

    @Test func aWrongKeyFailsTheTaskWithACryptoErrorAndNoOutput() async throws {
        try await withHarness { harness in
            let fixture = HLSFixture.install(on: harness.origin)
            harness.origin.serve(fixture.keyPaths[0], .bytes(Array(repeating: 0x42, count: 16)))
            let info = try await harness.download(fixture.inputs[0])
            #expect(info.state == .failed || info.state == .invalid)
            #expect(info.error?.code == .cryptoFailure, "\(String(describing: info.error))")
            #expect(!FileManager.default.fileExists(atPath: harness.root.file("downloads/hls-demo/720p.mp4")))
            #expect(!filesUnder(harness.downloadRoot).contains("hls-demo/720p.mp4"))
        }
    }

    @Test func aKeyOfTheWrongLengthFailsTheTask() async throws {
        try await withHarness { harness in
            let fixture = HLSFixture.install(on: harness.origin)
            harness.origin.serve(fixture.keyPaths[1], .text("<html>login</html>"))
            let info = try await harness.download(fixture.inputs[0])
            #expect(info.state == .failed || info.state == .invalid)
            #expect(info.error?.code == .cryptoFailure, "\(String(describing: info.error))")
            #expect(info.error?.message.contains("AES-128 needs 16") == true)
            #expect(!FileManager.default.fileExists(atPath: harness.root.file("downloads/hls-demo/720p.mp4")))
        }
    }

    // MARK: Refused content

    @Test func aMediaPlaylistWithoutEndListResolvesToALiveManifest() async throws {
        try await withHarness { harness in
            let fixture = HLSFixture.install(on: harness.origin)
            // The best variant turns live.
            harness.origin.serve(fixture.bestVariantPath, .text("""
                #EXTM3U
                #EXT-X-TARGETDURATION:4
                #EXT-X-MEDIA-SEQUENCE:100
                #EXTINF:4.000,
                seg-100.m4s
                #EXTINF:4.000,
                seg-101.m4s
                """, contentType: HLSFixture.playlistContentType))
            let entity = try #require(try await harness.entity(fixture.inputs[0]) as? HLSEntity)
            let manifest = try await entity.resolve(in: ResolveContext(engine: harness.engine))
            #expect(manifest.live == LiveManifestInfo(kind: "HLS", targetDuration: 4, windowSegments: 2))
            let selected = try #require(manifest.outputs.firstIndex { $0.isSelected && $0.media?.identifier == "720p" })
            #expect(manifest.metadata["hls.mediaPlaylist.\(selected)"] == harness.origin.url(fixture.bestVariantPath).absoluteString)
            // Its source reloads the selected playlists: the window, keyed by media sequence.
            var source = try entity.liveSource(for: manifest, in: ResolveContext(engine: harness.engine))
            let windows = try await source.reload(from: [:], clock: SystemLiveClock(), in: ResolveContext(engine: harness.engine))
            #expect(windows[selected]?.segments.map(\.key.position) == [100, 101])
            #expect(harness.origin.requestCount(for: "/hls/fixture/v720/seg-100.m4s") == 0)
        }
    }

    @Test func sampleAESIsRefused() async throws {
        try await withHarness { harness in
            harness.origin.serve("/drm/seg0.ts", .generated(size: 1_880))
            harness.origin.serve("/drm/index.m3u8", .text("""
                #EXTM3U
                #EXT-X-VERSION:5
                #EXT-X-KEY:METHOD=SAMPLE-AES,URI="skd://key-id",KEYFORMAT="com.apple.streamingkeydelivery",KEYFORMATVERSIONS="1"
                #EXTINF:4,
                seg0.ts
                #EXT-X-ENDLIST
                """))
            let info = try await harness.download(harness.origin.url("/drm/index.m3u8").absoluteString)
            #expect(info.state == .invalid)
            #expect(info.error?.code == .unsupportedContent)
            #expect(info.error?.message.contains("SAMPLE-AES") == true, "\(String(describing: info.error))")
            #expect(harness.origin.requestCount(for: "/drm/seg0.ts") == 0)
        }
    }

    @Test func theSegmentLimitCoversEveryPlaylist() async throws {
        try await withLoopbackOrigin { origin in
            let fixture = HLSFixture.install(on: origin)
            let harness = try HLSHarness(origin: origin) { $0.maxSegments = 12 }
            let info = try await harness.download(fixture.inputs[0])
            // 7 + 3 + 3 + 2 segments in the four playlists.
            #expect(info.state == .invalid)
            #expect(info.error?.code == .manifestTooLarge)
            #expect(info.error?.message.contains("15 segments") == true, "\(String(describing: info.error))")
            await harness.tearDown()
        }
    }

    // MARK: Redirects and direct playlists

    @Test func aRedirectedMasterResolvesRelativeURIsAgainstItsNewPlace() async throws {
        try await withHarness { harness in
            let fixture = HLSFixture.install(on: harness.origin)
            harness.origin.inject(.redirect(to: fixture.masterPath, status: 301), at: "/moved/hls-demo.m3u8")
            let info = try await harness.download(harness.origin.url("/moved/hls-demo.m3u8").absoluteString)
            #expect(info.state == .completed, "\(String(describing: info.error))")
            #expect(await fixture.verify(downloadRoot: harness.downloadRoot) == [])
            #expect(harness.origin.requestCount(for: "/moved/hls-demo.m3u8") == 1)
            #expect(harness.origin.requestCount(for: "/moved/v720/prog.m3u8") == 0)
            #expect(harness.origin.requestCount(for: fixture.bestVariantPath) == 1)
        }
    }

    @Test func aRedirectedMediaPlaylistResolvesItsSegmentsAgainstItsNewPlace() async throws {
        try await withHarness { harness in
            let fixture = HLSFixture.install(on: harness.origin)
            harness.origin.inject(.redirect(to: harness.origin.url(fixture.bestVariantPath).absoluteString), at: "/elsewhere/prog.m3u8")
            let info = try await harness.download(harness.origin.url("/elsewhere/prog.m3u8").absoluteString)
            #expect(info.state == .completed, "\(String(describing: info.error))")
            // A media playlist given directly: one output, named after the playlist.
            #expect(info.outputs.map(\.name) == ["prog.mp4"])
            #expect(fileBytes(harness.root.file("downloads/prog.mp4")) == fixture.expectedContents["hls-demo/720p.mp4"])
        }
    }

    @Test func anUnavailableAlternativeDoesNotStopTheSelection() async throws {
        try await withHarness { harness in
            let fixture = HLSFixture.install(on: harness.origin)
            harness.origin.remove(fixture.worstVariantPath)
            let engine = harness.engine
            let manifest = try await HLSEntity(url: fixture.masterURL).resolve(in: ResolveContext(engine: engine))
            #expect(manifest.outputs.map(\.name) == ["hls-demo/720p.mp4", "hls-demo/English.aac", "hls-demo/Deutsch.aac"])
            #expect(manifest.metadata["skipped.360p"]?.contains("404") == true, "\(manifest.metadata)")
            let info = try await harness.download(fixture.inputs[0])
            #expect(info.state == .completed, "\(String(describing: info.error))")
            #expect(await fixture.verify(downloadRoot: harness.downloadRoot) == [])
            // Selected, it is the task's failure.
            let all = try await harness.download(fixture.inputs[0], format: "all")
            #expect(all.state == .invalid)
            #expect(all.error?.httpStatus == 404)
            #expect(all.error?.message.contains("360p variant") == true, "\(String(describing: all.error))")
        }
    }
}
