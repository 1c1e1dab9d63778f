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

/// A plain URL: one output. Large files on servers that serve ranges are split into pieces
/// fetched over several connections (written at their offsets); the rest is one segment.
///
/// The file name is, in order: the one given, the server's `Content-Disposition` name, the
/// URL's last path component, `index.html`. Pieces carry `If-Match` with the resource's strong
/// `ETag`, so a file that changes while its pieces download is never spliced: the server
/// answers `412` and the manager resolves again.
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
        var components = URLComponents(url: url, resolvingAgainstBaseURL: true)
        components?.fragment = nil
        let url = components?.url ?? url
        self.init(
            payload: DirectEntityPayload(url: url, fileName: fileName), entityKey: url.absoluteString,
            title: fileName ?? (url.lastPathComponent.isEmpty ? url.absoluteString : url.lastPathComponent),
            destinationDirectory: destinationDirectory)
    }

    public func resolve(in context: ResolveContext) async throws -> DownloadManifest {
        let url = payload.url
        try URLSafety.check(url, context: "the URL")
        var probe: ProbeResult?
        do {
            probe = try await context.probe(url)
        } catch {
            // A status the download itself may not meet (some servers answer HEAD badly): let
            // the segment's own request decide. Anything else is the resolve's failure.
            guard error.code == .httpStatus, !error.suggestsReResolve else { throw error }
            probe = nil
        }
        let name = payload.fileName.map { SafePath.sanitizedFileName($0) } ?? Self.fileName(for: url, probe: probe)
        let source = probe?.url ?? url
        let urls = source == url ? [url] : [source, url]
        if let probe, let size = probe.size, size > 0, probe.acceptsRanges, size >= context.splitting.minimumSize,
            context.splitting.pieceSize > 0
        {
            var headers = HTTPHeaders()
            if let validator = probe.validator, validator.hasStrongETag, let etag = validator.etag {
                headers.add(name: "If-Match", value: etag)
            } else if let validator = probe.validator, validator.lastModifiedIsStrong, let date = validator.lastModified {
                headers.add(name: "If-Unmodified-Since", value: date)
            }
            var segments: [DownloadSegment] = []
            var offset: Int64 = 0
            while offset < size {
                let length = min(context.splitting.pieceSize, size - offset)
                segments.append(DownloadSegment(
                    urls: urls, range: ByteRange(offset: offset, length: length), expectedSize: length,
                    headers: headers, offset: offset))
                offset += length
            }
            return DownloadManifest(
                title: name, outputs: [DownloadOutput(name: name, assembly: .pieces, segments: segments, expectedSize: size)],
                sourceURL: source)
        }
        let size = probe?.size
        return DownloadManifest(
            title: name,
            outputs: [DownloadOutput(name: name, segments: [DownloadSegment(urls: urls, expectedSize: size)], expectedSize: size)],
            sourceURL: source)
    }

    /// The name a plain download is saved under, as wget and aria2c choose it.
    static func fileName(for url: URL, probe: ProbeResult?) -> String {
        if let disposition = probe?.headers["Content-Disposition"], let name = ContentDisposition.fileName(disposition) {
            return SafePath.sanitizedFileName(name)
        }
        let source = probe?.url ?? url
        // A directory URL ("…/dir/") names no file, as wget and aria2c see it.
        let path = URLComponents(url: source, resolvingAgainstBaseURL: true)?.percentEncodedPath ?? ""
        let last = source.lastPathComponent  // already percent-decoded
        if !path.hasSuffix("/"), !last.isEmpty, last != "/" {
            return SafePath.sanitizedFileName(last, fallback: "index.html")
        }
        return "index.html"
    }
}
