import Foundation
import MetalinkEntity
import Synchronization
import Tessera
import TesseraTesting
import Testing

/// Retry delays are not waited out (1 ms, so tasks still interleave).
struct QuickSleeper: DownloadSleeper {
    func sleep(for duration: Duration) async throws { try await Task.sleep(for: .milliseconds(1)) }
}

/// Collects a manager's events.
final class EventLog: Sendable {
    private final class Storage: Sendable {
        let events = Mutex<[DownloadEvent]>([])
    }

    private let storage: Storage
    private let task: Task<Void, Never>

    init(_ stream: AsyncStream<DownloadEvent>) {
        let storage = Storage()
        self.storage = storage
        task = Task {
            for await event in stream { storage.events.withLock { $0.append(event) } }
        }
    }

    var all: [DownloadEvent] { storage.events.withLock { $0 } }

    /// The errors reported for `id`.
    func errors(of id: DownloadTaskID) -> [DownloadError] {
        all.compactMap { event in
            if case .taskError(let task, let error, _) = event, task == id { return error }
            return nil
        }
    }

    func stop() { task.cancel() }
}

/// An origin, a registry that knows Metalink, an engine and a manager over a temporary root.
struct MetalinkHarness {
    let origin: LoopbackOrigin
    let registry: EntityRegistry
    let engine: CurlEngine
    let manager: DownloadTaskManager
    let root: TemporaryDirectory
    let log: EventLog

    init(origin: LoopbackOrigin, configure: (inout DownloadTaskManager.Configuration) -> Void = { _ in }) throws {
        self.origin = origin
        registry = EntityRegistry()
        MetalinkEntity.register(in: registry)
        root = TemporaryDirectory("metalink-e2e")
        engine = try CurlEngine(configuration: CurlEngine.Configuration.forTests())
        var configuration = DownloadTaskManager.Configuration(downloadRoot: root.file("downloads"))
        configuration.sleeper = QuickSleeper()
        configuration.randomSeed = 7
        configuration.progressInterval = .milliseconds(100)
        configuration.diskSpace = nil
        configure(&configuration)
        manager = DownloadTaskManager(
            configuration: configuration, engine: engine, cache: try SegmentCache(directory: root.file("cache")),
            registry: registry)
        log = EventLog(manager.events())
    }

    var downloadRoot: String { root.file("downloads") }

    func tearDown() async {
        log.stop()
        await manager.stopAll()
        await engine.shutdown()
        root.cleanUp()
    }

    /// Expands `input` through the registry and starts every entity.
    @discardableResult
    func start(_ input: String, arguments: [String] = []) async throws -> [DownloadTaskInfo] {
        var pluginArguments = PluginArguments()
        for argument in arguments { try pluginArguments.add(argument) }
        let entities = try await registry.makeEntities(
            for: EntityInput(input, arguments: pluginArguments), context: ResolveContext(engine: engine))
        var infos: [DownloadTaskInfo] = []
        for entity in entities { infos.append(try await manager.start(entity)) }
        return infos
    }

    /// Polls until every task is final (or records an issue after `timeout`); the final snapshots.
    func waitUntilFinal(
        _ ids: [DownloadTaskID], timeout: Duration = .seconds(60), sourceLocation: SourceLocation = #_sourceLocation
    ) async -> [DownloadTaskID: DownloadTaskInfo] {
        let deadline = ContinuousClock.now + timeout
        var snapshots: [DownloadTaskID: DownloadTaskInfo] = [:]
        while ContinuousClock.now < deadline {
            for id in ids { snapshots[id] = await manager.check(id) }
            if snapshots.count == ids.count, snapshots.values.allSatisfy({ $0.state.isFinal }) { return snapshots }
            try? await Task.sleep(for: .milliseconds(10))
        }
        Issue.record(
            "timed out; states: \(snapshots.values.map { "\($0.title)=\($0.state)" })", sourceLocation: sourceLocation)
        return snapshots
    }
}

/// Starts an origin and a harness, runs `body`, and tears everything down.
func withMetalinkHarness(
    configure: (inout DownloadTaskManager.Configuration) -> Void = { _ in },
    _ body: (MetalinkHarness) async throws -> Void
) async throws {
    try await withLoopbackOrigin { origin in
        let harness = try MetalinkHarness(origin: origin, configure: configure)
        do {
            try await body(harness)
        } catch {
            await harness.tearDown()
            throw error
        }
        await harness.tearDown()
    }
}

/// The SHA-256 of `text`, as hex.
func sha256(_ text: String) -> String { Checksum.compute(.sha256, bytes: Array(text.utf8)).hexDigest }

/// The checksum of `bytes`.
func checksum(_ algorithm: Checksum.Algorithm, _ bytes: [UInt8]) -> Checksum { Checksum.compute(algorithm, bytes: bytes) }

/// Parses a document as if fetched from `url`.
func parse(_ xml: String, url: String = "https://example.com/files/example.meta4", maxFiles: Int = 1_000_000) throws
    -> MetalinkDocument
{
    try MetalinkDocument.parse(Data(xml.utf8), url: URL(string: url)!, maxFiles: maxFiles)
}

/// The manifest of the file `name` (default: the first) of `xml`.
func manifest(
    _ xml: String, name: String? = nil, url: String = "https://example.com/files/example.meta4", maxSegments: Int = 1_000_000,
    splitting: SplitPolicy = SplitPolicy(), preferredLocations: [String] = []
) throws -> DownloadManifest {
    let document = try parse(xml, url: url)
    let file = try document.file(named: name ?? document.entries[0].name, maxPieces: maxSegments)
    return try MetalinkEntity.manifest(
        for: file, in: document, maxSegments: maxSegments, splitting: splitting, preferredLocations: preferredLocations)
}

/// A Metalink 4 document around `body` (the inside of `<metalink>`).
func meta4(_ body: String) -> String {
    """
    <?xml version="1.0" encoding="UTF-8"?>
    <metalink xmlns="urn:ietf:params:xml:ns:metalink">
    \(body)
    </metalink>
    """
}

/// The error `body` throws, as a `DownloadError` (recording an issue when it throws none or another).
func downloadError(sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void) -> DownloadError? {
    do {
        try body()
        Issue.record("no error was thrown", sourceLocation: sourceLocation)
        return nil
    } catch let error as DownloadError {
        return error
    } catch {
        Issue.record("not a DownloadError: \(error)", sourceLocation: sourceLocation)
        return nil
    }
}
