import Foundation
import Testing
@testable import Tessera
import TesseraTesting

/// The merge decision as a value: which files, which container, which ffmpeg arguments. No
/// ffmpeg runs here.
@Suite struct MediaMergerPlanTests {
    static let video = MediaInfo(kind: .video, identifier: "v720", width: 1280, height: 720, codecs: "avc1.64001f")
    static let audio = MediaInfo(kind: .audio, identifier: "a128", codecs: "mp4a.40.2")

    @Test func aVideoAndItsAudioAreMuxedIntoMP4() throws {
        let plan = try #require(MediaMerger().plan(
            for: [MergeInput(path: "/d/stream/v720.mp4", media: Self.video), MergeInput(path: "/d/stream/a128.m4a", media: Self.audio)],
            title: "My show"))
        #expect(plan.method == .mux)
        #expect(plan.inputs == ["/d/stream/v720.mp4", "/d/stream/a128.m4a"])
        #expect(plan.output == "/d/stream/My show.mp4")
        #expect(plan.muxer == "mp4")
        #expect(plan.ffmpegArguments == [
            "-nostdin", "-hide_banner", "-loglevel", "error", "-y",
            "-i", "/d/stream/v720.mp4", "-i", "/d/stream/a128.m4a", "-map", "0:v", "-map", "1:a",
            "-metadata:s:v:0", "title=v720", "-metadata:s:v:0", "handler_name=v720",
            "-metadata:s:a:0", "title=a128", "-metadata:s:a:0", "handler_name=a128",
            "-c", "copy", "-f", "mp4", "/d/stream/.My show.mp4.merging",
        ])
        #expect(plan.temporaryOutput.hasPrefix("/d/stream/."))
        #expect(!plan.ffmpegArguments.contains("-c:v") && !plan.ffmpegArguments.contains("libx264"), "never re-encoded")
    }

    @Test(arguments: [
        ("avc1.64001f", "mp4a.40.2", "mp4"), ("hvc1.1.6.L93.B0", "mp4a.40.5", "mp4"), ("avc3.4d401e", "mp4a.40.2", "mp4"),
        ("vp09.00.10.08", "opus", "mkv"), ("avc1.64001f", "ec-3", "mkv"), ("av01.0.05M.08", "mp4a.40.2", "mkv"),
    ])
    func theContainerIsMP4OnlyWhenEveryCodecFitsIt(video: String, audio: String, expected: String) throws {
        let plan = try #require(MediaMerger().plan(
            for: [MergeInput(path: "/d/v.mp4", media: MediaInfo(kind: .video, codecs: video)), MergeInput(path: "/d/a.m4a", media: MediaInfo(kind: .audio, codecs: audio))],
            title: "t"))
        #expect(plan.output == "/d/t.\(expected)")
        #expect(plan.muxer == (expected == "mp4" ? "mp4" : "matroska"))
    }

    @Test func unknownCodecsGiveMatroskaButAVariantsListCountsForItsAudio() throws {
        let unknown = try #require(MediaMerger().plan(
            for: [MergeInput(path: "/d/v.ts", media: MediaInfo(kind: .video)), MergeInput(path: "/d/a.ts", media: MediaInfo(kind: .audio))],
            title: nil))
        #expect(unknown.muxer == "matroska")
        #expect(unknown.output == "/d/d.mkv", "named after the directory without a title")
        // HLS: the variant names both codecs, the audio rendition none.
        let hls = try #require(MediaMerger().plan(
            for: [MergeInput(path: "/d/720p.ts", media: MediaInfo(kind: .video, codecs: "avc1.64001f,mp4a.40.2")), MergeInput(path: "/d/English.ts", media: MediaInfo(kind: .audio))],
            title: "master"))
        #expect(hls.muxer == "mp4")
    }

    @Test(arguments: MergeOutputFormat.allCases)
    func theOutputFormatOverridesTheChoice(format: MergeOutputFormat) throws {
        let plan = try #require(MediaMerger(outputFormat: format).plan(
            for: [MergeInput(path: "/d/v.mp4", media: Self.video), MergeInput(path: "/d/a.m4a", media: Self.audio)], title: "x"))
        #expect(plan.output == "/d/x.\(format.rawValue)")
        #expect(plan.muxer == format.muxer)
        #expect(plan.ffmpegArguments.suffix(3) == ["-f", format.muxer, "/d/.x.\(format.rawValue).merging"])
    }

    @Test func subtitlesAndSeveralAudioTracks() throws {
        let english = MediaInfo(kind: .audio, identifier: "English", codecs: "mp4a.40.2", language: "en")
        let german = MediaInfo(kind: .audio, identifier: "audio_4", codecs: "mp4a.40.2", language: "de-DE")
        let inputs = [
            MergeInput(path: "/d/v.mp4", media: Self.video), MergeInput(path: "/d/en.m4a", media: english),
            MergeInput(path: "/d/en.vtt", media: MediaInfo(kind: .subtitles)), MergeInput(path: "/d/de.m4a", media: german),
        ]
        // As yt-dlp without --audio-multistreams: the video and the first audio; the rest stays.
        let one = try #require(MediaMerger().plan(for: inputs, title: "x"))
        #expect(one.inputs == ["/d/v.mp4", "/d/en.m4a"], "subtitles and a second audio stay files of their own")
        #expect(one.streams == [.video, .audio])
        // Asked for: every audio track, each with its language (ISO 639-2) and name.
        let plan = try #require(MediaMerger(audioMultistreams: true).plan(for: inputs, title: "x"))
        #expect(plan.inputs == ["/d/v.mp4", "/d/en.m4a", "/d/de.m4a"], "subtitles stay a file of their own")
        #expect(plan.streams == [.video, .audio, .audio])
        #expect(plan.tracks == [.init(name: "v720"), .init(language: "eng", name: "English"), .init(language: "ger", name: "audio_4")])
        let arguments = plan.ffmpegArguments
        for (specifier, value) in [
            ("-metadata:s:a:0", "language=eng"), ("-metadata:s:a:0", "title=English"), ("-metadata:s:a:0", "handler_name=English"),
            ("-metadata:s:a:1", "language=ger"), ("-metadata:s:a:1", "title=audio_4"),
        ] {
            #expect(zip(arguments, arguments.dropFirst()).contains { $0 == (specifier, value) }, "\(specifier) \(value)")
        }
        #expect(!arguments.contains("-metadata:s:a:2"))
    }

    /// The same outputs selected as alternatives (`-f all`): nothing to merge, whatever they are.
    @Test func alternativesAreNeverMerged() throws {
        let outputs = [
            DownloadTaskInfo.OutputInfo(name: "s/720p.ts", path: "/d/s/720p.ts", expectedSize: nil, isComplete: true, media: Self.video),
            DownloadTaskInfo.OutputInfo(name: "s/360p.ts", path: "/d/s/360p.ts", expectedSize: nil, isComplete: true, media: Self.video),
            DownloadTaskInfo.OutputInfo(name: "s/en.aac", path: "/d/s/en.aac", expectedSize: nil, isComplete: true, media: Self.audio),
        ]
        var task = DownloadTaskInfo(
            id: DownloadTaskID(entityType: "hls", entityKey: "https://x/s.m3u8", variantKey: "best"), title: "s", groupKey: nil,
            state: .completed, mode: .download, bytesDone: 1, bytesTotal: 1, segmentsDone: 1, segmentsTotal: 1, bytesPerSecond: 0,
            eta: nil, outputs: outputs, error: nil, resolveCount: 1, weight: 0)
        let policy = MergePolicy()
        #expect(policy.plan(for: task)?.inputs == ["/d/s/720p.ts", "/d/s/en.aac"], "one video (the first) with its audio")
        task.outputsAreAlternatives = true
        #expect(policy.plan(for: task) == nil)
        task.outputsAreAlternatives = false
        task.state = .paused
        #expect(policy.plan(for: task) == nil, "only a completed task")
        task.state = .completed
        task.mode = .cacheOnly
        #expect(policy.plan(for: task) == nil, "only a download")
    }

    @Test func languageTagsBecomeTheCodesContainersStore() {
        #expect(LanguageCode.iso639_2("en") == "eng")
        #expect(LanguageCode.iso639_2("de") == "ger")
        #expect(LanguageCode.iso639_2("de-AT") == "ger")
        #expect(LanguageCode.iso639_2("zh-Hans-CN") == "chi")
        #expect(LanguageCode.iso639_2("deu") == "ger", "the bibliographic form")
        #expect(LanguageCode.iso639_2("FRA") == "fre")
        #expect(LanguageCode.iso639_2("spa") == "spa")
        for none in ["", "und", "zxx", "qaa", "x-klingon", "e", "english", "12", "en\u{0}"] {
            #expect(LanguageCode.iso639_2(none) == nil, "\(none)")
        }
    }

    @Test func aTrackWhoseNameIsOnlyItsKindIsNamedByItsLanguage() {
        #expect(MediaInfo.trackFileName(name: "audio_3", language: "en") == "en")
        #expect(MediaInfo.trackFileName(name: "audio-4", language: "de") == "de")
        #expect(MediaInfo.trackFileName(name: "7", language: "fr") == "fr")
        #expect(MediaInfo.trackFileName(name: "audio", language: "pt-BR") == "pt-BR")
        #expect(MediaInfo.trackFileName(name: "English", language: "en") == "English")
        #expect(MediaInfo.trackFileName(name: "a128", language: "en") == "a128")
        #expect(MediaInfo.trackFileName(name: "audio_3", language: nil) == "audio_3")
        #expect(MediaInfo.trackFileName(name: "audio_3", language: "../x") == "audio_3", "only a plain tag names a file")
    }

    @Test func nothingToMerge() {
        let merger = MediaMerger()
        #expect(merger.plan(for: [], title: "x") == nil)
        #expect(merger.plan(for: [MergeInput(path: "/d/v.mp4", media: Self.video)], title: "x") == nil)
        #expect(merger.plan(for: [MergeInput(path: "/d/a.mp4", media: Self.audio), MergeInput(path: "/d/b.mp4", media: Self.audio)], title: "x") == nil)
        // Two variants of one stream (`-f all`) are not parts of one video.
        let one = MediaInfo(kind: .muxed, identifier: "720p"), other = MediaInfo(kind: .muxed, identifier: "480p")
        #expect(merger.plan(for: [MergeInput(path: "/d/720p.ts", media: one), MergeInput(path: "/d/480p.ts", media: other)], title: "x") == nil)
        #expect(merger.plan(for: [MergeInput(path: "/d/file.bin", media: nil), MergeInput(path: "/d/other.bin", media: nil)], title: "x") == nil)
        #expect(merger.plan(for: [MergeInput(path: "/d/part-1.flv", media: MediaInfo(kind: .muxed, quality: "80"))], title: "x") == nil)
    }

    @Test func partsAreConcatenatedInTheirOrder() throws {
        let media = MediaInfo(kind: .muxed, identifier: "80", quality: "80")
        let paths = (1...11).map { "/d/1001/part-\($0).flv" }
        let plan = try #require(MediaMerger().plan(for: paths.map { MergeInput(path: $0, media: media) }, title: "av170001 cid 1001"))
        #expect(plan.method == .concatenate)
        #expect(plan.inputs == paths, "part-10 and part-11 come after part-9, not after part-1")
        #expect(plan.output == "/d/1001/av170001 cid 1001.flv")
        #expect(plan.muxer == "flv")
        #expect(plan.ffmpegArguments == [
            "-nostdin", "-hide_banner", "-loglevel", "error", "-y",
            "-f", "concat", "-safe", "0", "-i", plan.concatListPath, "-map", "0", "-c", "copy", "-f", "flv", plan.temporaryOutput,
        ])
        #expect(MediaMerger(outputFormat: .mkv).plan(for: paths.map { MergeInput(path: $0, media: media) }, title: "t")?.output == "/d/1001/t.mkv")
        // Parts of mixed or unknown extensions: Matroska.
        let mixed = try #require(MediaMerger().plan(
            for: [MergeInput(path: "/d/p1.flv", media: media), MergeInput(path: "/d/p2.xyz", media: media)], title: "t"))
        #expect(mixed.output == "/d/t.mkv")
    }

    @Test func theConcatListQuotesEveryName() {
        let list = MediaMerger.concatList(["/d/it's here.flv", "/d/two  spaces.flv", "-dash.flv", "/d/-abs.flv", "/d/back\\slash.flv"])
        #expect(list == """
            file '/d/it'\\''s here.flv'
            file '/d/two  spaces.flv'
            file './-dash.flv'
            file '/d/-abs.flv'
            file '/d/back\\slash.flv'

            """)
    }

    @Test func hostileNamesStayArgumentsOfTheirOwn() throws {
        // A title that is a path or an option becomes a plain file name.
        let plan = try #require(MediaMerger().plan(
            for: [MergeInput(path: "-v.mp4", media: Self.video), MergeInput(path: "-a.m4a", media: Self.audio)], title: "../../-etc/passwd"))
        #expect(plan.output.hasPrefix("./"), "\(plan.output)")
        #expect(!plan.output.dropFirst(2).contains("/"), "\(plan.output)")
        let arguments = plan.ffmpegArguments
        #expect(arguments.contains("./-v.mp4") && arguments.contains("./-a.m4a"))
        #expect(!arguments.contains("-v.mp4"))
        // A title that names one of the inputs: the merged file takes its place once it is made.
        let clash = try #require(MediaMerger().plan(
            for: [MergeInput(path: "/d/v.mp4", media: Self.video), MergeInput(path: "/d/a.m4a", media: Self.audio)], title: "v"))
        #expect(clash.output == "/d/v.mp4")
    }

    @Test func ffmpegIsFoundOnAbsolutePathEntriesOnly() throws {
        let directory = NSTemporaryDirectory() + "merge-path-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let tool = directory + "/ffmpeg"
        _ = FileManager.default.createFile(atPath: tool, contents: Data("#!/bin/sh\n".utf8), attributes: [.posixPermissions: 0o755])
        #expect(MediaMerger.findFFmpeg(environment: ["PATH": "/nonexistent:\(directory)"]) == tool)
        #expect(MediaMerger.findFFmpeg(environment: ["PATH": "/nonexistent"]) == nil)
        #expect(MediaMerger.findFFmpeg(environment: ["PATH": String(directory.drop { $0 == "/" })]) == nil, "relative entries are not searched")
    }
}

/// Merging real media made by ffmpeg, checked with ffprobe.
@Suite(.enabled(if: MediaTools.available, "needs ffmpeg and ffprobe (apt-get install ffmpeg; make test installs it)"), .timeLimit(.minutes(2)))
struct MediaMergerFFmpegTests {
    let directory = NSTemporaryDirectory() + "merge-\(UUID().uuidString)"

    init() throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    func cleanUp() { try? FileManager.default.removeItem(atPath: directory) }

    /// A 2 s video and an audio track made by ffmpeg in the test's directory, and the plan that
    /// merges them into `title`.
    func videoAndAudio(title: String) async throws -> (MediaMerger, MergePlan, video: String, audio: String) {
        let video = directory + "/v720.mp4", audio = directory + "/a128.m4a"
        try await MediaTools.makeVideo(at: video)
        try await MediaTools.makeAudio(at: audio)
        let codec = MediaTools.hasLibx264 ? "avc1.64000d" : "mp4v.20.9"
        let merger = MediaMerger()
        let plan = try #require(merger.plan(
            for: [MergeInput(path: video, media: MediaInfo(kind: .video, codecs: codec)), MergeInput(path: audio, media: MediaInfo(kind: .audio, codecs: "mp4a.40.2"))],
            title: title))
        return (merger, plan, video, audio)
    }

    @Test func aVideoAndAnAudioTrackBecomeOneFile() async throws {
        defer { cleanUp() }
        let (merger, plan, video, audio) = try await videoAndAudio(title: "it's a \"show\"")
        let ffmpeg = try #require(MediaTools.ffmpeg)
        let result = try await merger.run(plan, ffmpeg: ffmpeg)
        #expect(result.path == directory + "/it's a \"show\"." + (MediaTools.hasLibx264 ? "mp4" : "mkv"))
        #expect(result.size > 0)
        #expect(result.removedInputs == [video, audio])
        #expect(!FileManager.default.fileExists(atPath: video) && !FileManager.default.fileExists(atPath: audio))
        let probe = try await MediaTools.probe(result.path)
        #expect(probe.streams.sorted() == ["audio", "video"])
        #expect(abs(probe.duration - 2) < 0.5, "\(probe.duration)")
        let left = try FileManager.default.contentsOfDirectory(atPath: directory)
        #expect(left == [(result.path as NSString).lastPathComponent], "no temporary file is left: \(left)")
    }

    @Test func underAFenceTheMergedFileIsMovedOnlyWhileTheFencePermitsIt() async throws {
        defer { cleanUp() }
        let (merger, plan, video, audio) = try await videoAndAudio(title: "fenced")
        let ffmpeg = try #require(MediaTools.ffmpeg)
        var held = plan
        held.temporaryEpoch = 8
        #expect(held.ffmpegArguments.last == directory + "/." + (plan.output as NSString).lastPathComponent + ".e8.merging")
        // A holder that lost the task (its fence says no once ffmpeg is done): nothing moves, nothing is deleted.
        await #expect(throws: MergeError.cancelled) {
            try await merger.run(plan, ffmpeg: ffmpeg, fence: MergeFence(epoch: 7) { false })
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory).sorted() == ["a128.m4a", "v720.mp4"])
        // The next holder, with what a killed holder's ffmpeg left under its own epoch's name.
        let left = held.temporaryOutput.replacingOccurrences(of: ".e8.", with: ".e7.")
        _ = FileManager.default.createFile(atPath: left, contents: Data(repeating: 1, count: 100))
        let result = try await merger.run(plan, ffmpeg: ffmpeg, fence: MergeFence(epoch: 8) { true })
        #expect(result.path == plan.output && result.removedInputs == [video, audio])
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory) == [(plan.output as NSString).lastPathComponent])
    }

    @Test func threePartsAreConcatenated() async throws {
        defer { cleanUp() }
        let parts = ["part-1.mp4", "it's part 2.mp4", "-part-3.mp4"].map { directory + "/" + $0 }
        for part in parts { try await MediaTools.makeMuxed(at: part, seconds: 1) }
        let media = MediaInfo(kind: .muxed, identifier: "80", quality: "80")
        let merger = MediaMerger()
        let plan = try #require(merger.plan(for: parts.map { MergeInput(path: $0, media: media) }, title: "cid 1001"))
        let result = try await merger.run(plan, ffmpeg: try #require(MediaTools.ffmpeg))
        #expect(result.path == directory + "/cid 1001.mp4")
        let probe = try await MediaTools.probe(result.path)
        #expect(probe.streams.sorted() == ["audio", "video"])
        #expect(abs(probe.duration - 3) < 0.5, "\(probe.duration)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory) == ["cid 1001.mp4"])
    }

    @Test func aFailedMergeKeepsTheFilesAndLeavesNoHalfFile() async throws {
        defer { cleanUp() }
        let video = directory + "/v.mp4", audio = directory + "/a.m4a"
        _ = FileManager.default.createFile(atPath: video, contents: Data(repeating: 7, count: 5000))
        _ = FileManager.default.createFile(atPath: audio, contents: Data(repeating: 9, count: 3000))
        let merger = MediaMerger()
        let plan = try #require(merger.plan(
            for: [MergeInput(path: video, media: MediaInfo(kind: .video)), MergeInput(path: audio, media: MediaInfo(kind: .audio))], title: "t"))
        await #expect {
            try await merger.run(plan, ffmpeg: try #require(MediaTools.ffmpeg))
        } throws: { error in
            guard case .ffmpegFailed(let status, let message) = error as? MergeError else { return false }
            return status != 0 && !message.isEmpty && message.utf8.count <= 4096
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory).sorted() == ["a.m4a", "v.mp4"])
    }

    @Test func cancellingTheTaskStopsFFmpeg() async throws {
        defer { cleanUp() }
        // A stand-in for a long merge: an ffmpeg run that would take a minute.
        let fifo = directory + "/never.mp4"
        #expect(mkfifo(fifo, 0o644) == 0)
        let audio = directory + "/a.m4a"
        try await MediaTools.makeAudio(at: audio)
        let plan = MergePlan(
            method: .mux, inputs: [fifo, audio], streams: [.video, .audio], output: directory + "/out.mkv", muxer: "matroska")
        let ffmpeg = try #require(MediaTools.ffmpeg)
        let started = ContinuousClock.now
        let task = Task { try await MediaMerger().run(plan, ffmpeg: ffmpeg) }
        try await Task.sleep(for: .milliseconds(300))
        task.cancel()
        await #expect(throws: MergeError.cancelled) { try await task.value }
        #expect(ContinuousClock.now - started < .seconds(20))
        #expect(FileManager.default.fileExists(atPath: audio), "the inputs stay")
        #expect(!FileManager.default.fileExists(atPath: directory + "/out.mkv"))
    }
}
