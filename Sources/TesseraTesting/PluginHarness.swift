import Foundation
import Tessera

/// Collects a manager's events, from the moment it is made.
public final class EventLog: Sendable {
    private final class Storage: Sendable {
        let events = Locked<[DownloadEvent]>([])
    }

    private let storage = Storage()
    private let task: Task<Void, Never>

    /// Starts collecting `stream` (subscribe before starting tasks, so nothing is missed).
    public init(_ stream: some AsyncSequence<DownloadEvent, Never> & Sendable) {
        let storage = self.storage
        task = Task {
            for await event in stream { storage.events.withLock { $0.append(event) } }
        }
    }

    /// Every event so far, in order.
    public var all: [DownloadEvent] { storage.events.withLock { $0 } }

    /// The errors reported for `id`.
    public func errors(of id: DownloadTaskID) -> [DownloadError] {
        all.compactMap { event in
            if case .taskError(let task, let error, _) = event, task == id { return error }
            return nil
        }
    }

    /// Stops collecting.
    public func stop() { task.cancel() }

    /// Whether `condition` holds for the events so far, waiting up to `timeout` for it (events
    /// arrive asynchronously).
    public func eventually(within timeout: Duration = .seconds(30), _ condition: ([DownloadEvent]) -> Bool) async -> Bool {
        await TesseraTesting.eventually(within: timeout) { condition(all) }
    }
}

/// Retry delays not waited out: 1 ms, so tasks still interleave.
public struct QuickSleeper: DownloadSleeper {
    /// Creates the sleeper.
    public init() {}

    /// Sleeps 1 ms whatever `duration` is.
    public func sleep(for duration: Duration) async throws { try await Task.sleep(for: .milliseconds(1)) }
}

/// What a plugin's end-to-end tests need: a ``LoopbackOrigin``, a registry that knows the
/// plugin, an engine for loopback, and a manager with a segment cache over a temporary
/// directory, with an ``EventLog`` of its events.
///
/// The manager retries quickly (3 attempts, 10 to 50 ms apart), with a fixed jitter seed,
/// progress every 100 ms and no disk-space checks; `configure` changes any of it.
public struct PluginHarness: Sendable {
    /// The origin the tests serve from.
    public let origin: LoopbackOrigin
    /// The registry, with the plugin registered.
    public let registry: EntityRegistry
    /// The engine (``CurlEngine/Configuration/forTests()``).
    public let engine: CurlEngine
    /// The manager under test.
    public let manager: DownloadTaskManager
    /// The temporary directory: `downloads/` and `cache/` inside.
    public let root: TemporaryDirectory
    /// The manager's events since it was made.
    public let log: EventLog

    /// Sets everything up; `register` registers the plugin (`DASHEntity.register(in:)`).
    public init(
        origin: LoopbackOrigin, name: String, register: (EntityRegistry) -> Void,
        configure: (inout DownloadTaskManager.Configuration) -> Void = { _ in }
    ) throws {
        self.origin = origin
        root = TemporaryDirectory(name)
        registry = EntityRegistry()
        register(registry)
        engine = try CurlEngine(configuration: .forTests())
        var configuration = DownloadTaskManager.Configuration(downloadRoot: root.file("downloads"))
        configuration.retry = RetryPolicy(maxAttempts: 3, baseDelay: .milliseconds(10), maxDelay: .milliseconds(50))
        configuration.randomSeed = 7
        configuration.progressInterval = .milliseconds(100)
        configuration.diskSpace = nil
        configure(&configuration)
        manager = DownloadTaskManager(
            configuration: configuration, engine: engine, cache: try SegmentCache(directory: root.file("cache")),
            registry: registry)
        log = EventLog(manager.events())
    }

    /// Where the outputs go.
    public var downloadRoot: String { root.file("downloads") }

    /// The entities `input` stands for, made through the registry as a command line makes them.
    public func entities(for input: EntityInput) async throws -> [DownloadBaseEntity] {
        try await registry.makeEntities(for: input, context: ResolveContext(engine: engine))
    }

    /// Polls until every task in `ids` is final, or `timeout` passes; the last snapshots (check
    /// their states: after a timeout some are not final).
    public func finalSnapshots(of ids: [DownloadTaskID], timeout: Duration = .seconds(60)) async -> [DownloadTaskID: DownloadTaskInfo] {
        await manager.waitForFinal(ids, timeout: timeout)
    }

    /// Stops everything and removes the directory.
    public func tearDown() async {
        log.stop()
        await manager.stopAll()
        await engine.shutdown()
        root.cleanUp()
    }
}

/// Starts an origin and a ``PluginHarness``, runs `body`, and tears both down, also when `body`
/// throws.
public func withPluginHarness(
    name: String, register: (EntityRegistry) -> Void,
    configure: (inout DownloadTaskManager.Configuration) -> Void = { _ in },
    _ body: (PluginHarness) async throws -> Void
) async throws {
    try await withLoopbackOrigin { origin in
        let harness = try PluginHarness(origin: origin, name: name, register: register, configure: configure)
        do {
            try await body(harness)
        } catch {
            await harness.tearDown()
            throw error
        }
        await harness.tearDown()
    }
}
