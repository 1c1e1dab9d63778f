import Foundation
import Testing
@testable import Tessera
import TesseraTesting

/// Merging as a property of the download: the manager merges a task's video and audio when it
/// completes (real media made by ffmpeg, checked with ffprobe), keeps the files when told not
/// to, and finishes a merge a shutdown cut at the next start.
@Suite(.enabled(if: MediaTools.available, "needs ffmpeg and ffprobe (apt-get install ffmpeg; make test installs it)"), .timeLimit(.minutes(3)))
struct ManagerMediaMergerFFmpegTests {
    /// Serves a video track and an English audio track made by ffmpeg as a fixture manifest (no
    /// codecs named: the merged file is Matroska).
    func serveTracks(_ harness: ManagerHarness, key: String, alternatives: Bool = false) async throws -> FixtureEntity {
        let media = harness.root.file(".media-\(key)")
        try FileManager.default.createDirectory(atPath: media, withIntermediateDirectories: true)
        try await MediaTools.makeVideo(at: media + "/v.mp4")
        try await MediaTools.makeAudio(at: media + "/a.m4a")
        var outputs: [FixtureDocument.Output] = []
        for (name, kind, language) in [("video.mp4", "video", nil), ("English.m4a", "audio", "en")] as [(String, String, String?)] {
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: media + (kind == "video" ? "/v.mp4" : "/a.m4a"))))
            harness.origin.serve("/media/\(key)/\(name)", .bytes(bytes, contentType: "application/octet-stream"))
            outputs.append(FixtureDocument.Output(
                name: name, segments: [.init(urls: [harness.origin.url("/media/\(key)/\(name)").absoluteString], size: Int64(bytes.count))],
                kind: kind, language: language))
        }
        harness.serve(FixtureDocument(title: "Show \(key)", outputs: outputs, alternatives: alternatives), as: key)
        return FixtureEntity(key: key, manifestURL: harness.origin.url("/manifests/\(key).json").absoluteString)
    }

    @Test func theManagerMergesWhatItCompletesUnlessToldNotTo() async throws {
        try await withManager { harness in
            let entity = try await serveTracks(harness, key: "merged")
            let info = try await harness.manager.download(entity)
            #expect(info.state == .completed)
            let merged = try #require(info.outputs.first?.path)
            #expect(info.outputs.count == 1 && merged.hasSuffix("/fixtures/merged/Show merged.mkv"), "\(info.outputs)")
            #expect(try await MediaTools.probe(merged).streams.sorted() == ["audio", "video"])
            #expect(filesUnder(harness.root.file("fixtures/merged")) == ["Show merged.mkv"])
            let events = harness.log.all.compactMap { event -> String? in
                if case .taskMerge(_, let status) = event {
                    switch status {
                    case .started: return "started"
                    case .merged: return "merged"
                    case .failed: return "failed"
                    case .skipped: return "skipped"
                    }
                }
                return nil
            }
            #expect(events == ["started", "merged"])

            // Alternatives are each a file of their own.
            let alternatives = try await serveTracks(harness, key: "all", alternatives: true)
            let kept = try await harness.manager.download(alternatives)
            #expect(kept.outputs.count == 2)
            #expect(filesUnder(harness.root.file("fixtures/all")).sorted() == ["English.m4a", "video.mp4"])
        }
        // Told not to: the files as downloaded.
        try await withManager(configure: { $0.merging = nil }) { harness in
            let entity = try await serveTracks(harness, key: "kept")
            let info = try await harness.manager.download(entity)
            #expect(info.outputs.map(\.name).sorted() == ["English.m4a", "video.mp4"])
            #expect(filesUnder(harness.root.file("fixtures/kept")).sorted() == ["English.m4a", "video.mp4"])
        }
    }

    /// A merge cut by a shutdown (a slow ffmpeg, stopped): the task stays completed with its
    /// files, the merge pending in the store; the next manager on the store merges it.
    @Test func aMergeCutByAShutdownRunsAtTheNextStart() async throws {
        try await withManager { harness in
            let slow = harness.root.file("slow-ffmpeg")
            try "#!/bin/sh\ntrap 'exit 255' INT TERM\nwhile :; do sleep 0.05; done\n".write(toFile: slow, atomically: true, encoding: .utf8)
            chmod(slow, 0o755)
            let path = harness.root.file("state.sqlite")
            let registry = EntityRegistry()
            registry.register(FixtureEntity.self)
            var configuration = DownloadTaskManager.Configuration(downloadRoot: harness.root.path)
            configuration.merging = MergePolicy(ffmpeg: slow)
            let manager = DownloadTaskManager(
                configuration: configuration, engine: harness.engine, store: try SQLiteDownloadStore(path: path), registry: registry)
            let events = EventLog(manager.events())
            let entity = try await serveTracks(harness, key: "cut")
            try await manager.start(entity)
            #expect(await eventually(within: .seconds(60)) {
                events.all.contains { if case .taskMerge(_, .started) = $0 { true } else { false } }
            })
            await manager.shutdown()
            let interrupted = events.all.contains { if case .taskMerge(_, .failed(.cancelled)) = $0 { true } else { false } }
            #expect(interrupted)
            events.stop()
            #expect(filesUnder(harness.root.file("fixtures/cut")).sorted() == ["English.m4a", "video.mp4"], "the files stay")

            let next = DownloadTaskManager(
                configuration: .init(downloadRoot: harness.root.path), engine: harness.engine,
                store: try SQLiteDownloadStore(path: path), registry: registry)
            try await next.restore(resuming: true)
            await next.finishMerging()
            let info = try #require(await next.check(entity.taskID))
            #expect(info.state == .completed)
            #expect(info.outputs.map(\.name) == ["Show cut.mkv"], "\(info.outputs)")
            #expect(filesUnder(harness.root.file("fixtures/cut")) == ["Show cut.mkv"])
            await next.shutdown()
        }
    }
}
