import Foundation
import Testing
import Tessera
import TesseraTesting

/// `tessera get` on a live stream of the test origin (real ffmpeg-made one-second segments on the
/// real clock): to its end, `--live-duration`, Ctrl-C, a kill and the next run, a stall, DASH;
/// each time a playable file (merged when the tracks are separate).
@Suite(.enabled(if: MediaTools.available, "needs ffmpeg and ffprobe (apt-get install ffmpeg; make test installs it)"), .timeLimit(.minutes(3)))
struct CLILiveTests {
    /// A live stream on `origin` on the system clock: `preroll` segments out at once.
    static func stream(
        _ media: LiveMedia, on origin: LoopbackOrigin, _ change: (inout LiveStreamFixture.Options) -> Void = { _ in }
    ) -> (LiveStreamFixture, String) {
        var options = LiveStreamFixture.Options()
        options.window = 6
        change(&options)
        let stream = LiveStreamFixture(media, options: options)
        return (stream, stream.install(on: origin).absoluteString)
    }

    /// The segments of `track` the origin was asked for, by index, in order.
    static func requested(_ stream: LiveStreamFixture, _ origin: LoopbackOrigin, track: Int = 0) -> [Int] {
        origin.requests.compactMap { stream.segment(atPath: $0.path) }.filter { $0.track == track }.map(\.index)
    }

    static func summaryTask(_ result: CLI.Result) throws -> [String: Any] {
        try #require((result.jsonLines.last?["tasks"] as? [[String: Any]])?.first, "\(result.output.suffix(2000)) \(result.errors)")
    }

    @Test func aLiveStreamIsRecordedToItsEndAndMergedIntoOneFile() async throws {
        var cli = CLI()
        cli.merges = true
        defer { cli.cleanUp() }
        let media = try await LiveMedia.hls(segments: 10, separateAudio: true)
        try await withLoopbackOrigin { origin in
            let (stream, url) = Self.stream(media, on: origin)
            let result = try await cli.run(["get", "--json", url])
            #expect(result.status == 0, "\(result.errors)")
            let task = try Self.summaryTask(result)
            let live = try #require(task["live"] as? [String: Any])
            #expect(live["ending"] as? String == "streamEnded" && live["recording"] as? Bool == false)
            #expect(live["gaps"] as? Int == 0)
            let merged = try #require(task["merged"] as? [String: Any], "\(task)")
            let path = try #require(merged["path"] as? String)
            let probe = try await MediaTools.probe(path)
            #expect(probe.streams.sorted() == ["audio", "video"], "\(probe)")
            let video = Self.requested(stream, origin, track: 0)
            #expect(video == Array((video.first ?? 0)..<10), "\(video)")
            #expect(abs(probe.duration - Double(video.count)) < 0.6, "\(probe) \(video)")
            #expect(try await MediaTools.decode(path) == video.count * 10)
            // Every line follows the schema; the task said it was recording while it did.
            let schema = SchemaValidator(root: try JSONValue.parse(String(contentsOfFile: repositoryRoot + "/docs/events.schema.json", encoding: .utf8)))
            for line in result.output.split(separator: "\n") {
                #expect(schema.problems(try JSONValue.parse(String(line))) == [], "\(line)")
            }
            #expect(result.jsonLines.contains { ($0["live"] as? [String: Any])?["recording"] as? Bool == true && $0["state"] as? String == "downloading" })
            #expect(result.jsonLines.contains { $0["type"] as? String == "task_progress" && $0["bytesTotal"] == nil })
        }
    }

