import Foundation

/// One HTTP transfer for ``CurlEngine``: what to fetch, which bytes, and where they go.
public struct TransferRequest: Sendable {
    /// The request method.
    public enum Method: Sendable, Hashable {
        /// Fetch the body.
        case get
        /// Fetch the headers only, to learn the size, validators and range support.
        case head
    }

    /// Where the body goes.
    public enum Destination: Sendable, Hashable {
        /// Into the file at `path`, starting at `offset`. The file and its parent directory are
        /// created when missing; the file is opened only when a body is coming, so an error
        /// response never leaves an empty file behind.
        ///
        /// `ownsTail` says the transfer owns the file from `offset` to its end: when the server
        /// restarts the body (a `200` instead of a `206`) the file is cut at `offset`, and at the
        /// end anything past the last byte written is cut. Pieces written into a shared file at
        /// their offsets pass `false`.
        case file(path: String, offset: Int64 = 0, ownsTail: Bool = true)
        /// Into memory, refusing bodies larger than `limit` bytes (manifests, API answers).
        case memory(limit: Int)
        /// Nowhere: the body is read and dropped (probing, warming a connection).
        case discard
    }

    /// The URL; only `http` and `https` are accepted, also for redirects.
    public var url: URL
    /// The method.
    public var method: Method
    /// The bytes wanted, or `nil` for the whole resource.
    public var range: ByteRange?
    /// Extra header fields, sent after the engine's defaults (which they replace by name).
    public var headers: HTTPHeaders
    /// Where the body goes.
    public var destination: Destination
    /// What an earlier attempt left on disk: the engine asks only for the rest, with
    /// `If-Range` carrying the validator, and starts over cleanly if the server's content changed.
    public var resume: TransferCheckpoint?
    /// The length the body of the requested span must have; a different length fails with
    /// ``DownloadError/Code/sizeMismatch``.
    public var expectedLength: Int64?
    /// A rate limit for this transfer alone, in bytes per second, on top of the global one.
    public var rateLimit: Int64?
    /// Whether a compressed response (`Accept-Encoding`) is welcome and decoded. Only for
    /// memory destinations: byte ranges and sizes refer to the identity encoding.
    public var acceptsCompression: Bool
    /// Whether a partial body without a validator may be resumed anyway. Off by default: without
    /// an `ETag` or a strong `Last-Modified`, two versions could be spliced, so the body is
    /// fetched again from its first byte.
    public var resumesWithoutValidator: Bool
    /// A limit on the whole transfer, on top of the engine's connect and low-speed limits.
    public var timeout: Duration?
    /// For a file the transfer owns from its offset on: record the response's validator on the
    /// file itself (an extended attribute) as soon as the body starts, so that after a crash
    /// ``TransferCheckpoint/recovered(fromFileAt:offset:)`` can resume from every byte on disk,
    /// not only from the last checkpoint a store wrote. Quietly does nothing on file systems
    /// without user extended attributes.
    public var recordsValidator: Bool = false

    /// Creates a request.
    public init(
        url: URL,
        method: Method = .get,
        range: ByteRange? = nil,
        headers: HTTPHeaders = HTTPHeaders(),
        destination: Destination,
        resume: TransferCheckpoint? = nil,
        expectedLength: Int64? = nil,
        rateLimit: Int64? = nil,
        acceptsCompression: Bool = false,
        resumesWithoutValidator: Bool = false,
        timeout: Duration? = nil
    ) {
        self.url = url
        self.method = method
        self.range = range
        self.headers = headers
        self.destination = destination
        self.resume = resume
        self.expectedLength = expectedLength
        self.rateLimit = rateLimit
        self.acceptsCompression = acceptsCompression
        self.resumesWithoutValidator = resumesWithoutValidator
        self.timeout = timeout
    }

    /// The whole resource (or `range` of it) into a file.
    public static func download(
        _ url: URL, to path: String, range: ByteRange? = nil, resume: TransferCheckpoint? = nil
    ) -> TransferRequest {
        TransferRequest(url: url, range: range, destination: .file(path: path), resume: resume)
    }

    /// A small resource into memory, decoded if the server compressed it.
    public static func fetch(_ url: URL, limit: Int = 16 << 20, headers: HTTPHeaders = HTTPHeaders()) -> TransferRequest {
        TransferRequest(url: url, headers: headers, destination: .memory(limit: limit), acceptsCompression: true)
    }

