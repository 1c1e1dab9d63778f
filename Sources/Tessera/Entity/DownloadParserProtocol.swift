/// What makes an entity downloadable: turning its key into a manifest.
///
/// The manager calls ``resolve(in:)`` before the first download and again whenever the URLs
/// look stale (HTTP 403, 404, 410 or 412 on every mirror, or the manifest's expiry passed), so
/// signed URLs are refreshed the way ZZDownloader and yt-dlp refresh them. Fetch documents
/// through the ``ResolveContext`` (same engine, headers, proxy and rate limit as the download)
/// and parse them with its XML and JSON helpers. Throw a ``DownloadError`` with
/// ``DownloadError/Code/manifestInvalid`` for a document that cannot be used, quoting what the
/// server said.
public protocol DownloadParserProtocol: DownloadBaseEntity {
    /// Resolves the entity into a manifest.
    func resolve(in context: ResolveContext) async throws -> DownloadManifest

    /// Whether resolving again can give other URLs (see the default, `true`).
    var resolvesToFreshURLs: Bool { get }
}

extension DownloadParserProtocol {
    /// Whether resolving again can give other URLs than the last time (signed URLs that expire,
    /// an API that hands out fresh ones): the manager then resolves again when every URL of a
    /// segment is refused as stale (403, 404, 410). `true` by default; an entity whose URLs are
    /// fixed (a plain URL) says `false`, and such a refusal fails the task at once.
    public var resolvesToFreshURLs: Bool { true }
}

/// An entity whose manifest needs no request, no file and no wait (a plain URL): the manager
/// names its outputs and asks for its first slots when it launches the run, which then neither
/// resolves nor waits for the manager before its first transfer.
protocol ResolvesImmediately: DownloadParserProtocol {
    /// The manifest ``DownloadParserProtocol/resolve(in:)`` would give.
    func immediateManifest() throws -> DownloadManifest
}
