import Foundation
import Tessera

extension LoopbackOrigin {
    /// What a path serves.
    public struct Resource: Sendable {
        /// Where the body comes from.
        public enum Body: Sendable {
            /// ``OriginContent`` of this many bytes, derived from the path and its version.
            case generated(size: Int64)
            /// Fixed bytes (manifests, API answers).
            case data([UInt8])
        }

        /// The body.
        public var body: Body
        /// The `Content-Type`.
        public var contentType: String
        /// Whether responses carry an `ETag`.
        public var sendsETag: Bool
        /// Whether responses carry a `Last-Modified` date.
        public var sendsLastModified: Bool
        /// Whether `Range` requests are honoured (and `Accept-Ranges: bytes` sent).
        public var acceptsRanges: Bool
        /// Extra header fields sent with every response for this path.
        public var extraHeaders: [(String, String)]
        /// Whether bodies are sent `Transfer-Encoding: chunked`, without a `Content-Length` (a
        /// body whose length the client learns only at its last chunk).
        public var chunked: Bool

        /// Creates a resource.
        public init(
            _ body: Body,
            contentType: String = "application/octet-stream",
            sendsETag: Bool = true,
            sendsLastModified: Bool = true,
            acceptsRanges: Bool = true,
            extraHeaders: [(String, String)] = [],
            chunked: Bool = false
        ) {
            self.body = body
            self.contentType = contentType
            self.sendsETag = sendsETag
            self.sendsLastModified = sendsLastModified
            self.acceptsRanges = acceptsRanges
            self.extraHeaders = extraHeaders
            self.chunked = chunked
        }

        /// Generated content of `size` bytes.
        public static func generated(size: Int64, contentType: String = "application/octet-stream") -> Resource {
            Resource(.generated(size: size), contentType: contentType)
        }

        /// A UTF-8 text body.
        public static func text(_ text: String, contentType: String = "text/plain; charset=utf-8") -> Resource {
            Resource(.data(Array(text.utf8)), contentType: contentType)
        }

        /// Fixed bytes.
        public static func bytes(_ bytes: [UInt8], contentType: String = "application/octet-stream") -> Resource {
            Resource(.data(bytes), contentType: contentType)
        }
    }

    /// A misbehaviour to inject for a path.
    public enum Fault: Sendable, Hashable {
        /// Close the connection after sending this many body bytes.
        case dropConnection(afterBytes: Int64)
        /// Answer with this status (and an optional `Retry-After` value) instead of the content.
        case status(Int, retryAfter: String? = nil)
        /// Answer with this status and this body (a server's error page) instead of the content.
        case answer(status: Int, body: String)
        /// Stop sending for `duration` after this many body bytes (or before the headers when
        /// `afterBytes` is `nil`).
        case stall(Duration, afterBytes: Int64? = 0)
        /// Stop sending after this many body bytes (or before the headers when `afterBytes` is
        /// `nil`) until `gate` opens: a window that lasts however long the test takes to act in
        /// it, on a loaded machine too (a timed ``stall(_:afterBytes:)`` can close first).
        case hold(Gate, afterBytes: Int64? = 0)
        /// Send the body at no more than this many bytes per second.
        case throttle(bytesPerSecond: Int)
        /// Announce a `Content-Length` off by `delta` bytes; the real bytes follow and the
        /// connection closes.
        case wrongContentLength(delta: Int64)
        /// Redirect to `location` (absolute, or a path on this origin).
        case redirect(to: String, status: Int = 302)
        /// Ignore `Range` and always send the whole body with `200`.
        case ignoreRange
        /// Ignore `If-Match` and `If-Unmodified-Since`, as a careless server does.
        case ignoreConditions
        /// Send a `Content-Range` starting `by` bytes after the asked-for first byte.
        case shiftContentRange(by: Int64)
    }

    /// What held responses (``Fault/hold(_:afterBytes:)``) wait for: closed until ``open()``,
    /// open for ever after (a response that reaches the hold then goes straight on).
    public final class Gate: Sendable, Hashable {
        private let state = Locked<(isOpen: Bool, waiters: [@Sendable () -> Void])>((false, []))

        /// A closed gate.
        public init() {}

        /// Lets every held response go on, and every later one through.
        public func open() {
            let waiters = state.withLock { state in
                state.isOpen = true
                defer { state.waiters = [] }
                return state.waiters
            }
            for resume in waiters { resume() }
        }

        /// Whether ``open()`` was called.
        public var isOpen: Bool { state.withLock { $0.isOpen } }

        /// Runs `resume` once the gate is open (at once when it is).
        func whenOpen(_ resume: @escaping @Sendable () -> Void) {
            let now = state.withLock { state in
                if !state.isOpen { state.waiters.append(resume) }
                return state.isOpen
            }
            if now { resume() }
        }

        /// The same gate (identity, not state).
        public static func == (lhs: Gate, rhs: Gate) -> Bool { lhs === rhs }
        /// Hashes the gate's identity.
        public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
    }

    /// A request as the origin saw it.
    public struct RecordedRequest: Sendable, Hashable {
        /// The method, e.g. `GET`.
        public var method: String
        /// The path, without the query.
        public var path: String
        /// The full request target, with the query.
        public var uri: String
        /// The header fields, in order.
        public var headers: [Header]
        /// Which connection carried it, counted from 1 in order of acceptance.
        public var connection: Int
        /// When the origin received it.
        public var receivedAt: ContinuousClock.Instant

        /// One header field.
        public struct Header: Sendable, Hashable {
            /// The name as sent.
            public var name: String
            /// The value.
            public var value: String
        }

        /// The value of the first header named `name`, case-insensitively.
        public func header(_ name: String) -> String? {
            headers.first { $0.name.lowercased() == name.lowercased() }?.value
        }
    }
}