    /// Throws ``DownloadError/Code/invalidRequest`` or ``DownloadError/Code/unsupportedScheme``
    /// for a request that must not reach the network.
    public func validate() throws(DownloadError) {
        let text = url.absoluteString
        guard let scheme = url.scheme?.lowercased() else {
            throw DownloadError(.invalidRequest, "the URL has no scheme", url: text)
        }
        guard scheme == "http" || scheme == "https" else {
            throw DownloadError(.unsupportedScheme, "only http and https are supported, not \(scheme)", url: text)
        }
        guard let host = url.host, !host.isEmpty else {
            throw DownloadError(.invalidRequest, "the URL has no host", url: text)
        }
        if text.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F }) {
            throw DownloadError(.invalidRequest, "the URL contains white space or a control character", url: text)
        }
        if let field = headers.firstInvalidField {
            throw DownloadError(.invalidRequest, "the header field \"\(field.name)\" cannot be sent", url: text)
        }
        if case .memory(let limit) = destination, limit < 0 {
            throw DownloadError(.invalidRequest, "a memory destination needs a limit of at least zero", url: text)
        }
        if case .file(let path, let offset, _) = destination {
            guard !path.isEmpty, !path.utf8.contains(0), offset >= 0 else {
                throw DownloadError(.invalidRequest, "the destination path is empty or invalid", url: text)
            }
        }
        if let resume, resume.bytesWritten < 0 {
            throw DownloadError(.invalidRequest, "a checkpoint cannot hold a negative byte count", url: text)
        }
        if acceptsCompression, case .file = destination, range != nil || resume != nil {
            throw DownloadError(
                .invalidRequest, "compressed responses cannot be combined with byte ranges or resume", url: text)
        }
    }
}

/// What a finished transfer produced.
public struct TransferResult: Sendable {
    /// The status of the final response (after redirects).
    public var status: Int
    /// The URL of the final response, after redirects.
    public var effectiveURL: URL
    /// The header fields of the final response.
    public var headers: HTTPHeaders
    /// The bytes of the requested span now on disk, counting the ones kept from the checkpoint.
    public var bytesWritten: Int64
    /// The body bytes this attempt received over the network.
    public var bytesReceived: Int64
    /// The bytes kept from the checkpoint; zero when the transfer started over.
    public var resumedFrom: Int64
    /// Whether the server sent the whole resource again where a partial copy was on disk
    /// (its content changed, or it ignored the range), so the copy was replaced.
    public var restarted: Bool
    /// The validator of the version now on disk.
    public var validator: ResourceValidator?
    /// The complete length of the resource, from `Content-Range` or `Content-Length`, when known.
    public var resourceLength: Int64?
    /// Whether the server showed it serves byte ranges (`Accept-Ranges: bytes` or a `206`).
    public var acceptsRanges: Bool
    /// The body, for ``TransferRequest/Destination/memory(limit:)``.
    public var body: Data?
    /// The time from start to finish of this attempt.
    public var duration: Duration

    /// The state to resume from, were this span needed again.
    public var checkpoint: TransferCheckpoint {
        TransferCheckpoint(bytesWritten: bytesWritten, validator: validator)
    }
}

/// How far a transfer has come; delivered on the engine's thread, so handlers must return fast.
public struct TransferProgress: Sendable, Hashable {
    /// The body bytes this attempt received.
    public var bytesReceived: Int64
    /// The bytes of the requested span on disk, counting the ones kept from the checkpoint.
    public var bytesWritten: Int64
    /// The length of the requested span, once known.
    public var totalBytes: Int64?
    /// The validator of the version being written, once the response is known; with
    /// ``bytesWritten`` it is a checkpoint to resume from.
    public var validator: ResourceValidator?

    /// Creates a progress value.
    public init(bytesReceived: Int64, bytesWritten: Int64, totalBytes: Int64?, validator: ResourceValidator? = nil) {
        self.bytesReceived = bytesReceived
        self.bytesWritten = bytesWritten
        self.totalBytes = totalBytes
        self.validator = validator
    }

    /// The bytes on disk and their validator, to resume from.
    public var checkpoint: TransferCheckpoint {
        TransferCheckpoint(bytesWritten: bytesWritten, validator: validator)
    }
}