    @Test func liveDurationAndLiveFromStart() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        let media = try await LiveMedia.hls(segments: 40)
        try await withLoopbackOrigin { origin in
            let (stream, url) = Self.stream(media, on: origin)
            let result = try await cli.run(["get", "--json", "--live-duration", "3", "--live-from-start", url])
            #expect(result.status == 0, "\(result.errors)")
            let task = try Self.summaryTask(result)
            #expect((task["live"] as? [String: Any])?["ending"] as? String == "durationReached")
            #expect(Self.requested(stream, origin) == [0, 1, 2], "from the oldest segment offered, three seconds")
            let path = try #require((task["outputs"] as? [[String: Any]])?.first?["path"] as? String)
            #expect(fileBytes(path) == stream.expectedRecording(track: 0, segments: 0..<3))
            #expect(try await MediaTools.decode(path) == 30)
        }
    }

    @Test func ctrlCEndsTheRecordingWithAPlayableFile() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        let media = try await LiveMedia.hls(segments: 40)
        try await withLoopbackOrigin { origin in
            let (stream, url) = Self.stream(media, on: origin)
            let (process, out, _) = try cli.start(["get", "--json", url])
            // Four segments in the file, as the task's own events say (a fifth may be in flight).
            func recordedSoFar() -> Int {
                let text = fileText(out)
                return text.split(separator: "\n").compactMap { line in
                    ((try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]).flatMap { ($0["live"] as? [String: Any])?["segmentsRecorded"] as? Int }
                }.max() ?? 0
            }
            #expect(await eventually(within: .seconds(30)) { recordedSoFar() >= 4 })
            process.interrupt()
            #expect(await process.exited(within: .seconds(20)), "tessera ends on SIGINT")
            process.terminate()
            #expect(await process.ended() == .exited(0), "ending a recording is not an interruption")
            let lines = ((try? String(contentsOfFile: out, encoding: .utf8)) ?? "").split(separator: "\n")
            let summary = try #require(lines.last.flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] })
            let task = try #require((summary["tasks"] as? [[String: Any]])?.first)
            #expect(task["state"] as? String == "completed" && summary["interrupted"] as? Bool == false)
            #expect((task["live"] as? [String: Any])?["ending"] as? String == "stopped")
            let path = try #require((task["outputs"] as? [[String: Any]])?.first?["path"] as? String)
            let recorded = (task["live"] as? [String: Any])?["segmentsRecorded"] as? Int ?? 0
            let first = Self.requested(stream, origin).first ?? 0
            #expect(recorded >= 4, "\(task["live"] ?? "no live") after \(Self.requested(stream, origin))")
            #expect(fileBytes(path) == stream.expectedRecording(track: 0, segments: first..<(first + recorded)))
            #expect(try await MediaTools.decode(path) == recorded * 10)
        }
    }

    @Test func aKillDuringARecordingLeavesAPlayableFileAndTheNextRunContinuesWithoutDuplicates() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        let media = try await LiveMedia.hls(segments: 20)
        try await withLoopbackOrigin { origin in
            // A window of twelve seconds: the next run starts well within it, however busy the machine.
            let (stream, url) = Self.stream(media, on: origin) { $0.window = 12; $0.preroll = 6 }
            let (process, _, _) = try cli.start(["get", url])
            #expect(await eventually(within: .seconds(30)) { Self.requested(stream, origin).count >= 3 })
            process.send(SIGKILL)
            _ = await process.ended()
            // What is on disk plays: whole segments, as the record claims.
            let part = try #require(filesUnder(cli.downloads).first { $0.hasSuffix(".ts.part") }, "\(filesUnder(cli.downloads))")
            let before = try await MediaTools.decode(cli.downloads + "/" + part)
            #expect(before >= 20 && before % 10 == 0, "\(before) frames")
            // The same command again continues after the last whole segment, to the end.
            let again = try await cli.run(["get", "--json", url])
            #expect(again.status == 0, "\(again.errors)")
            let requested = Self.requested(stream, origin)
            let first = requested.first ?? 0
            // A segment in flight when the kill came is asked for again (it was never whole).
            #expect(Set(requested) == Set(first..<20) && requested.count <= 20 - first + 1, "\(requested)")
            let task = try Self.summaryTask(again)
            #expect((task["live"] as? [String: Any])?["gaps"] as? Int == 0)
            let path = try #require((task["outputs"] as? [[String: Any]])?.first?["path"] as? String)
            #expect(fileBytes(path) == stream.expectedRecording(track: 0, segments: first..<20), "nothing twice, nothing missing")
            #expect(try await MediaTools.decode(path) == (20 - first) * 10)
            #expect(!filesUnder(cli.downloads).contains { $0.hasSuffix(".part") || $0.hasSuffix(".live") })
        }
    }

    @Test func aStalledStreamEndsAfterTheStallTimeout() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        let media = try await LiveMedia.hls(segments: 8)
        try await withLoopbackOrigin { origin in
            let (stream, url) = Self.stream(media, on: origin) { $0.ends = false }
            let started = ContinuousClock.now
            let result = try await cli.run(["get", "--json", "--live-stall-timeout", "3", url])
            #expect(result.status == 0, "\(result.errors)")
            // The last segment is out 2 s after the start; 3 s after that the stall ends it.
            let elapsed = ContinuousClock.now - started
            #expect(elapsed >= .seconds(5) && elapsed < .seconds(30), "\(elapsed)")
            let task = try Self.summaryTask(result)
            #expect((task["live"] as? [String: Any])?["ending"] as? String == "stalled")
            let path = try #require((task["outputs"] as? [[String: Any]])?.first?["path"] as? String)
            let requested = Self.requested(stream, origin)
            #expect(fileBytes(path) == stream.expectedRecording(track: 0, segments: requested))
            #expect(try await MediaTools.decode(path) == requested.count * 10)
        }
    }

    @Test func aLiveDASHStreamIsRecordedAndMerged() async throws {
        var cli = CLI()
        cli.merges = true
        defer { cli.cleanUp() }
        let media = try await LiveMedia.dash(segments: 10)
        try await withLoopbackOrigin { origin in
            let (stream, url) = Self.stream(media, on: origin) { $0.format = .dashNumber }
            let result = try await cli.run(["get", "--json", url])
            #expect(result.status == 0, "\(result.errors)")
            let task = try Self.summaryTask(result)
            let path = try #require((task["merged"] as? [String: Any])?["path"] as? String, "\(task)")
            #expect(try await MediaTools.probe(path).streams.sorted() == ["audio", "video"])
            let video = Self.requested(stream, origin, track: 0), audio = Self.requested(stream, origin, track: 1)
            #expect(video == audio && video == Array((video.first ?? 0)..<10), "\(video) \(audio)")
            #expect(try await MediaTools.decode(path) == video.count * 10)
            // Nothing asked for past the end.
            #expect(!origin.requests.contains { $0.path.hasSuffix("seg-11.m4s") })
        }
    }
}

/// The bytes of the file at `path` (empty when there is none).
private func fileBytes(_ path: String) -> [UInt8] {
    FileManager.default.contents(atPath: path).map { [UInt8]($0) } ?? []
}
