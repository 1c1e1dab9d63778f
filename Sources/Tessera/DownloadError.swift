/// An error raised by Tessera: by the engine while moving bytes, and (in later layers) while
/// resolving, storing or verifying a download.
///
/// The type is a struct, not an enum, so new codes can be added without breaking callers
/// (the shape of swift-nio's `FileSystemError`). Decide what to do from ``code`` and from the
/// derived properties such as ``isTransient`` or ``suggestsReResolve``; show ``message`` to
/// people.
public struct DownloadError: Error, Sendable, CustomStringConvertible {
    /// What went wrong, as a value that can be compared and switched over with `==`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        fileprivate enum Base: String, Sendable {
            case invalidRequest
            case unsupportedScheme
            case dnsFailure
            case connectionRefused
            case networkUnreachable
            case timeout
            case connectionLost
            case tlsFailure
            case tooManyRedirects
            case httpStatus
            case rangeMismatch
            case rangeNotSupported
            case contentChanged
            case sizeMismatch
            case responseTooLarge
            case writeFailed
            case diskFull
            case cancelled
            case engineShutDown
            case transport
            case manifestInvalid
            case manifestTooLarge
            case unsafeInput
            case checksumMismatch
            case unsafePath
            case noMatchingEntity
            case manifestExpired
            case invalidState
            case storeFailure
            case cryptoFailure
            case unsupportedContent
        }

        fileprivate let base: Base

        private init(_ base: Base) { self.base = base }

        /// The request itself is malformed: a URL that does not parse, a header with a line break.
        public static let invalidRequest = Code(.invalidRequest)
        /// Replaced by ``unsafeInput``: every URL refusal (scheme, host, control characters, a
        /// redirect to another scheme) now has that one code. Kept so that code naming it still
        /// compiles and stored errors still read; Tessera no longer raises it.
        @available(*, deprecated, renamed: "unsafeInput")
        public static let unsupportedScheme = Code(.unsupportedScheme)
        /// The host name (or the proxy's) could not be resolved.
        public static let dnsFailure = Code(.dnsFailure)
        /// The host answered the connection attempt with a refusal, or the attempt failed.
        public static let connectionRefused = Code(.connectionRefused)
        /// The network or the host is unreachable: no route, no link.
        public static let networkUnreachable = Code(.networkUnreachable)
        /// Connecting took too long, or the transfer stayed below the low-speed limit.
        public static let timeout = Code(.timeout)
        /// The connection broke mid-transfer (or during the TLS handshake: reset, or closed
        /// without a word), or the server sent nothing or a truncated body.
        public static let connectionLost = Code(.connectionLost)
        /// The TLS handshake failed on its own terms (the peer's certificate, a protocol or
        /// cipher the two sides do not share, an answer that is not TLS); a handshake cut off
        /// by the connection is ``connectionLost``.
        public static let tlsFailure = Code(.tlsFailure)
        /// More redirects than the configured maximum.
        public static let tooManyRedirects = Code(.tooManyRedirects)
        /// The server answered with a status that is not a success; see ``DownloadError/httpStatus``.
        public static let httpStatus = Code(.httpStatus)
        /// The server's `Content-Range` or `Content-Length` does not match the bytes asked for.
        public static let rangeMismatch = Code(.rangeMismatch)
        /// A byte range was asked for and the server sent the whole resource instead.
        public static let rangeNotSupported = Code(.rangeNotSupported)
        /// The resource changed (a new `ETag` or `Last-Modified`) while part of it was on disk.
        public static let contentChanged = Code(.contentChanged)
        /// The transfer completed with a size other than the expected one.
        public static let sizeMismatch = Code(.sizeMismatch)
        /// An in-memory response grew over its limit.
        public static let responseTooLarge = Code(.responseTooLarge)
        /// Writing to the destination failed (permissions, I/O error, a missing directory).
        public static let writeFailed = Code(.writeFailed)
        /// Writing failed because the disk is full (`ENOSPC`, `EDQUOT`).
        public static let diskFull = Code(.diskFull)
        /// The transfer was cancelled.
        public static let cancelled = Code(.cancelled)
        /// The engine was shut down before the transfer finished.
        public static let engineShutDown = Code(.engineShutDown)
        /// Any other libcurl failure; see ``DownloadError/curlCode``.
        public static let transport = Code(.transport)

        /// A manifest or API answer could not be parsed, or lacks what is required.
        public static let manifestInvalid = Code(.manifestInvalid)
        /// A manifest is over a size or count limit (bytes, depth, segments).
        public static let manifestTooLarge = Code(.manifestTooLarge)
        /// Input was refused as hostile: XML entity declarations, external entities, a URL with
        /// control characters, without a host or with a scheme other than http(s) (also when a
        /// redirect leads there). ``URLSafety/check(_:context:)`` is the one place URLs are judged.
        public static let unsafeInput = Code(.unsafeInput)
        /// Downloaded bytes do not match the checksum the manifest gave.
        public static let checksumMismatch = Code(.checksumMismatch)
        /// A file name would leave the download directory (`..`, an absolute path, NUL, …).
        public static let unsafePath = Code(.unsafePath)
        /// No registered entity type accepts the input.
        public static let noMatchingEntity = Code(.noMatchingEntity)
        /// A manifest's URLs expired and resolving again did not help.
        public static let manifestExpired = Code(.manifestExpired)
        /// An operation that the task's state does not allow (e.g. resuming a removed task).
        public static let invalidState = Code(.invalidState)
        /// The store could not read or write its records.
        public static let storeFailure = Code(.storeFailure)
        /// Hashing or decryption failed inside the crypto library.
        public static let cryptoFailure = Code(.cryptoFailure)
        /// The content is of a kind Tessera does not download: a live stream, DRM-protected
        /// media, an encryption method it does not implement.
        public static let unsupportedContent = Code(.unsupportedContent)

        public var description: String { base.rawValue }

        /// The code whose ``description`` is `name`.
        public static func named(_ name: String) -> Code? {
            Base(rawValue: name).map(Code.init)
        }
    }

    /// What went wrong.
    public var code: Code
    /// A sentence a person can act on.
    public var message: String
    /// The URL the failure is about, when there is one.
    public var url: String?
    /// The HTTP status of the final response, when the server answered.
    public var httpStatus: Int?
    /// How long the server asked to wait before trying again (`Retry-After`).
    public var retryAfter: Duration?
    /// The bytes that are on disk and valid after the failure, and the validator that lets a
    /// later attempt resume them.
    package var checkpoint: TransferCheckpoint?
    /// The libcurl result code, for ``Code/transport`` and network failures.
    public var curlCode: Int?
    /// The operating-system error number behind the failure, when known.
    public var systemErrno: Int32?

    /// Creates an error.
    public init(
        _ code: Code,
        _ message: String,
        url: String? = nil,
        httpStatus: Int? = nil,
        retryAfter: Duration? = nil,
        curlCode: Int? = nil,
        systemErrno: Int32? = nil
    ) {
        self.init(
            code, message, url: url, httpStatus: httpStatus, retryAfter: retryAfter, checkpoint: nil, curlCode: curlCode,
            systemErrno: systemErrno)
    }

    /// Creates an error of the engine's, with what a later attempt can resume.
    package init(
        _ code: Code,
        _ message: String,
        url: String? = nil,
        httpStatus: Int? = nil,
        retryAfter: Duration? = nil,
        checkpoint: TransferCheckpoint?,
        curlCode: Int? = nil,
        systemErrno: Int32? = nil
    ) {
        self.code = code
        self.message = message
        self.url = url
        self.httpStatus = httpStatus
        self.retryAfter = retryAfter
        self.checkpoint = checkpoint
        self.curlCode = curlCode
        self.systemErrno = systemErrno
    }

    public var description: String {
        var text = "\(code): \(message)"
        if let url { text += " (\(url))" }
        return text
    }
}

