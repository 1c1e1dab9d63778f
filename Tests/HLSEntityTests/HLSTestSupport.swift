import Foundation
import HLSEntity
import Tessera
import TesseraTesting
import Testing

func fileBytes(_ path: String) -> [UInt8]? {
    FileManager.default.contents(atPath: path).map { [UInt8]($0) }
}

/// Runs `body` and returns the ``DownloadError`` it throws, recording an issue when it throws
/// nothing, something else, or an error with another code or without `fragments` in its message.
@discardableResult
func expectDownloadError(
    _ code: DownloadError.Code, _ fragments: String..., sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () throws -> Void
) -> DownloadError? {
    do {
        try body()
        Issue.record("expected a \(code) error, nothing was thrown", sourceLocation: sourceLocation)
        return nil
    } catch let error as DownloadError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
        for fragment in fragments {
            #expect(error.message.contains(fragment), "\"\(error.message)\" does not contain \"\(fragment)\"", sourceLocation: sourceLocation)
        }
        return error
    } catch {
        Issue.record("expected a DownloadError, got \(error)", sourceLocation: sourceLocation)
        return nil
    }
}

let playlistURL = URL(string: "https://cdn.example.com/show/720p/prog.m3u8")!
let masterURL = URL(string: "https://cdn.example.com/show/master.m3u8")!

/// Parses `text` as a media playlist at ``playlistURL``.
func media(_ text: String, url: URL = playlistURL, maxSegments: Int = 1_000_000) throws -> HLSMediaPlaylist {
    guard case .media(let playlist) = try HLSPlaylist.parse(text: text, url: url, maxSegments: maxSegments) else {
        throw DownloadError(.manifestInvalid, "parsed as a master playlist")
    }
    return playlist
}

/// Parses `text` as a master playlist at ``masterURL``.
func master(_ text: String, url: URL = masterURL) throws -> HLSMasterPlaylist {
    guard case .master(let playlist) = try HLSPlaylist.parse(text: text, url: url) else {
        throw DownloadError(.manifestInvalid, "parsed as a media playlist")
    }
    return playlist
}

/// An origin, an engine and a manager (with a segment cache) over a temporary download root,
/// with the HLS plugin registered.
struct HLSHarness {
    let origin: LoopbackOrigin
    let engine: CurlEngine
    let manager: DownloadTaskManager
    let registry: EntityRegistry
    let root: TemporaryDirectory

    init(origin: LoopbackOrigin, configure: (inout DownloadTaskManager.Configuration) -> Void = { _ in }) throws {
        self.origin = origin
        root = TemporaryDirectory("hls-e2e")
        registry = EntityRegistry()
        HLSEntity.register(in: registry)
        engine = try CurlEngine(configuration: CurlEngine.Configuration.forTests())
        var configuration = DownloadTaskManager.Configuration(downloadRoot: root.file("downloads"))
        configuration.retry = RetryPolicy(maxAttempts: 3, baseDelay: .milliseconds(10), maxDelay: .milliseconds(50))
        configure(&configuration)
        manager = DownloadTaskManager(
            configuration: configuration, engine: engine, cache: try SegmentCache(directory: root.file("cache")),
            registry: registry)
    }

    var downloadRoot: String { root.file("downloads") }

    /// Makes the entity for `input` through the registry, as a command line does.
    func entity(_ input: String, format: String? = nil, contentType: String? = nil) async throws -> DownloadBaseEntity {
        let entities = try await registry.makeEntities(
            for: EntityInput(input, contentType: contentType, format: format), context: ResolveContext(engine: engine))
        try #require(entities.count == 1)
        return entities[0]
    }

    /// Starts `entity` and waits (at most `timeout`) until its task is completed, failed or invalid.
    func download(_ entity: DownloadBaseEntity, timeout: Duration = .seconds(60), sourceLocation: SourceLocation = #_sourceLocation)
        async throws -> DownloadTaskInfo
    {
        let id = try await manager.start(entity).id
        let deadline = ContinuousClock.now + timeout
        var last: DownloadTaskInfo?
        while ContinuousClock.now < deadline {
            last = await manager.check(id)
            if let last, last.state.isFinal { return last }
            try await Task.sleep(for: .milliseconds(10))
        }
        Issue.record("timed out; last state \(last.map { "\($0.state)" } ?? "none")", sourceLocation: sourceLocation)
        return try #require(last)
    }

    func download(_ input: String, format: String? = nil) async throws -> DownloadTaskInfo {
        try await download(try await entity(input, format: format))
    }

    func tearDown() async {
        await manager.stopAll()
        await engine.shutdown()
        root.cleanUp()
    }
}

/// Starts an origin and a harness, runs `body`, and tears everything down.
func withHarness(_ body: (HLSHarness) async throws -> Void) async throws {
    try await withLoopbackOrigin { origin in
        let harness = try HLSHarness(origin: origin)
        do {
            try await body(harness)
        } catch {
            await harness.tearDown()
            throw error
        }
        await harness.tearDown()
    }
}

