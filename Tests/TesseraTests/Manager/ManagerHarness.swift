import Foundation
import Testing
@testable import Tessera
import TesseraTesting

/// Records every retry delay instead of sleeping it (sleeps 1 ms so tasks still interleave).
final class RecordingSleeper: DownloadSleeper {
    private let recorded = Locked<[Duration]>([])

    var delays: [Duration] { recorded.withLock { $0 } }

    func sleep(for duration: Duration) async throws {
        recorded.withLock { $0.append(duration) }
        try await Task.sleep(for: .milliseconds(1))
    }
}

/// An origin, an engine and a manager over a temporary download root.
struct ManagerHarness {
    let origin: LoopbackOrigin
    let engine: CurlEngine
    let manager: DownloadTaskManager
    let root: TemporaryDirectory
    let sleeper: RecordingSleeper
    let log: EventLog

    let cache: SegmentCache?

    init(
        origin: LoopbackOrigin, engine engineConfiguration: CurlEngine.Configuration = .forTests(),
        registry: EntityRegistry = EntityRegistry(), cache: Bool = false,
        configure: (inout DownloadTaskManager.Configuration) -> Void = { _ in }
    ) throws {
        self.origin = origin
        root = TemporaryDirectory("manager")
        self.cache = cache ? try SegmentCache(directory: root.file(".cache")) : nil
        engine = try CurlEngine(configuration: engineConfiguration)
        sleeper = RecordingSleeper()
        var configuration = DownloadTaskManager.Configuration(downloadRoot: root.path)
        configuration.sleeper = sleeper
        configuration.randomSeed = 42
        configuration.progressInterval = .milliseconds(100)
        configure(&configuration)
        registry.register(FixtureEntity.self)
        manager = DownloadTaskManager(configuration: configuration, engine: engine, cache: self.cache, registry: registry)
        log = EventLog(manager.events())
    }

    func tearDown() async {
        log.stop()
        // Whatever the manager started ends (runs, timers, merges), and its streams.
        await manager.shutdown()
        await engine.shutdown()
        root.cleanUp()
    }

    /// Serves a fixture manifest with `outputs` × `segments` generated segments of `size` bytes
    /// and returns the entity for it.
    func fixture(
        _ key: String, outputs: Int = 1, segments: Int = 1, size: Int64 = 10_000, group: String? = nil,
        edit: (inout FixtureDocument) -> Void = { _ in }
    ) -> Fixture {
        var document = FixtureDocument(title: "Fixture \(key)", outputs: (0..<outputs).map { output in
            FixtureDocument.Output(name: "out-\(output).bin", segments: (0..<segments).map { segment in
                FixtureDocument.Segment(urls: [origin.url(segmentPath(key, output, segment, size: size)).absoluteString], size: size)
            })
        })
        edit(&document)
        let data = try! JSONEncoder().encode(document)
        origin.serve("/manifests/\(key).json", .bytes(Array(data), contentType: "application/json"))
        let entity = FixtureEntity(key: key, manifestURL: origin.url("/manifests/\(key).json").absoluteString, group: group)
        return Fixture(entity: entity, document: document)
    }

    /// Serves `document` at `/manifests/<name>.json`.
    func serve(_ document: FixtureDocument, as name: String) {
        origin.serve("/manifests/\(name).json", .bytes(Array(try! JSONEncoder().encode(document)), contentType: "application/json"))
    }

    func segmentPath(_ key: String, _ output: Int, _ segment: Int, size: Int64) -> String {
        "/bytes/\(size)/\(key)/o\(output)/s\(segment).bin"
    }

    /// The bytes an output must have: its segments' contents, concatenated.
    func expectedBytes(of document: FixtureDocument, output: Int) -> [UInt8] {
        document.outputs[output].segments.flatMap { segment -> [UInt8] in
            let path = URL(string: segment.urls[0])!.path
            let size = segment.size ?? origin.size(of: path)!
            return origin.content(at: path).bytes(0..<size)
        }
    }

    func outputPath(_ entity: FixtureEntity, _ output: Int) -> String {
        root.file("fixtures/\(entity.entityKey)/out-\(output).bin")
    }

    /// Whether every output of the fixture is on disk with the right bytes.
    func outputsMatch(_ fixture: Fixture) -> Bool {
        fixture.document.outputs.indices.allSatisfy { index in
            fileBytes(outputPath(fixture.entity, index)) == expectedBytes(of: fixture.document, output: index)
        }
    }

    /// Polls the task until `condition` holds (or fails the test after `timeout`); the last
    /// snapshot (``DownloadTaskManager/waitFor(_:timeout:_:)`` of `TesseraTesting`, recording an
    /// issue when it timed out).
    @discardableResult
    func waitFor(
        _ id: DownloadTaskID, timeout: Duration = .seconds(30), sourceLocation: SourceLocation = #_sourceLocation,
        _ condition: (DownloadTaskInfo) -> Bool
    ) async -> DownloadTaskInfo? {
        let last = await manager.waitFor(id, timeout: timeout, condition)
        if last.map(condition) != true {
            Issue.record(
                "timed out waiting for \(id); last state \(last.map { "\($0.state)" } ?? "none"), error \(String(describing: last?.error))",
                sourceLocation: sourceLocation)
        }
        return last
    }

    /// Polls `condition` (events arrive asynchronously) for up to 30 seconds.
    func eventually(_ condition: () -> Bool) async -> Bool {
        await TesseraTesting.eventually(condition)
    }

    /// Whether an event satisfying `matches` has arrived (waiting up to 30 seconds for it).
    func sawEvent(_ matches: (DownloadEvent) -> Bool) async -> Bool {
        await log.eventually { $0.contains(where: matches) }
    }

    /// Polls the task until it is in `state` (or fails the test after `timeout`).
    @discardableResult
    func waitForState(_ id: DownloadTaskID, _ state: DownloadTaskState, timeout: Duration = .seconds(30), sourceLocation: SourceLocation = #_sourceLocation) async -> DownloadTaskInfo? {
        await waitFor(id, timeout: timeout, sourceLocation: sourceLocation) { $0.state == state }
    }
}

struct Fixture {
    var entity: FixtureEntity
    var document: FixtureDocument
    var id: DownloadTaskID { entity.taskID }
}

/// Starts an origin, runs `body` with a harness, and tears everything down.
func withManager(
    engine: CurlEngine.Configuration = .forTests(), cache: Bool = false,
    configure: (inout DownloadTaskManager.Configuration) -> Void = { _ in },
    _ body: (ManagerHarness) async throws -> Void
) async throws {
    try await withLoopbackOrigin { origin in
        let harness = try ManagerHarness(origin: origin, engine: engine, cache: cache, configure: configure)
        do {
            try await body(harness)
        } catch {
            await harness.tearDown()
            throw error
        }
        await harness.tearDown()
    }
}
