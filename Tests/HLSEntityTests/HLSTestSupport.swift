import Foundation
import HLSEntity
import Tessera
import TesseraTestSupport
import TesseraTesting
import Testing

func fileBytes(_ path: String) -> [UInt8]? {
    fileContents(path)
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

/// The shared plugin harness, with the HLS plugin registered.
typealias HLSHarness = PluginHarness

extension PluginHarness {
    /// Makes the entity for `input` through the registry, as a command line does.
    func entity(_ input: String, format: String? = nil, contentType: String? = nil) async throws -> DownloadBaseEntity {
        let entities = try await entities(for: EntityInput(input, contentType: contentType, format: format))
        try #require(entities.count == 1)
        return entities[0]
    }

    /// Starts `entity` and waits (at most `timeout`) until its task is completed, failed or invalid.
    func download(_ entity: DownloadBaseEntity, timeout: Duration = .seconds(60), sourceLocation: SourceLocation = #_sourceLocation)
        async throws -> DownloadTaskInfo
    {
        let id = try await manager.start(entity).id
        let snapshots = await finalSnapshots(of: [id], timeout: timeout)
        expectFinal(snapshots, of: [id], sourceLocation: sourceLocation)
        return try #require(snapshots[id], sourceLocation: sourceLocation)
    }

    func download(_ input: String, format: String? = nil) async throws -> DownloadTaskInfo {
        try await download(try await entity(input, format: format))
    }
}

extension PluginHarness {
    /// A harness with the HLS plugin registered, on `origin`.
    init(origin: LoopbackOrigin, configure: (inout DownloadTaskManager.Configuration) -> Void = { _ in }) throws {
        try self.init(origin: origin, name: "hls-e2e", register: HLSEntity.register(in:), configure: configure)
    }
}

/// Starts an origin and a harness, runs `body`, and tears everything down.
func withHarness(_ body: (HLSHarness) async throws -> Void) async throws {
    try await withPluginHarness(name: "hls-e2e", register: HLSEntity.register(in:), body)
}

