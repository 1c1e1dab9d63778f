import Foundation
import PlayurlEntity
import Tessera
import TesseraTestSupport
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

/// `PLUGIN:KEY=VALUE` arguments as `PluginArguments`.
func pluginArguments(_ texts: [String]) throws -> PluginArguments {
    var arguments = PluginArguments()
    for text in texts { try arguments.add(text) }
    return arguments
}

/// The shared plugin harness, with the playurl plugin registered.
typealias PlayurlHarness = PluginHarness

extension PluginHarness {
    /// The entities of `fixture`'s inputs (or of `inputs`), made through the registry.
    func entities(_ fixture: PlayurlFixture, inputs: [String]? = nil) async throws -> [DownloadBaseEntity] {
        let arguments = try pluginArguments(fixture.pluginArguments)
        var made: [DownloadBaseEntity] = []
        for text in inputs ?? fixture.inputs {
            made += try await entities(for: EntityInput(text, arguments: arguments))
        }
        return made
    }

    /// Polls the task until it is finished (completed, failed, invalid, removed); fails the test
    /// after `timeout`.
    func waitUntilFinished(
        _ id: DownloadTaskID, timeout: Duration = .seconds(60), sourceLocation: SourceLocation = #_sourceLocation
    ) async -> DownloadTaskInfo? {
        let snapshots = await finalSnapshots(of: [id], timeout: timeout)
        expectFinal(snapshots, of: [id], sourceLocation: sourceLocation)
        return snapshots[id]
    }
}

/// Starts an origin, runs `body` with a harness, and tears both down, also on error.
func withPlayurlHarness(_ body: (PlayurlHarness) async throws -> Void) async throws {
    try await withPluginHarness(name: "playurl-e2e", register: PlayurlEntity.register(in:), body)
}
