import Foundation
import Tessera
import TesseraTesting

/// The manifest the durable scenario's entity reads: segment URLs of one output.
struct SegmentListDocument: Codable, Sendable {
    var name: String
    var segments: [String]
    var size: Int64
    /// Each segment's SHA-256 (hex), when the segments are checked (and go to the cache).
    var sha256: [String]?
}

/// An entity whose manifest is a list of segment URLs, concatenated into one output.
final class SegmentListEntity: PayloadEntity<String>, DownloadParserProtocol, @unchecked Sendable {
    override class var entityType: String { "segment-list" }

    func resolve(in context: ResolveContext) async throws -> DownloadManifest {
        let (document, source) = try await context.fetchJSON(SegmentListDocument.self, from: URL(string: payload)!)
        let segments = try document.segments.enumerated().map { index, reference in
            try DownloadSegment(
                url: URLSafety.resolve(reference, against: source.url), expectedSize: document.size,
                checksum: document.sha256.map { try Checksum(.sha256, hex: $0[index]) })
        }
        return DownloadManifest(outputs: [DownloadOutput(name: document.name, segments: segments)])
    }
}

/// `durable STORE ROOT MANIFEST-URL`: restores the store; starts the entity if the store does
/// not know it; runs until the task is finished. Killed at random moments by the test, or at a
/// crash point (`TESSERA_CRASH_AT`). Segments with checksums go to a cache beside the store.
func durableScenario(store path: String, root: String, manifest: String) async throws {
    let store = try SQLiteDownloadStore(path: path)
    let registry = EntityRegistry()
    registry.register(SegmentListEntity.self)
    var configuration = DownloadTaskManager.Configuration(downloadRoot: root)
    configuration.progressInterval = .milliseconds(100)
    configuration.diskSpace = nil
    let engine = try CurlEngine(configuration: makeEngineConfiguration())
    let cache = try SegmentCache(directory: (path as NSString).deletingLastPathComponent + "/cache")
    let manager = DownloadTaskManager(configuration: configuration, engine: engine, store: store, cache: cache, registry: registry)
    let report = try await manager.restore()
    let entity = SegmentListEntity(payload: manifest, entityKey: "durable")
    let restored = report.restored.contains { $0.id == entity.taskID }
    if !restored { try await manager.start(entity) }
    // Until the task is finished (the test kills the process long before, or gives up later).
    guard let info = await manager.waitFor(entity.taskID, timeout: .seconds(600), { $0.state.isFinal }), info.state.isFinal else {
        fail("the task did not finish")
    }
    await manager.flushStore()
    emit(["state": "\(info.state)", "restored": restored, "error": info.error.map { "\($0)" } ?? ""])
    await engine.shutdown()
}
