import Foundation
import Tessera
import TesseraTesting
import Testing

// README:begin
/// Videos of a site whose API answers `{"title": "…", "parts": [{"url": "…", "size": 123}]}`.
struct VideoPayload: Codable, Sendable {
    var id: String
    var api: String  // e.g. https://example.com/api/video/{id}
}

final class VideoEntity: PayloadEntity<VideoPayload>, DownloadParserProtocol, @unchecked Sendable {
    override class var entityType: String { "video" }

    /// Accepts `video:<id>`; the API comes from `--plugin-arg video:api=…`.
    static let matcher = EntityMatcher(plugin: "video", summary: "video:<id>", rules: [.scheme("video")]) { input, id in
        guard let api = input.arguments["video"]["api"] else {
            throw DownloadError(.invalidRequest, "video needs --plugin-arg video:api=URL")
        }
        return VideoEntity(payload: VideoPayload(id: id, api: api), entityKey: id, destinationDirectory: "videos/\(id)")
    }

    struct Answer: Decodable {
        struct Part: Decodable { var url: String; var size: Int64?; var sha256: String? }
        var title: String
        var parts: [Part]
    }

    func resolve(in context: ResolveContext) async throws -> DownloadManifest {
        let api = try URLSafety.resolve(payload.api.replacingOccurrences(of: "{id}", with: payload.id), against: nil)
        let (answer, source) = try await context.fetchJSON(Answer.self, from: api)
        let outputs = try answer.parts.enumerated().map { index, part in
            DownloadOutput(name: "part-\(index + 1).mp4", segments: [DownloadSegment(
                url: try URLSafety.resolve(part.url, against: source.url),
                expectedSize: part.size,
                checksum: try part.sha256.map { try Checksum(.sha256, hex: $0) })])
        }
        return DownloadManifest(title: answer.title, outputs: outputs)
    }
}
// README:end

@Suite(.timeLimit(.minutes(2))) struct ReadmeExampleTests {
    @Test func theReadmeShowsExactlyTheCompiledExample() throws {
        let here = URL(fileURLWithPath: #filePath)
        let root = here.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let source = try String(contentsOf: here, encoding: .utf8)
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let begin = try #require(source.range(of: "// README:begin\n")), end = try #require(source.range(of: "// README:end"))
        let example = String(source[begin.upperBound..<end.lowerBound])
        #expect(readme.contains(example), "README.md's entity example differs from Tests/TesseraTests/Docs/ReadmeExample.swift")
    }

    @Test func theExampleEntityDownloads() async throws {
        try await withLoopbackOrigin { origin in
            let part = "/bytes/20000/video/42-1.mp4"
            origin.serve("/api/video/42", .text(#"{"title": "Forty-two", "parts": [{"url": "\#(part)", "size": 20000}]}"#, contentType: "application/json"))
            let root = TemporaryDirectory("readme")
            defer { root.cleanUp() }
            let registry = EntityRegistry()
            registry.register(VideoEntity.self, matchers: [VideoEntity.matcher])
            var configuration = CurlEngine.Configuration()
            configuration.proxy = .none
            let engine = try CurlEngine(configuration: configuration)
            let manager = DownloadTaskManager(configuration: .init(downloadRoot: root.path), engine: engine, registry: registry)
            var arguments = PluginArguments()
            try arguments.add("video:api=http://127.0.0.1:\(origin.port)/api/video/{id}")
            let entity = try registry.makeEntity(for: EntityInput("video:42", arguments: arguments))
            let events = manager.events()
            try await manager.start(entity)
            var final: DownloadTaskInfo?
            for await event in events {
                if case .taskStateChanged(let info, _) = event, info.state.isFinal { final = info; break }
            }
            #expect(final?.state == .completed)
            #expect(await origin.content(at: part).verifyFile(atPath: root.file("videos/42/part-1.mp4"), size: 20000))
            await manager.shutdown()
            await engine.shutdown()
        }
    }
}
