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

/// Parses a document as if fetched from `url`, and checks that ``MetalinkStreamReader`` reads
/// it exactly as the tree does (every document the suites parse is read both ways).
func parse(
    _ xml: String, url: String = "https://example.com/files/example.meta4", maxFiles: Int = 1_000_000,
    sourceLocation: SourceLocation = #_sourceLocation
) throws -> MetalinkDocument {
    let data = Data(xml.utf8), url = URL(string: url)!
    expectStreamReadsLikeTree(data, url: url, maxFiles: maxFiles, sourceLocation: sourceLocation)
    return try MetalinkDocument.parse(data, url: url, maxFiles: maxFiles)
}

/// The manifest of the file `name` (default: the first) of `xml`.
func manifest(
    _ xml: String, name: String? = nil, url: String = "https://example.com/files/example.meta4", maxSegments: Int = 1_000_000,
    splitting: SplitPolicy = SplitPolicy(), preferredLocations: [String] = []
) throws -> DownloadManifest {
    let document = try parse(xml, url: url)
    expectStreamReadsLikeTree(Data(xml.utf8), url: URL(string: url)!, maxPieces: maxSegments)
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


/// How a document reads, for comparing the tree (``MetalinkDocument``) and the stream
/// (``MetalinkStreamReader``): the document's error, or its entries and each file's details or
/// error; and each name's file as a resolve reads it.
struct MetalinkReading: Equatable, CustomStringConvertible {
    /// An error as compared: code, message and URL.
    struct Failure: Equatable, CustomStringConvertible {
        var code: DownloadError.Code
        var message: String
        var url: String?

        init(_ error: DownloadError) {
            (code, message, url) = (error.code, error.message, error.url)
        }

        var description: String { "\(code): \(message)" + (url.map { " (\($0))" } ?? "") }
    }

    /// One file's details or error.
    enum File: Equatable {
        case read(MetalinkFile)
        case failed(Failure)

        init(_ body: () throws(DownloadError) -> MetalinkFile) {
            do {
                self = .read(try body())
            } catch {
                self = .failed(Failure(error))
            }
        }
    }

    var failure: Failure?
    var version: MetalinkDocument.Version?
    var entries: [MetalinkDocument.Entry] = []
    var files: [File] = []
    /// `file(named:)` of each name, when the document reads.
    var named: [String: File] = [:]

    var description: String {
        if let failure { return "refused: \(failure)" }
        return "\(version?.rawValue ?? "?") \(entries.count) files: "
            + zip(entries, files).map { "\($0.name)@\($0.line) \($1)" }.joined(separator: "; ")
            + "; named: \(named.sorted { $0.key < $1.key })"
    }

    /// As the tree reads `data`.
    static func tree(_ data: Data, url: URL, maxFiles: Int = 1_000_000, maxPieces: Int = 1_000_000) -> MetalinkReading {
        var reading = MetalinkReading()
        do throws(DownloadError) {
            let document = try MetalinkDocument.parse(data, url: url, maxFiles: maxFiles)
            reading.version = document.version
            reading.entries = document.entries
            for index in document.entries.indices {
                reading.files.append(File { () throws(DownloadError) in try document.file(at: index, maxPieces: maxPieces) })
            }
            for name in Set(document.entries.map(\.name)) {
                reading.named[name] = File { () throws(DownloadError) in try document.file(named: name, maxPieces: maxPieces) }
            }
        } catch {
            reading = MetalinkReading(failure: Failure(error))
        }
        return reading
    }

    /// As the stream reads `data`: every file with ``MetalinkStreamReader/next()``, and each
    /// name with a reader of its own and ``MetalinkStreamReader/file(named:)``.
    static func stream(_ data: Data, url: URL, maxFiles: Int = 1_000_000, maxPieces: Int = 1_000_000) -> MetalinkReading {
        var reading = MetalinkReading()
        do throws(DownloadError) {
            let reader = try MetalinkStreamReader(data: data, url: url, maxFiles: maxFiles, maxPieces: maxPieces)
            while let item = try reader.next() {
                reading.entries.append(item.entry)
                reading.files.append(File { () throws(DownloadError) in try item.file.get() })
            }
            reading.version = reader.version
            for name in Set(reading.entries.map(\.name)) {
                reading.named[name] = File { () throws(DownloadError) in
                    try MetalinkStreamReader(data: data, url: url, maxFiles: maxFiles, maxPieces: maxPieces).file(named: name)
                }
            }
        } catch {
            reading = MetalinkReading(failure: Failure(error))
        }
        return reading
    }
}

/// Expects ``MetalinkStreamReader`` to read `data` exactly as ``MetalinkDocument`` does: the same
/// files (values and errors), or the same error for the document.
func expectStreamReadsLikeTree(
    _ data: Data, url: URL, maxFiles: Int = 1_000_000, maxPieces: Int = 1_000_000, sourceLocation: SourceLocation = #_sourceLocation
) {
    let tree = MetalinkReading.tree(data, url: url, maxFiles: maxFiles, maxPieces: maxPieces)
    let stream = MetalinkReading.stream(data, url: url, maxFiles: maxFiles, maxPieces: maxPieces)
    #expect(stream == tree, "the stream reads \(String(decoding: data.prefix(300), as: UTF8.self))… differently", sourceLocation: sourceLocation)
}
