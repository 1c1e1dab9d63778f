// A user's entity: this file sees only Tessera's public API (no @testable import).
import Foundation
import Tessera

/// The JSON document a `FixtureEntity` resolves.
struct FixtureDocument: Codable, Sendable {
    struct Output: Codable, Sendable {
        var name: String
        var segments: [Segment]
        var sha256: String?
        var assembly: String?
        /// What it holds (`video`, `audio`, …) and its language, for merging.
        var kind: String?
        var language: String?
    }

    struct Segment: Codable, Sendable {
        var urls: [String]
        var size: Int64?
        var sha256: String?
        var offset: Int64?
        var range: [Int64]?
    }

    var title: String
    var outputs: [Output]
    /// Seconds until the URLs expire, for the first resolve only.
    var expiresInSeconds: Double?
    /// Whether the outputs are alternatives of one another (a selector's `all`).
    var alternatives: Bool?
}

struct FixtureEntityPayload: Codable, Sendable {
    /// The manifest; `{attempt}` is replaced by the resolve attempt (1, 2, …).
    var manifestURL: String
}

/// Resolves a JSON manifest served by the loopback origin.
final class FixtureEntity: PayloadEntity<FixtureEntityPayload>, DownloadParserProtocol, @unchecked Sendable {
    override class var entityType: String { "fixture" }

    convenience init(key: String, manifestURL: String, group: String? = nil) {
        self.init(
            payload: FixtureEntityPayload(manifestURL: manifestURL), entityKey: key, title: "fixture \(key)",
            aggregationKey: group, destinationDirectory: "fixtures/\(key)")
    }

    func resolve(in context: ResolveContext) async throws -> DownloadManifest {
        let text = payload.manifestURL.replacingOccurrences(of: "{attempt}", with: "\(context.attempt)")
        guard let url = URL(string: text) else { throw DownloadError(.manifestInvalid, "bad manifest URL \(text)") }
        let (document, source) = try await context.fetchJSON(FixtureDocument.self, from: url)
        let outputs = try document.outputs.map { output in
            DownloadOutput(
                name: output.name,
                assembly: output.assembly.flatMap(DownloadOutput.Assembly.init(rawValue:)) ?? .concatenated,
                segments: try output.segments.map { segment in
                    DownloadSegment(
                        urls: try segment.urls.map { try URLSafety.resolve($0, against: source.url) },
                        range: segment.range.map { ByteRange(offset: $0[0], length: $0[1]) },
                        expectedSize: segment.size,
                        checksum: try segment.sha256.map { try Checksum(.sha256, hex: $0) },
                        offset: segment.offset)
                },
                checksum: try output.sha256.map { try Checksum(.sha256, hex: $0) },
                media: output.kind.flatMap(MediaInfo.Kind.init(rawValue:)).map {
                    MediaInfo(kind: $0, identifier: (output.name as NSString).deletingPathExtension, language: output.language)
                })
        }
        let expiry = context.attempt == 1 ? document.expiresInSeconds.map { Date().addingTimeInterval($0) } : nil
        var manifest = DownloadManifest(title: document.title, outputs: outputs, expiresAt: expiry, sourceURL: source.url)
        manifest.selectsAlternatives = document.alternatives ?? false
        return manifest
    }
}
