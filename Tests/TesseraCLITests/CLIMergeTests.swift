import Foundation
import Testing
import Tessera
import TesseraTesting

/// `tessera get` of an HLS stream with a separate audio track, whose segments ffmpeg made:
/// one merged, playable file at the end (or the two tracks with `--no-merge`, or without ffmpeg).
@Suite(.enabled(if: MediaTools.available, "needs ffmpeg and ffprobe (apt-get install ffmpeg; make test installs it)"), .timeLimit(.minutes(3)))
struct CLIMergeTests {
    /// Makes two seconds of video and of audio with ffmpeg, each an HLS media playlist of
    /// one-second MPEG-TS segments under `directory/media/<track>`, and serves each track's files
    /// on `origin` under every folder `folders` gives it (`/show/<folder>/<file>`).
    static func serveTracks(on origin: LoopbackOrigin, directory: String, folders: [String: [String]]) async throws {
        let media = directory + "/media"
        for track in ["video", "audio"] {
            try FileManager.default.createDirectory(atPath: media + "/" + track, withIntermediateDirectories: true)
        }
        let hls = { (track: String) in
            ["-f", "hls", "-hls_time", "1", "-hls_playlist_type", "vod", "-hls_segment_filename", "\(media)/\(track)/s%d.ts"]
        }
        try await MediaTools.makeVideo(at: media + "/video/index.m3u8", extraArguments: hls("video"))
        try await MediaTools.makeAudio(at: media + "/audio/index.m3u8", extraArguments: hls("audio"))
        for (track, served) in folders {
            for name in try FileManager.default.contentsOfDirectory(atPath: media + "/" + track) {
                let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: "\(media)/\(track)/\(name)")))
                let type = name.hasSuffix(".m3u8") ? "application/vnd.apple.mpegurl" : "video/mp2t"
                for folder in served { origin.serve("/show/\(folder)/\(name)", .bytes(bytes, contentType: type)) }
            }
        }
    }

    static let videoCodec = MediaTools.hasLibx264 ? "avc1.64000d" : "mp4v.20.9"

    /// Serves `/show/master.m3u8`: a video-only variant and an English audio rendition, MPEG-TS
    /// segments of one second, two seconds in all.
    static func serveShow(on origin: LoopbackOrigin, directory: String) async throws -> String {
        try await serveTracks(on: origin, directory: directory, folders: ["video": ["video"], "audio": ["audio"]])
        let master = """
            #EXTM3U
            #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aud",NAME="English",LANGUAGE="en",DEFAULT=YES,AUTOSELECT=YES,URI="audio/index.m3u8"
            #EXT-X-STREAM-INF:BANDWIDTH=300000,RESOLUTION=160x120,CODECS="\(videoCodec),mp4a.40.2",AUDIO="aud"
            video/index.m3u8

            """
        origin.serve("/show/master.m3u8", .text(master, contentType: "application/vnd.apple.mpegurl"))
        return origin.url("/show/master.m3u8").absoluteString
    }

    /// Serves `/show/master.m3u8` as ffmpeg's HLS muxer writes a master with several streams:
    /// three video variants (the same two seconds under three resolutions) and two audio
    /// renditions named `audio_3` and `audio_4`, in English and German.
    static func serveRichShow(on origin: LoopbackOrigin, directory: String) async throws -> String {
        try await serveTracks(
            on: origin, directory: directory, folders: ["video": ["stream_0", "stream_1", "stream_2"], "audio": ["stream_3", "stream_4"]])
        var master = """
            #EXTM3U
            #EXT-X-VERSION:3
            #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="group_aud",NAME="audio_3",DEFAULT=YES,LANGUAGE="en",URI="stream_3/index.m3u8"
            #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="group_aud",NAME="audio_4",DEFAULT=NO,LANGUAGE="de",URI="stream_4/index.m3u8"

            """
        for (index, height) in [120, 240, 360].enumerated() {
            master += """
                #EXT-X-STREAM-INF:BANDWIDTH=\(100_000 * (index + 1)),RESOLUTION=\(height * 4 / 3)x\(height),CODECS="\(videoCodec),mp4a.40.2",AUDIO="group_aud"
                stream_\(index)/index.m3u8

                """
        }
        origin.serve("/show/master.m3u8", .text(master, contentType: "application/vnd.apple.mpegurl"))
        return origin.url("/show/master.m3u8").absoluteString
    }

    /// A `PATH` whose ffmpeg is a shell script with `body` (then the system's directories).
    static func fakeFFmpeg(in directory: String, _ body: String) throws -> String {
        let tools = directory + "/fake-tools"
        try FileManager.default.createDirectory(atPath: tools, withIntermediateDirectories: true)
        try "#!/bin/sh\n\(body)\n".write(toFile: tools + "/ffmpeg", atomically: true, encoding: .utf8)
        chmod(tools + "/ffmpeg", 0o755)
        return tools + ":/usr/bin:/bin"
    }

    /// ffprobe's streams of a file: type, language and name (MP4 keeps a track's name as its
    /// handler name, Matroska as its title).
    static func tracks(of path: String) async throws -> [(type: String, language: String?, name: String?)] {
        let data = try await MediaTools.run(try #require(MediaTools.ffprobe), [
            "-v", "error", "-show_entries", "stream=codec_type:stream_tags=language,title,handler_name", "-of", "json", path,
        ])
        let object = try JSONSerialization.jsonObject(with: data) as? [String: Any] ?? [:]
        return (object["streams"] as? [[String: Any]] ?? []).map { stream in
            let tags = stream["tags"] as? [String: String] ?? [:]
            return (stream["codec_type"] as? String ?? "", tags["language"], tags["title"] ?? tags["handler_name"])
        }
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

    /// `-f all`, as yt-dlp's: every variant and rendition a file of its own, nothing merged;
    /// the audio renditions named after their language (ffmpeg names them `audio_3`, `audio_4`).
    @Test func formatAllKeepsEveryFormatAsItsOwnFile() async throws {
        var cli = CLI()
        cli.merges = true
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let url = try await Self.serveRichShow(on: origin, directory: cli.directory)
            let result = try await cli.run(["get", "--json", "-f", "all", url])
            #expect(result.status == 0, "\(result.errors)")
            let files = Self.files(under: cli.downloads)
            #expect(files.count == 5, "\(files)")
            let names = files.map { ($0 as NSString).lastPathComponent }
            #expect(Set(names) == ["120p.ts", "240p.ts", "360p.ts", "en.ts", "de.ts"], "\(names)")
            let task = try #require((result.jsonLines.last?["tasks"] as? [[String: Any]])?.first)
            #expect(task["merged"] == nil, "\(task)")
            #expect(!result.errors.contains("merge"), "\(result.errors)")
        }
    }

    /// The default (`best`): the best video and its default audio in one file, whose audio track
    /// keeps its language and name.
    @Test func theMergedFileKeepsTheTracksLanguageAndName() async throws {
        var cli = CLI()
        cli.merges = true
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let url = try await Self.serveRichShow(on: origin, directory: cli.directory)
            let result = try await cli.run(["get", "--json", url])
            #expect(result.status == 0, "\(result.errors)")
            let files = Self.files(under: cli.downloads)
            #expect(files.count == 1, "\(files)")
            let tracks = try await Self.tracks(of: cli.downloads + "/" + (files.first ?? ""))
            #expect(tracks.map(\.type) == ["video", "audio"], "\(tracks)")
            #expect(tracks.last?.language == "eng", "\(tracks)")
            #expect(tracks.last?.name == "audio_3", "\(tracks)")
        }
    }

    /// Two audio tracks in one file only when asked (`--audio-multistreams`, as yt-dlp's), each
    /// with its language; without it the video takes the first, and the other stays a file.
    @Test func severalAudioTracksGoInOneFileOnlyWhenAsked() async throws {
        var cli = CLI()
        cli.merges = true
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let url = try await Self.serveRichShow(on: origin, directory: cli.directory)
            let many = try await cli.run(["get", "-f", "360p+audio_3+audio_4", "--audio-multistreams", url])
            #expect(many.status == 0, "\(many.errors)")
            let merged = Self.files(under: cli.downloads)
            #expect(merged.count == 1, "\(merged)")
            let tracks = try await Self.tracks(of: cli.downloads + "/" + (merged.first ?? ""))
            #expect(tracks.map(\.type) == ["video", "audio", "audio"], "\(tracks)")
            #expect(tracks.map(\.language) == [nil, "eng", "ger"] || tracks.map(\.language) == ["und", "eng", "ger"], "\(tracks)")
            #expect(tracks.map(\.name).suffix(2) == ["audio_3", "audio_4"], "\(tracks)")

            var other = CLI()
            other.merges = true
            defer { other.cleanUp() }
            let one = try await other.run(["get", "-f", "360p+audio_3+audio_4", url])
            #expect(one.status == 0, "\(one.errors)")
            let files = Self.files(under: other.downloads)
            #expect(files.count == 2, "\(files)")
            #expect(files.contains { $0.hasSuffix("/de.ts") }, "the second audio stays a file of its own: \(files)")
        }
    }

    /// A merge ffmpeg cannot do keeps the tracks and names the option that skips merging.
    @Test func aFailedMergeSaysWhichOptionSkipsIt() async throws {
        var cli = CLI()
        cli.merges = true
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let url = try await Self.serveShow(on: origin, directory: cli.directory)
            // An ffmpeg that fails as a real one does on tracks it cannot read.
            let path = try Self.fakeFFmpeg(in: cli.directory, "echo 'Invalid data found when processing input' >&2\nexit 1")
            let result = try await cli.run(["get", url], environment: ["PATH": path])
            #expect(result.status == 1, "\(result.errors)")
            #expect(result.errors.contains("Invalid data found"), "\(result.errors)")
            #expect(result.errors.contains("--no-merge"), "\(result.errors)")
            #expect(Self.files(under: cli.downloads).count == 2, "the tracks are kept")
        }
    }

    /// Ctrl-C at a terminal goes to the whole foreground process group: ffmpeg, in a group of
    /// its own, does not get it; tessera stops it and reports an interrupted merge (exit 130,
    /// the tracks kept), not "ffmpeg failed (255)". The same command then merges.
    @Test func ctrlCToTheProcessGroupWhileMergingIsAnInterruption() async throws {
        var cli = CLI()
        cli.merges = true
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let url = try await Self.serveShow(on: origin, directory: cli.directory)
            // A slow ffmpeg that, like the real one, exits 255 on SIGINT or SIGTERM.
            let marker = cli.directory + "/ffmpeg-started"
            let path = try Self.fakeFFmpeg(in: cli.directory, "trap 'exit 255' INT TERM\ntouch '\(marker)'\nwhile :; do sleep 0.05; done")
            let (process, out, err) = try cli.start(["get", "--json", url], environment: ["PATH": path], newProcessGroup: true)
            #expect(await eventually(within: .seconds(60)) { FileManager.default.fileExists(atPath: marker) }, "the merge started")
            // The terminal's Ctrl-C: SIGINT to the foreground process group (tessera's).
            #expect(kill(-process.pid, SIGINT) == 0)
            #expect(await process.exited(within: .seconds(20)))
            process.send(SIGKILL)
            let status = await process.ended()
            let errors = fileText(err)
            let output = fileText(out)
            #expect(status == .exited(130), "\(errors)")
            #expect(errors.contains("interrupted"), "\(errors)")
            #expect(!errors.contains("ffmpeg failed"), "\(errors)")
            let summary = output.split(separator: "\n").last.flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            #expect(summary?["interrupted"] as? Bool == true, "\(output.suffix(500))")
            #expect(Self.files(under: cli.downloads).count == 2, "the tracks are kept")

            let again = try await cli.run(["get", url])
            #expect(again.status == 0, "\(again.errors)")
            #expect(Self.files(under: cli.downloads).count == 1, "merged")
        }
    }

    /// `tessera serve` merges as `get` does: one playable file for an HLS master with separate
    /// audio; with `--no-merge`, the tracks.
    @Test func serveMergesAsGetDoes() async throws {
        var cli = CLI()
        cli.merges = true
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let url = try await Self.serveShow(on: origin, directory: cli.directory)
            let serve = try await ServeProcess.start(cli)
            _ = try await serve.call("aria2.addUri", [[url]])
            // Completed, and its one file the merged one.
            let merged = await eventually(within: .seconds(60)) {
                guard let task = try? await serve.tasks().first, task["state"] as? String == "completed",
                    let files = task["files"] as? [String], files.count == 1
                else { return false }
                return files[0].hasSuffix(".mp4") || files[0].hasSuffix(".mkv")
            }
            #expect(merged, "\(Self.files(under: cli.downloads))")
            #expect(Self.files(under: cli.downloads).count == 1, "\(Self.files(under: cli.downloads))")
            let file = cli.downloads + "/" + (Self.files(under: cli.downloads).first ?? "")
            #expect(try await MediaTools.probe(file).streams.sorted() == ["audio", "video"])
            // The daemon reports the merged file as the task's file.
            let task = try #require(try await serve.tasks().first)
            #expect((task["files"] as? [String]) == [file], "\(task)")
            #expect(await serve.stop() == 0)

            let other = CLI()
            defer { other.cleanUp() }
            let kept = try await ServeProcess.start(other, ["--no-merge"])
            _ = try await kept.call("aria2.addUri", [[url]])
            let completed = await eventually(within: .seconds(60)) { (try? await kept.tasks())?.first?["state"] as? String == "completed" }
            #expect(completed)
            #expect(Self.files(under: other.downloads).count == 2, "\(Self.files(under: other.downloads))")
            #expect(await kept.stop() == 0)
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