extension DownloadError {
    /// Whether the failure says the network (not the server) is unavailable: name resolution
    /// failed or no route exists. A download manager waits for the network instead of burning
    /// retries on these.
    public var isNetworkUnavailable: Bool {
        code == .dnsFailure || code == .networkUnreachable
    }

    /// Whether the host could not be reached at all (name resolution, refused connection, no
    /// route): the task waits for the network (``DownloadTaskState/InterruptionReason/network``)
    /// rather than spending its retries.
    public var isConnectivity: Bool {
        code == .dnsFailure || code == .networkUnreachable || code == .connectionRefused
    }

    /// Whether trying the same request again later may succeed.
    public var isTransient: Bool {
        switch code {
        case .dnsFailure, .connectionRefused, .networkUnreachable, .timeout, .connectionLost, .contentChanged,
            .rangeMismatch, .sizeMismatch:
            return true
        case .httpStatus:
            guard let status = httpStatus else { return false }
            return status == 408 || status == 425 || status == 429 || (500...599).contains(status)
        default:
            return false
        }
    }

    /// Whether the URL itself is likely stale (expired signature, moved content), so the entity
    /// should be resolved again: HTTP 403, 404 or 410, and 412 (the resource changed under an
    /// `If-Match`).
    public var suggestsReResolve: Bool {
        code == .httpStatus && [403, 404, 410, 412].contains(httpStatus ?? 0)
    }

    /// Whether the failure comes from the local disk rather than the network.
    public var isLocal: Bool {
        code == .writeFailed || code == .diskFull
    }

    /// Whether the failure means the task cannot succeed as it is (it ends `invalid`) rather than
    /// that it ran out of attempts (`failed`): an unusable manifest, hostile input, a checksum
    /// that failed twice, a resource that is gone.
    public var isPermanent: Bool {
        switch code {
        case .manifestInvalid, .manifestTooLarge, .unsafeInput, .unsafePath, .checksumMismatch, .invalidRequest,
            .noMatchingEntity, .unsupportedContent:
            return true
        case .httpStatus:
            return [404, 410].contains(httpStatus ?? 0)
        default:
            return code.base == .unsupportedScheme
        }
    }

    /// Whether the failure only says that the caller stopped the work (a cancelled task, an
    /// engine shut down with its process): nothing failed, and the work resumes from its
    /// checkpoints next time.
    public var isCancellation: Bool {
        code == .cancelled || code == .engineShutDown
    }
}

extension DownloadError: Equatable {
    /// Two errors are equal when their code, status and URL are; messages may differ in wording.
    public static func == (lhs: DownloadError, rhs: DownloadError) -> Bool {
        lhs.code == rhs.code && lhs.httpStatus == rhs.httpStatus && lhs.url == rhs.url
    }
}
