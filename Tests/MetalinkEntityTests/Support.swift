import Foundation
import MetalinkEntity
import Tessera
import TesseraTestSupport
import TesseraTesting
import Testing

/// The shared plugin harness, with the Metalink plugin registered.
typealias MetalinkHarness = PluginHarness

extension PluginHarness {
    /// Expands `input` through the registry and starts every entity.
    @discardableResult
    func start(_ input: String, arguments: [String] = []) async throws -> [DownloadTaskInfo] {
        var pluginArguments = PluginArguments()
        for argument in arguments { try pluginArguments.add(argument) }
        var infos: [DownloadTaskInfo] = []
        for entity in try await entities(for: EntityInput(input, arguments: pluginArguments)) {
            infos.append(try await manager.start(entity))
        }
        return infos
    }

    /// Polls until every task is final (or records an issue after `timeout`); the final snapshots.
    func waitUntilFinal(
        _ ids: [DownloadTaskID], timeout: Duration = .seconds(60), sourceLocation: SourceLocation = #_sourceLocation
    ) async -> [DownloadTaskID: DownloadTaskInfo] {
        let snapshots = await finalSnapshots(of: ids, timeout: timeout)
        expectFinal(snapshots, of: ids, sourceLocation: sourceLocation)
        return snapshots
    }
}

/// Starts an origin and a harness, runs `body`, and tears everything down. Retries follow the
/// manager's default policy, their delays not waited out.
func withMetalinkHarness(
    configure: (inout DownloadTaskManager.Configuration) -> Void = { _ in },
    _ body: (MetalinkHarness) async throws -> Void
) async throws {
    try await withPluginHarness(
        name: "metalink-e2e", register: MetalinkEntity.register(in:),
        configure: { configuration in
            configuration.retry = RetryPolicy()
            configuration.sleeper = QuickSleeper()
            configure(&configuration)
        }, body)
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

