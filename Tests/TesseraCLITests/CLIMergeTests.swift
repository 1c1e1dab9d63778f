import Foundation
import Testing
import Tessera
import TesseraTesting

/// `tessera get` of an HLS stream with a separate audio track, whose segments ffmpeg made:
/// one merged, playable file at the end (or the two tracks with `--no-merge`, or without ffmpeg).
@Suite(.enabled(if: MediaTools.available, "needs ffmpeg and ffprobe (apt-get install ffmpeg; make test installs it)"), .timeLimit(.minutes(3)))
struct CLIMergeTests {
    /// Serves `/show/master.m3u8`: a video-only variant and an English audio rendition, MPEG-TS
    /// segments of one second, two seconds in all.
    static func serveShow(on origin: LoopbackOrigin, directory: String) async throws -> String {
        let media = directory + "/media"
        for track in ["video", "audio"] {
            try FileManager.default.createDirectory(atPath: media + "/" + track, withIntermediateDirectories: true)
        }
        let hls = { (track: String) in
            ["-f", "hls", "-hls_time", "1", "-hls_playlist_type", "vod", "-hls_segment_filename", "\(media)/\(track)/s%d.ts"]
        }
        try await MediaTools.makeVideo(at: media + "/video/index.m3u8", extraArguments: hls("video"))
        try await MediaTools.makeAudio(at: media + "/audio/index.m3u8", extraArguments: hls("audio"))
        let videoCodec = MediaTools.hasLibx264 ? "avc1.64000d" : "mp4v.20.9"
        let master = """
            #EXTM3U
            #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aud",NAME="English",LANGUAGE="en",DEFAULT=YES,AUTOSELECT=YES,URI="audio/index.m3u8"
            #EXT-X-STREAM-INF:BANDWIDTH=300000,RESOLUTION=160x120,CODECS="\(videoCodec),mp4a.40.2",AUDIO="aud"
            video/index.m3u8

            """
        origin.serve("/show/master.m3u8", .text(master, contentType: "application/vnd.apple.mpegurl"))
        for track in ["video", "audio"] {
            for name in try FileManager.default.contentsOfDirectory(atPath: media + "/" + track) {
                let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: "\(media)/\(track)/\(name)")))
                let type = name.hasSuffix(".m3u8") ? "application/vnd.apple.mpegurl" : "video/mp2t"
                origin.serve("/show/\(track)/\(name)", .bytes(bytes, contentType: type))
            }
        }
        return origin.url("/show/master.m3u8").absoluteString
    }

    /// The files under `root`, relative, without Tessera's work directory.
    static func files(under root: String) -> [String] {
        let enumerator = FileManager.default.enumerator(atPath: root)
        var files: [String] = []
        while let name = enumerator?.nextObject() as? String {
            var isDirectory: ObjCBool = false
            if !name.hasPrefix(".tessera"), FileManager.default.fileExists(atPath: root + "/" + name, isDirectory: &isDirectory), !isDirectory.boolValue {
                files.append(name)
            }
        }
        return files.sorted()
    }

    @Test func getMergesTheVideoAndItsAudioIntoOneFile() async throws {
        var cli = CLI()
        cli.merges = true
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let url = try await Self.serveShow(on: origin, directory: cli.directory)
            let result = try await cli.run(["get", "--json", url])
            #expect(result.status == 0, "\(result.errors)")
            let summary = try #require(result.jsonLines.last)
            let task = try #require((summary["tasks"] as? [[String: Any]])?.first)
            let merged = try #require(task["merged"] as? [String: Any], "\(result.output)")
            let path = try #require(merged["path"] as? String)
            #expect((merged["size"] as? Int ?? 0) > 0)
            #expect(path.hasPrefix(cli.downloads + "/"))
            let expected = MediaTools.hasLibx264 ? ".mp4" : ".mkv"
            #expect(path.hasSuffix(expected), "\(path)")
            #expect(Self.files(under: cli.downloads) == [String(path.dropFirst(cli.downloads.count + 1))], "only the merged file is left")
            let probe = try await MediaTools.probe(path)
            #expect(probe.streams.sorted() == ["audio", "video"], "\(probe)")
            #expect(abs(probe.duration - 2) < 0.6, "\(probe)")
            // The summary with `merged` follows the schema.
            let schema = SchemaValidator(root: try JSONValue.parse(String(contentsOfFile: repositoryRoot + "/docs/events.schema.json", encoding: .utf8)))
            let line = try #require(result.output.split(separator: "\n").last.map(String.init))
            #expect(schema.problems(try JSONValue.parse(line)) == [])
        }
    }

    @Test func theSameCommandAgainFindsTheMergedFileAndFetchesNothing() async throws {
        var cli = CLI()
        cli.merges = true
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let url = try await Self.serveShow(on: origin, directory: cli.directory)
            let first = try await cli.run(["get", url])
            #expect(first.status == 0, "\(first.errors)")
            let files = Self.files(under: cli.downloads)
            #expect(files.count == 1, "\(files)")
            let requests = origin.totalRequests
            // Again: the merged file stands for the tracks; nothing is fetched or merged again.
            let second = try await cli.run(["get", "--json", url])
            #expect(second.status == 0, "\(second.errors)")
            #expect(origin.totalRequests - requests <= 1, "only the playlist may be asked for again")
            #expect(Self.files(under: cli.downloads) == files)
            let task = try #require((second.jsonLines.last?["tasks"] as? [[String: Any]])?.first)
            #expect(task["state"] as? String == "completed")
            // The merged file deleted by hand: the tracks are fetched and merged again.
            try FileManager.default.removeItem(atPath: cli.downloads + "/" + files[0])
            let third = try await cli.run(["get", url])
            #expect(third.status == 0, "\(third.errors)")
            #expect(Self.files(under: cli.downloads) == files, "merged again under the same name")
            #expect(origin.totalRequests > requests + 2)
        }
    }

    /// SIGKILL in the merge phase (the crash matrix's last phase): while ffmpeg's file is at its
    /// temporary name, and once it is in place with the tracks still there. The same command
    /// then ends with one merged file, fetches no segment again, and leaves no temporary file.
    @Test(arguments: ["merge-written", "merged"]) func aKillWhileMergingLeavesOneFileAndFetchesNothingAgain(point: String) async throws {
        var cli = CLI()
        cli.merges = true
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let url = try await Self.serveShow(on: origin, directory: cli.directory)
            let killed = try await cli.run(["get", url], environment: ["TESSERA_CRASH_AT": point])
            #expect(killed.status == 128 + SIGKILL, "the crash point \(point) was not reached: \(killed.errors)")
            let tracks = Self.files(under: cli.downloads)
            // The two tracks, and ffmpeg's temporary file or the merged file.
            #expect(tracks.count == 3, "\(tracks)")
            #expect(tracks.contains { ($0 as NSString).lastPathComponent.hasPrefix(".") } == (point == "merge-written"), "\(tracks)")
            let segmentRequests = origin.requests.filter { $0.path.hasSuffix(".ts") }.count
            let again = try await cli.run(["get", "--json", url])
            #expect(again.status == 0, "\(again.errors)")
            #expect(origin.requests.filter { $0.path.hasSuffix(".ts") }.count == segmentRequests, "no segment fetched again")
            let files = Self.files(under: cli.downloads)
            #expect(files.count == 1 && !files[0].contains(".1."), "one merged file, not a numbered copy: \(files)")
            let hidden = (FileManager.default.enumerator(atPath: cli.downloads)?.allObjects as? [String] ?? [])
                .filter { !$0.hasPrefix(".tessera") && ($0 as NSString).lastPathComponent.hasPrefix(".") }
            #expect(hidden.isEmpty, "no temporary file left: \(hidden)")
            let path = cli.downloads + "/" + (files.first ?? "")
            #expect(try await MediaTools.probe(path).streams.sorted() == ["audio", "video"])
            // A third run: nothing to do.
            let third = try await cli.run(["get", url])
            #expect(third.status == 0 && Self.files(under: cli.downloads) == files)
        }
    }

    @Test func aTemplateNamedVideoIsReplacedByTheMergedFile() async throws {
        var cli = CLI()
        cli.merges = true
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let url = try await Self.serveShow(on: origin, directory: cli.directory)
            // As yt-dlp users write it: the video is "<title>.mp4", and so is the merged file.
            let result = try await cli.run(["get", "-o", "%(title)s.%(ext)s", url])
            #expect(result.status == 0, "\(result.errors)")
            let files = Self.files(under: cli.downloads)
            #expect(files.count == 1 && !files[0].contains(".1."), "\(files) \(result.output)")
            let probe = try await MediaTools.probe(cli.downloads + "/" + files[0])
            #expect(probe.streams.sorted() == ["audio", "video"], "\(probe)")
        }
    }

    @Test func theTextSummaryNamesTheMergedFile() async throws {
        var cli = CLI()
        cli.merges = true
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let url = try await Self.serveShow(on: origin, directory: cli.directory)
            let result = try await cli.run(["get", "--merge-output-format", "mkv", url])
            #expect(result.status == 0, "\(result.errors)")
            let files = Self.files(under: cli.downloads)
            #expect(files.count == 1 && files[0].hasSuffix(".mkv"), "\(files)")
            #expect(result.output.contains("(merged)"), "\(result.output)")
            #expect(result.output.contains(files[0]))
        }
    }

    @Test func noMergeKeepsTheTwoTracks() async throws {
        let cli = CLI()  // the harness passes --no-merge
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let url = try await Self.serveShow(on: origin, directory: cli.directory)
            let result = try await cli.run(["get", "--json", url])
            #expect(result.status == 0, "\(result.errors)")
            let files = Self.files(under: cli.downloads)
            #expect(files.count == 2, "\(files)")
            let task = try #require((result.jsonLines.last?["tasks"] as? [[String: Any]])?.first)
            #expect(task["merged"] == nil)
        }
    }

    @Test func withoutFFmpegOneWarningSaysHowToInstallIt() async throws {
        var cli = CLI()
        cli.merges = true
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let url = try await Self.serveShow(on: origin, directory: cli.directory)
            let result = try await cli.run(["get", url], environment: ["PATH": cli.directory + "/no-tools"])
            #expect(result.status == 0, "\(result.errors)")
            let warnings = result.errors.split(separator: "\n")
            #expect(warnings.count == 1, "\(result.errors)")
            #expect(result.errors.contains("apt-get install ffmpeg"))
            #expect(Self.files(under: cli.downloads).count == 2)
            // --quiet stays quiet.
            let quiet = try await cli.run(["get", "-q", url], environment: ["PATH": cli.directory + "/no-tools"])
            #expect(quiet.status == 0)
            #expect(quiet.output.isEmpty && quiet.errors.isEmpty, "\(quiet.output) \(quiet.errors)")
        }
    }

    @Test func playurlPartsAreJoinedInTheirOrder() async throws {
        var cli = CLI()
        cli.merges = true
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            var durl: [String] = []
            for order in 1...3 {
                let path = cli.directory + "/part\(order).flv"
                try await MediaTools.makeMuxed(at: path, seconds: 1)
                let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
                origin.serve("/parts/\(order).flv", .bytes(bytes, contentType: "video/x-flv"))
                durl.append(#"{"order":\#(order),"size":\#(bytes.count),"url":"\#(origin.url("/parts/\(order).flv").absoluteString)"}"#)
            }
            // Listed out of order: the order numbers decide.
            let answer = #"{"code":0,"message":"0","data":{"quality":80,"format":"flv","durl":[\#(durl.reversed().joined(separator: ","))]}}"#
            origin.serve("/playurl/1001", .text(answer, contentType: "application/json"))
            let api = origin.baseURL.absoluteString + "/playurl/{cid}?qn={quality}"
            let result = try await cli.run(["get", "--json", "--plugin-arg", "playurl:api=\(api)", "playurl:170001/1001"])
            #expect(result.status == 0, "\(result.errors)")
            let task = try #require((result.jsonLines.last?["tasks"] as? [[String: Any]])?.first)
            let merged = try #require(task["merged"] as? [String: Any], "\(result.output)")
            let path = try #require(merged["path"] as? String)
            #expect(path.hasPrefix(cli.downloads + "/1001/") && path.hasSuffix(".flv"), "\(path)")
            #expect(Self.files(under: cli.downloads) == [String(path.dropFirst(cli.downloads.count + 1))])
            let probe = try await MediaTools.probe(path)
            #expect(probe.streams.sorted() == ["audio", "video"], "\(probe)")
            #expect(abs(probe.duration - 3) < 0.6, "\(probe)")
        }
    }

    @Test func anUnknownOutputFormatIsRefused() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        let result = try await cli.run(["get", "--merge-output-format", "avi", "http://127.0.0.1:9/x.m3u8"])
        #expect(result.status != 0)
        #expect(result.errors.contains("--merge-output-format takes one of mp4, mkv, webm, mov, not \"avi\""), "\(result.errors)")
    }
}
