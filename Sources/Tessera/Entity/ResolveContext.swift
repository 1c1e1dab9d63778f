import Foundation
import Logging

/// What a parser gets to resolve its entity: the shared engine (so manifests are fetched with
/// the same headers, proxy and rate limit as the segments), limits, and helpers to fetch and
/// parse JSON and XML without touching C APIs.
public struct ResolveContext: Sendable {
    /// The engine.
    public let engine: CurlEngine
    /// Header fields to send with every request (the user's `--header`s).
    public var headers: HTTPHeaders
    /// At most this many segments in a manifest; more is refused, not allocated.
    public var maxSegments: Int
    /// At most this many bytes in a fetched document.
    public var maxDocumentSize: Int
    /// 1 for the first resolve, then 2, 3, … when the manager resolves again.
    public var attempt: Int
    /// The manifest of the previous resolve, if any.
    public var previousManifest: DownloadManifest?
    /// How plain downloads are split into pieces.
    public var splitting: SplitPolicy
    /// The longest a document (a manifest, an API answer) may take to arrive, whole: a server
    /// that trickles it byte by byte (under the engine's low-speed limit or not) fails here.
    public var documentTimeout: Duration
    /// Where to log.
    public var logger: Logger

    /// Creates a context (the manager makes one per resolve; tests may make their own).
    public init(
        engine: CurlEngine, headers: HTTPHeaders = HTTPHeaders(), maxSegments: Int = 1_000_000,
        maxDocumentSize: Int = 32 << 20, attempt: Int = 1, previousManifest: DownloadManifest? = nil,
        splitting: SplitPolicy = SplitPolicy(), documentTimeout: Duration = .seconds(60),
        logger: Logger = Logger(label: "tessera.resolve")
    ) {
        self.engine = engine
        self.headers = headers
        self.maxSegments = maxSegments
        self.maxDocumentSize = maxDocumentSize
        self.attempt = attempt
        self.previousManifest = previousManifest
        self.splitting = splitting
        self.documentTimeout = documentTimeout
        self.logger = logger
    }

    /// Fetches a document into memory; any status but 2xx is an error.
    public func fetch(_ url: URL, headers extra: HTTPHeaders = HTTPHeaders()) async throws(DownloadError) -> FetchedDocument {
        try URLSafety.check(url, context: "the manifest URL")
        var fields = headers
        for field in extra { fields.replaceOrAdd(name: field.name, value: field.value) }
        let request = TransferRequest(
            url: url, headers: fields, destination: .memory(limit: maxDocumentSize), acceptsCompression: true,
            timeout: documentTimeout)
        do {
            let result = try await engine.transfer(request)
            return FetchedDocument(
                data: result.body ?? Data(), url: result.effectiveURL, status: result.status,
                contentType: result.headers["Content-Type"], headers: result.headers)
        } catch let error as DownloadError {
            if error.code == .responseTooLarge {
                throw DownloadError(.manifestTooLarge, "the document at \(url.absoluteString) is larger than \(maxDocumentSize) bytes", url: url.absoluteString)
            }
            if error.code == .timeout {
                var late = error
                late.message = "the document at \(UntrustedText.printable(url.absoluteString)) did not arrive within \(documentTimeout)"
                throw late
            }
            throw error
        } catch {
            throw DownloadError(.transport, "\(error)", url: url.absoluteString)
        }
    }

    /// Fetches and parses an XML document.
    public func fetchXML(
        _ url: URL, headers: HTTPHeaders = HTTPHeaders(), options: XMLParseOptions = XMLParseOptions()
    ) async throws(DownloadError) -> (document: SafeXMLDocument, source: FetchedDocument) {
        let source = try await fetch(url, headers: headers)
        var options = options
        options.maxDocumentSize = min(options.maxDocumentSize, maxDocumentSize)
        return (try SafeXMLDocument.parse(source.data, options: options, baseURL: source.url), source)
    }

    /// Fetches and decodes a JSON document.
    public func fetchJSON<T: Decodable>(
        _ type: T.Type, from url: URL, headers: HTTPHeaders = HTTPHeaders()
    ) async throws(DownloadError) -> (value: T, source: FetchedDocument) {
        let source = try await fetch(url, headers: headers)
        return (try JSONManifest.decode(type, from: source.data, limit: maxDocumentSize), source)
    }

    /// Asks for a resource's headers: `HEAD`, or a one-byte `GET` when the server refuses `HEAD`.
    public func probe(_ url: URL, headers extra: HTTPHeaders = HTTPHeaders()) async throws(DownloadError) -> ProbeResult {
        try URLSafety.check(url, context: "the URL")
        var fields = headers
        for field in extra { fields.replaceOrAdd(name: field.name, value: field.value) }
        do {
            let head = try await engine.transfer(TransferRequest(url: url, method: .head, headers: fields, destination: .discard))
            return ProbeResult(
                url: head.effectiveURL, size: head.resourceLength, acceptsRanges: head.acceptsRanges,
                validator: head.validator, headers: head.headers)
        } catch let error as DownloadError where error.code == .httpStatus && [400, 403, 405, 501].contains(error.httpStatus ?? 0) {
            // Some servers (and signed URLs) refuse HEAD: ask for the first byte instead.
            do {
                let first = try await engine.transfer(TransferRequest(
                    url: url, range: ByteRange(offset: 0, length: 1), headers: fields, destination: .discard))
                let size = first.status == 206 ? first.resourceLength : first.bytesReceived
                return ProbeResult(
                    url: first.effectiveURL, size: size, acceptsRanges: first.status == 206,
                    validator: first.validator, headers: first.headers)
            } catch let error as DownloadError where error.code == .rangeNotSupported {
                // Neither HEAD nor ranges: the size is learnt when the body comes.
                return ProbeResult(url: url, size: nil, acceptsRanges: false, validator: nil, headers: HTTPHeaders())
            } catch let error as DownloadError {
                throw error
            } catch {
                throw DownloadError(.transport, "\(error)", url: url.absoluteString)
            }
        } catch let error as DownloadError {
            throw error
        } catch {
            throw DownloadError(.transport, "\(error)", url: url.absoluteString)
        }
    }
}

