import Foundation
import Tessera
import TesseraTesting
import Testing

@testable import DASHEntity

/// The URL hand-written MPDs are "served" from in parser tests.
let mpdURL = URL(string: "https://cdn.example.com/vod/show/stream.mpd")!

/// Parses `text` as the MPD at `url` with the given selector and returns the manifest.
func manifest(
    _ text: String, url: URL = mpdURL, format: String = "best", maxSegments: Int = 1_000_000
) throws -> DownloadManifest {
    let document = try XMLDocument.parse(text)
    let entity = DASHEntity(url: url, format: try FormatSelector(format))
    return try entity.manifest(from: document, url: url, maxSegments: maxSegments)
}

/// A manifest's output by representation id.
func output(_ manifest: DownloadManifest, _ id: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> DownloadOutput {
    try #require(manifest.outputs.first { $0.media?.identifier == id }, "no output for \(id)", sourceLocation: sourceLocation)
}

/// The primary URL of every segment of an output, as strings.
func urls(_ output: DownloadOutput) -> [String] { output.segments.map { $0.urls.first?.absoluteString ?? "-" } }

/// Wraps AdaptationSets in a static one-period MPD in the default DASH namespace.
func mpd(duration: String = "PT10S", periodAttributes: String = "", _ body: String) -> String {
    """
    <?xml version="1.0" encoding="UTF-8"?>
    <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="\(duration)" minBufferTime="PT2S"
         profiles="urn:mpeg:dash:profile:isoff-live:2011">
      <Period id="0"\(periodAttributes.isEmpty ? "" : " " + periodAttributes)>
    \(body)
      </Period>
    </MPD>
    """
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

func fileBytes(_ path: String) -> [UInt8]? {
    FileManager.default.contents(atPath: path).map { [UInt8]($0) }
}

/// Whether the file at `path` holds exactly `expected`; records where it differs (not the bytes).
func sameBytes(_ path: String, _ expected: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) -> Bool {
    guard let actual = fileBytes(path) else {
        Issue.record("\(path) is missing", sourceLocation: sourceLocation)
        return false
    }
    guard actual != expected else { return true }
    let first = zip(actual, expected).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? min(actual.count, expected.count)
    Issue.record("\(path): \(actual.count) bytes, expected \(expected.count); first difference at byte \(first)", sourceLocation: sourceLocation)
    return false
}

/// An origin, an engine and a manager (with a segment cache) over a temporary download root,
/// with the DASH plugin registered.
struct DASHHarness {
    let origin: LoopbackOrigin
    let engine: CurlEngine
    let manager: DownloadTaskManager
    let registry: EntityRegistry
    let root: TemporaryDirectory

    init(origin: LoopbackOrigin) throws {
        self.origin = origin
        root = TemporaryDirectory("dash-e2e")
        registry = EntityRegistry()
        DASHEntity.register(in: registry)
        engine = try CurlEngine(configuration: CurlEngine.Configuration.forTests())
        var configuration = DownloadTaskManager.Configuration(downloadRoot: root.file("downloads"))
        configuration.retry = RetryPolicy(maxAttempts: 3, baseDelay: .milliseconds(10), maxDelay: .milliseconds(50))
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

    /// Starts the entity for `input` and waits (at most `timeout`) until its task is final.
    func download(
        _ input: String, format: String? = nil, timeout: Duration = .seconds(30), sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> DownloadTaskInfo {
        let id = try await manager.start(try await entity(input, format: format)).id
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

    /// The bytes of `size` generated bytes at `path` on the origin, from `range` when given.
    func bytes(_ path: String, _ range: Range<Int64>) -> [UInt8] { origin.content(at: path).bytes(range) }

    func tearDown() async {
        await manager.stopAll()
        await engine.shutdown()
        root.cleanUp()
    }
}

/// Starts an origin and a harness, runs `body`, and tears everything down.
func withHarness(_ body: (DASHHarness) async throws -> Void) async throws {
    try await withLoopbackOrigin { origin in
        let harness = try DASHHarness(origin: origin)
        do {
            try await body(harness)
        } catch {
            await harness.tearDown()
            throw error
        }
        await harness.tearDown()
    }
}
