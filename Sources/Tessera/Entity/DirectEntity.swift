import Foundation

/// The state of a ``DirectEntity``.
public struct DirectEntityPayload: Codable, Sendable, Hashable {
    /// The URL.
    public var url: URL
    /// The file name to use instead of the server's or the URL's.
    public var fileName: String?

    /// Creates a payload.
    public init(url: URL, fileName: String? = nil) {
        self.url = url
        self.fileName = fileName
    }
}

/// A plain URL: one output, fetched without a probe.
///
/// Resolving costs nothing: the manifest is the URL itself. The first GET's response gives the
/// file's name (the given one, else the server's `Content-Disposition` name, else the last
/// component of the URL after redirects, else `index.html`), its size and its version; when it
/// shows a large file whose ranges may be asked for, the manager shares the rest of it over
/// more connections (``SplitPolicy``). Ranges carry `If-Match` with the version's strong `ETag`,
/// so a file that changes while it downloads is never spliced.
public final class DirectEntity: PayloadEntity<DirectEntityPayload>, DownloadParserProtocol, @unchecked Sendable {
    public override class var entityType: String { "direct" }

    /// Accepts any http or https URL, with the lowest priority.
    public static let matcher = EntityMatcher(
        plugin: "direct", summary: "any http or https URL, saved under its own file name", priority: 0,
        rules: [.anyURL]
    ) { input, _ in
        guard let url = input.url else {
            throw DownloadError(.noMatchingEntity, "\"\(input.text)\" is not an http or https URL")
        }
        return DirectEntity(url: url, destinationDirectory: input.destinationDirectory)
    }

    /// Creates an entity for `url` (its fragment, which no server sees, is dropped).
    public convenience init(url: URL, fileName: String? = nil, destinationDirectory: String = "") {
        // Without its fragment (most URLs have none: not rebuilt then).
        var url = url
        if url.fragment != nil || url.baseURL != nil {
            var components = URLComponents(url: url, resolvingAgainstBaseURL: true)
            components?.fragment = nil
            url = components?.url ?? url
        }
        let key = url.absoluteString
        // (The last path component is read once: Foundation parses and decodes it at each call.)
        let title = fileName ?? { let last = ResponseNaming.lastPathComponent(of: url); return last.isEmpty ? key : last }()
        self.init(
            payload: DirectEntityPayload(url: url, fileName: fileName), entityKey: key, title: title,
            destinationDirectory: destinationDirectory)
    }

    /// The payload's JSON, written directly (as `JSONEncoder` with sorted keys would read it):
    /// a list of thousands of URLs costs no encoder run per entity.
    public override func encodePayload() throws -> Data {
        var json = JSONText(capacity: 32 + (payload.fileName?.utf8.count ?? 0) + entityKey.utf8.count)
        json.raw("{")
        if let fileName = payload.fileName {
            json.raw(#""fileName":"#)
            json.string(fileName)
            json.raw(",")
        }
        json.raw(#""url":"#)
        json.string(payload.url.absoluteString)
        json.raw("}")
        return Data(json.bytes)
    }

    /// A plain URL resolves to itself: a 404 is final, there is nothing fresher to ask for.
    public var resolvesToFreshURLs: Bool { false }

    public func resolve(in context: ResolveContext) async throws -> DownloadManifest {
        try immediateManifest()
    }
}

extension DirectEntity: ResolvesImmediately {
    func immediateManifest() throws -> DownloadManifest {
        let url = payload.url
        try URLSafety.check(url, context: "the URL")
        let given = payload.fileName.map { SafePath.sanitizedFileName($0) }
        let name = given ?? ResponseNaming.fileName(url: url)
        let output = DownloadOutput(
            name: name, segments: [DownloadSegment(url: url)], isNamedByResponse: given == nil)
        return DownloadManifest(title: name, outputs: [output], sourceURL: url)
    }
}
