import Foundation
import PlayurlEntity
import Tessera
import TesseraTesting
import Testing

/// The API template the parser tests use; nothing is fetched from it.
let exampleAPI = "https://api.example.com/x/player/playurl?cid={cid}&qn={quality}&avid={aid}&fnval=0"

/// The URL an answer "came from", for resolving relative references.
let answerURL = URL(string: "https://api.example.com/x/player/playurl?cid=1001&qn=80&avid=170001&fnval=0")!

/// An entity for cid 1001 of aid 170001 at quality 80.
func makeEntity(
    cid: UInt64 = 1001, aid: UInt64? = 170_001, quality: Int = 80, referer: String? = nil
) throws -> PlayurlEntity {
    try PlayurlEntity(cid: cid, aid: aid, quality: quality, api: exampleAPI, referer: referer)
}

/// Parses `answer` as cid 1001's playurl answer.
func parse(
    _ answer: String, entity: PlayurlEntity? = nil, url: URL = answerURL, maxSegments: Int = 1_000_000,
    maxDocumentSize: Int = 32 << 20
) throws -> DownloadManifest {
    try (entity ?? makeEntity()).manifest(
        fromAnswer: Data(answer.utf8), url: url, maxSegments: maxSegments, maxDocumentSize: maxDocumentSize)
}

/// The `DownloadError` `body` throws (failing the test when it throws none or another error).
func downloadError(
    sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void
) -> DownloadError? {
    do {
        try body()
        Issue.record("expected a DownloadError, nothing was thrown", sourceLocation: sourceLocation)
        return nil
    } catch let error as DownloadError {
        return error
    } catch {
        Issue.record("expected a DownloadError, got \(error)", sourceLocation: sourceLocation)
        return nil
    }
}

/// `PLUGIN:KEY=VALUE` arguments as `PluginArguments`.
func pluginArguments(_ texts: [String]) throws -> PluginArguments {
    var arguments = PluginArguments()
    for text in texts { try arguments.add(text) }
    return arguments
}

/// An origin, an engine and a manager (with a segment cache) over a temporary download root,
/// with a registry that knows the playurl plugin.
struct PlayurlHarness {
    let origin: LoopbackOrigin
    let engine: CurlEngine
    let manager: DownloadTaskManager
    let registry: EntityRegistry
    let root: TemporaryDirectory

    init(origin: LoopbackOrigin) throws {
        self.origin = origin
        root = TemporaryDirectory("playurl-e2e")
        registry = EntityRegistry()
        PlayurlEntity.register(in: registry)
        var engineConfiguration = CurlEngine.Configuration()
        engineConfiguration.proxy = .none
        engineConfiguration.connectTimeout = .seconds(5)
        engineConfiguration.lowSpeedTime = .seconds(10)
        engine = try CurlEngine(configuration: engineConfiguration)
        var configuration = DownloadTaskManager.Configuration(downloadRoot: root.file("downloads"))
        configuration.retry = RetryPolicy(maxAttempts: 3, baseDelay: .milliseconds(10), maxDelay: .milliseconds(50))
        configuration.randomSeed = 7
        configuration.progressInterval = .milliseconds(100)
        configuration.diskSpace = nil
        manager = DownloadTaskManager(
            configuration: configuration, engine: engine, cache: try SegmentCache(directory: root.file("cache")),
            registry: registry)
    }

    var downloadRoot: String { root.file("downloads") }

    /// The entities of `fixture`'s inputs (or of `inputs`), made through the registry.
    func entities(_ fixture: PlayurlFixture, inputs: [String]? = nil) async throws -> [DownloadBaseEntity] {
        let arguments = try pluginArguments(fixture.pluginArguments)
        var entities: [DownloadBaseEntity] = []
        for text in inputs ?? fixture.inputs {
            entities += try await registry.makeEntities(
                for: EntityInput(text, arguments: arguments), context: ResolveContext(engine: engine))
        }
        return entities
    }

    /// Polls the task until it is finished (completed, failed, invalid, removed); fails the test
    /// after `timeout`.
    func waitUntilFinished(
        _ id: DownloadTaskID, timeout: Duration = .seconds(60), sourceLocation: SourceLocation = #_sourceLocation
    ) async -> DownloadTaskInfo? {
        let deadline = ContinuousClock.now + timeout
        var last: DownloadTaskInfo?
        while ContinuousClock.now < deadline {
            last = await manager.check(id)
            if let last, last.state.isFinal { return last }
            try? await Task.sleep(for: .milliseconds(10))
        }
        Issue.record(
            "timed out waiting for \(id): last state \(last.map { "\($0.state)" } ?? "none"), error \(String(describing: last?.error))",
            sourceLocation: sourceLocation)
        return last
    }

    func tearDown() async {
        await manager.stopAll()
        await engine.shutdown()
        root.cleanUp()
    }
}

/// Starts an origin, runs `body` with a harness, and tears both down, also on error.
func withPlayurlHarness(_ body: (PlayurlHarness) async throws -> Void) async throws {
    try await withLoopbackOrigin { origin in
        let harness = try PlayurlHarness(origin: origin)
        do {
            try await body(harness)
        } catch {
            await harness.tearDown()
            throw error
        }
        await harness.tearDown()
    }
}
