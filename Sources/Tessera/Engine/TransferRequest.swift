import Foundation

/// One HTTP transfer for ``CurlEngine``: what to fetch, which bytes, and where they go.
package struct TransferRequest: Sendable {
    /// The request method.
    package enum Method: Sendable, Hashable {
        /// Fetch the body.
        case get
        /// Fetch the headers only, to learn the size, validators and range support.
        case head
    }

    /// Where the body goes.
    package enum Destination: Sendable, Hashable {
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
    package var url: URL
    /// The method.
    package var method: Method
    /// The bytes wanted, or `nil` for the whole resource.
    package var range: ByteRange?
    /// Extra header fields, sent after the engine's defaults (which they replace by name).
    package var headers: HTTPHeaders
    /// Where the body goes.
    package var destination: Destination
    /// What an earlier attempt left on disk: the engine asks only for the rest, with
    /// `If-Range` carrying the validator, and starts over cleanly if the server's content changed.
    package var resume: TransferCheckpoint?
    /// The length the body of the requested span must have; a different length fails with
    /// ``DownloadError/Code/sizeMismatch``.
    package var expectedLength: Int64?
    /// A rate limit for this transfer alone, in bytes per second, on top of the global one.
    package var rateLimit: Int64?
    /// Whether a compressed response (`Accept-Encoding`) is welcome and decoded. Only for
    /// memory destinations: byte ranges and sizes refer to the identity encoding.
    package var acceptsCompression: Bool
    /// Whether a partial body without a validator may be resumed anyway. Off by default: without
    /// an `ETag` or a strong `Last-Modified`, two versions could be spliced, so the body is
    /// fetched again from its first byte.
    package var resumesWithoutValidator: Bool
    /// Whether the ``range`` may reach past the resource's end: a first range asked for before
    /// the length is known. The server then ends it at the last byte it has (RFC 9110 §14.1.2),
    /// and the span is what it sent; an empty resource (`416`, `bytes */0`) is an empty span. Off
    /// by default: a range computed from a length learned earlier that passes the end now means
    /// the resource changed (``DownloadError/Code/contentChanged``).
    package var rangeMayPassEnd: Bool = false
    /// A limit on the whole transfer, on top of the engine's connect and low-speed limits.
    package var timeout: Duration?
    /// Called on the engine thread once the final response is known to be usable (a success
    /// status, its range and validator checked) and before any of its body is written: it may
    /// send the body elsewhere (``ResponseDecision/redirect(to:)``, only for a request that
    /// resumes nothing) or refuse it. It must return quickly.
    package var onResponse: (@Sendable (TransferResponse) -> ResponseDecision)?
    /// Called on the engine thread each time buffered body bytes reach the file, with the bytes
    /// of the span now in the file (kept ones included). A record of what is on disk that is
    /// updated from here never claims a byte the file does not hold. It must return quickly.
    package var onFlush: (@Sendable (_ bytesOnDisk: Int64) -> Void)?
    /// Asked on the engine thread before each write of body bytes to the file: `false` ends the
    /// transfer with ``DownloadError/Code/connectionLost`` (transient) and writes nothing (a
    /// fleet worker that may have lost the task, see ``TaskWriteFence``). It must return quickly.
    package var permitsWrite: (@Sendable () -> Bool)?
    /// An end the caller may move closer while the transfer runs (a large file split over more
    /// connections as they come): the transfer stops, successfully, once it has that many bytes
    /// of its span.
    package var bound: TransferBound?

    /// Creates a request.
    package init(
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
    package static func download(
        _ url: URL, to path: String, range: ByteRange? = nil, resume: TransferCheckpoint? = nil
    ) -> TransferRequest {
        TransferRequest(url: url, range: range, destination: .file(path: path), resume: resume)
    }

    /// A small resource into memory, decoded if the server compressed it.
    package static func fetch(_ url: URL, limit: Int = 16 << 20, headers: HTTPHeaders = HTTPHeaders()) -> TransferRequest {
        TransferRequest(url: url, headers: headers, destination: .memory(limit: limit), acceptsCompression: true)
    }

    /// Throws ``DownloadError/Code/unsafeInput`` (through ``URLSafety/check(_:context:)``) or
    /// ``DownloadError/Code/invalidRequest`` for a request that must not reach the network.
    package func validate() throws(DownloadError) {
        // (The URL's text only for an error: most requests are valid.)
        var text: String { url.absoluteString }
        try URLSafety.check(url, context: "the URL")
        if let field = headers.firstInvalidField {
            throw DownloadError(.invalidRequest, "the header field \"\(field.name)\" cannot be sent", url: text)
        }
        if case .memory(let limit) = destination, limit < 0 {
            throw DownloadError(.invalidRequest, "a memory destination needs a limit of at least zero", url: text)
        }
        if case .file(let path, let offset, _) = destination {
            guard !path.isEmpty, !Self.containsNUL(path), offset >= 0 else {
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

    /// Whether `text` has a NUL byte, scanned as one run of bytes (a `String.UTF8View` walked
    /// byte by byte costs four times as much, at every transfer's start: 1,850 instructions for
    /// a path of P1's).
    private static func containsNUL(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { $0.contains(0) }
    }
}

/// What a finished transfer produced.
package struct TransferResult: Sendable {
    /// The status of the final response (after redirects).
    package var status: Int
    /// The URL of the final response, after redirects.
    package var effectiveURL: URL
    /// The header fields of the final response.
    package var headers: HTTPHeaders
    /// The bytes of the requested span now on disk, counting the ones kept from the checkpoint.
    package var bytesWritten: Int64
    /// The body bytes this attempt received over the network.
    package var bytesReceived: Int64
    /// The bytes kept from the checkpoint; zero when the transfer started over.
    package var resumedFrom: Int64
    /// Whether the server sent the whole resource again where a partial copy was on disk
    /// (its content changed, or it ignored the range), so the copy was replaced.
    package var restarted: Bool
    /// The validator of the version now on disk.
    package var validator: ResourceValidator?
    /// The complete length of the resource, from `Content-Range` or `Content-Length`, when known.
    package var resourceLength: Int64?
    /// Whether the server showed it serves byte ranges (`Accept-Ranges: bytes` or a `206`).
    package var acceptsRanges: Bool
    /// The body, for ``TransferRequest/Destination/memory(limit:)``.
    package var body: Data?
    /// The time from start to finish of this attempt.
    package var duration: Duration

    /// The state to resume from, were this span needed again.
    package var checkpoint: TransferCheckpoint {
        TransferCheckpoint(bytesWritten: bytesWritten, validator: validator)
    }
}

/// How far a transfer has come; delivered on the engine's thread, so handlers must return fast.
package struct TransferProgress: Sendable, Hashable {
    /// The body bytes this attempt received.
    package var bytesReceived: Int64
    /// The bytes of the requested span on disk, counting the ones kept from the checkpoint.
    package var bytesWritten: Int64
    /// The bytes of the span taken so far: those on disk and those still in the engine's write
    /// buffer (what a progress display shows; ``bytesWritten`` is what a checkpoint may claim).
    package var bytesTaken: Int64
    /// The length of the requested span, once known.
    package var totalBytes: Int64?
    /// The validator of the version being written, once the response is known; with
    /// ``bytesWritten`` it is a checkpoint to resume from.
    package var validator: ResourceValidator?

    /// Creates a progress value.
    package init(
        bytesReceived: Int64, bytesWritten: Int64, bytesTaken: Int64? = nil, totalBytes: Int64?,
        validator: ResourceValidator? = nil
    ) {
        self.bytesReceived = bytesReceived
        self.bytesWritten = bytesWritten
        self.bytesTaken = bytesTaken ?? bytesWritten
        self.totalBytes = totalBytes
        self.validator = validator
    }

    /// The bytes on disk and their validator, to resume from.
    package var checkpoint: TransferCheckpoint {
        TransferCheckpoint(bytesWritten: bytesWritten, validator: validator)
    }
}

/// A usable response, as ``TransferRequest/onResponse`` sees it before the body is written.
package struct TransferResponse: Sendable {
    /// The status (`200`, `206`).
    package var status: Int
    /// The URL of the response, after redirects, as text.
    package var effectiveURLText: String
    /// The URL the request went to.
    var requestURL: URL
    /// The URL of the response, after redirects (parsed when asked for; not redirected, most
    /// often, it is the request's own URL, not parsed again).
    package var effectiveURL: URL {
        if effectiveURLText == requestURL.absoluteString { return requestURL }
        return URL(string: effectiveURLText) ?? requestURL
    }
    /// The response's header fields.
    package var headers: HTTPHeaders
    /// The validator of the version being sent.
    package var validator: ResourceValidator?
    /// The complete length of the resource, when the server told it.
    package var resourceLength: Int64?
    /// The length of the requested span this transfer ends with, kept bytes included, when known.
    package var spanLength: Int64?
    /// The bytes of the span kept from the checkpoint (zero when the body starts over).
    package var resumedFrom: Int64
    /// Whether the server showed it serves byte ranges (`Accept-Ranges: bytes` or a `206`).
    package var acceptsRanges: Bool
    /// The round trip time of the connection as the kernel measured it, when it is known (TCP
    /// on Linux).
    package var roundTripTime: Duration? = nil
}

/// What ``TransferRequest/onResponse`` decides.
package enum ResponseDecision: Sendable {
    /// Write the body where the request said.
    case proceed
    /// Write the body there instead (honoured only when nothing of the span was kept).
    case redirect(to: TransferRequest.Destination)
    /// Do not take the body: the transfer fails with this error.
    case refuse(DownloadError)
}

/// An end that moves closer while a transfer runs: a large file's first connection starts with
/// the whole file, and gives the rest of it away as more connections start.
///
/// Positions count bytes of the transfer's span from its first byte. The engine takes body bytes
/// only below ``end``; ``shrink(to:)`` moves the end down unless the transfer already has bytes
/// past the new end, so whatever is given away is never also written by this transfer.
package final class TransferBound: Sendable {
    private struct State {
        var end: Int64
        var taken: Int64 = 0
    }

    private let state: Locked<State>

    /// Creates a bound at `end` (unbounded by default).
    package init(end: Int64 = .max) {
        state = Locked(State(end: max(0, end)))
    }

    /// Where the transfer stops now.
    package var end: Int64 { state.withLock { $0.end } }

    /// The bytes the transfer has taken so far (written or about to be).
    package var taken: Int64 { state.withLock { $0.taken } }

    /// Moves the end to `newEnd` when the transfer has not taken bytes past it; returns whether
    /// it did. An end is only ever moved down.
    package func shrink(to newEnd: Int64) -> Bool {
        state.withLock { state in
            guard newEnd >= state.taken, newEnd < state.end else { return false }
            state.end = newEnd
            return true
        }
    }

    /// Takes up to `count` bytes at span position `position`: returns how many may be written.
    func take(_ count: Int, at position: Int64) -> Int {
        state.withLock { state in
            let room = max(0, state.end - position)
            let granted = Int(min(Int64(count), room))
            state.taken = position + Int64(granted)
            return granted
        }
    }
}