/// A document fetched by ``ResolveContext/fetch(_:headers:)``.
public struct FetchedDocument: Sendable {
    /// The body (decoded if the server compressed it).
    public var data: Data
    /// The URL after redirects: the base for the document's relative URLs.
    public var url: URL
    /// The status.
    public var status: Int
    /// The `Content-Type`.
    public var contentType: String?
    /// Every response header.
    public var headers: HTTPHeaders

    /// The body as UTF-8 text (invalid bytes replaced).
    public var text: String { String(decoding: data, as: UTF8.self) }
}

/// What a probe learnt about a resource.
public struct ProbeResult: Sendable {
    /// The URL after redirects.
    public var url: URL
    /// The size, when the server told it.
    public var size: Int64?
    /// Whether byte ranges are served.
    public var acceptsRanges: Bool
    /// The version's validator.
    package var validator: ResourceValidator?
    /// Every response header.
    public var headers: HTTPHeaders
}

/// How a single file is split over several connections (aria2's `--min-split-size`, `-k` and
/// `--max-connection-per-server`), decided by its first response: no probe is sent.
///
/// The download starts at once with one request for the whole file. When its response shows a
/// file of at least ``minimumSize`` whose ranges may be asked for (the server serves ranges and
/// the version has a strong validator), more connections take over parts of it as segment
/// slots free up; a connection that finishes takes half of what the busiest one has left.
public struct SplitPolicy: Sendable, Hashable {
    /// Files smaller than this use one connection.
    public var minimumSize: Int64 = 20 << 20
    /// The smallest range a connection is given: a rest is split only when both halves are at
    /// least this large.
    public var pieceSize: Int64 = 4 << 20
    /// At most this many connections for one file.
    public var maxConnections: Int = 8
    /// A connection that finishes early takes the end of another's rest only when that rest would
    /// take at least this many seconds at its connection's speed (cutting a transfer short costs
    /// the bytes the server has already sent past the cut, and a new request); it takes the
    /// share that makes both end together at their speeds. A rest that would take less at the
    /// speed of a connection that finished is looked at again a quarter of this later before it
    /// is split, and split then only if still slow since: a connection crowded out of a shared
    /// link by its siblings speeds up as they end.
    public var resplitMinimumSeconds: Double = 2

    /// Under a rate limit, a file is asked for in ranges of at least this many bytes (see
    /// ``chunk(rate:roundTrip:)``).
    public var minimumChunk: Int64 = 1 << 20

    /// The largest range asked for at once under a rate limit of `rate` bytes per second on a
    /// connection whose round trip takes `roundTrip` (unknown before the first response).
    ///
    /// A server writes ahead whatever its socket takes (on Linux about 4 MiB per connection,
    /// whatever the reader's window), and what it wrote ahead is lost when the download stops
    /// (a kill, a pause): with ranges of this size, no more than one range is ever ahead. A range
    /// lasts 16 round trips at the rate, so the pause between two ranges costs at most a
    /// sixteenth of the speed; at least ``minimumChunk``, at most 64 MiB.
    public func chunk(rate: Int64, roundTrip: Duration?) -> Int64 {
        let seconds = roundTrip.map { Double($0.components.seconds) + Double($0.components.attoseconds) / 1e18 } ?? 0
        let bytes = Double(max(0, rate)) * seconds * 16
        guard bytes.isFinite else { return 64 << 20 }
        return min(64 << 20, max(minimumChunk, Int64(min(bytes, Double(Int64.max / 2)))))
    }

    /// Creates a policy.
    public init(
        minimumSize: Int64 = 20 << 20, pieceSize: Int64 = 4 << 20, maxConnections: Int = 8, resplitMinimumSeconds: Double = 2
    ) {
        self.minimumSize = minimumSize
        self.pieceSize = pieceSize
        self.maxConnections = maxConnections
        self.resplitMinimumSeconds = resplitMinimumSeconds
    }

    /// How many connections share `rest` bytes of a file (from its first response, or from
    /// where an earlier run stopped): one below ``minimumSize`` or under a global rate limit
    /// (`rateLimited`: the limit, not the connections, sets the speed, and every connection
    /// open when the process is killed loses what its socket buffers held), else one per
    /// ``pieceSize``, up to ``maxConnections``.
    public func connections(forRest rest: Int64, rateLimited: Bool = false) -> Int {
        guard maxConnections > 1, rest >= minimumSize, !rateLimited else { return 1 }
        return Int(min(Int64(maxConnections), max(1, rest / max(1, pieceSize))))
    }
}
