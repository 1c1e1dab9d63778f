// A minimal HTTP/1.1 client over POSIX sockets, so LoopbackOrigin is tested independently of
// the engine (CurlEngine) it exists to test. One request at a time per connection; bodies are
// framed by Content-Length only (the origin never sends chunked bodies) or read until close.

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

enum RawHTTPError: Error, CustomStringConvertible {
    /// A socket call failed with this errno.
    case system(call: String, errno: Int32)
    /// Nothing arrived within the receive timeout.
    case timedOut
    /// The server closed the connection before a complete response head arrived.
    case closedBeforeHead(receivedBytes: Int)
    /// The response head could not be parsed.
    case malformed(String)

    var description: String {
        switch self {
        case .system(let call, let code): "\(call) failed: \(String(cString: strerror(code))) (\(code))"
        case .timedOut: "timed out waiting for the server"
        case .closedBeforeHead(let count): "connection closed after \(count) bytes, before the end of the response head"
        case .malformed(let text): "malformed response head: \(text)"
        }
    }
}

/// A response's status line and header fields.
struct RawHTTPHead {
    struct Field: Equatable {
        var name: String
        var value: String
    }

    var version: String
    var status: Int
    var fields: [Field]

    /// The first field named `name`, case-insensitively.
    func header(_ name: String) -> String? { values(name).first }

    /// Every field named `name`, case-insensitively, in order.
    func values(_ name: String) -> [String] {
        let lowered = name.lowercased()
        return fields.filter { $0.name.lowercased() == lowered }.map(\.value)
    }

    /// The announced `Content-Length`, when there is one.
    var contentLength: Int? { header("Content-Length").flatMap { Int($0) } }
}

/// A complete (or cut-short) response.
struct RawHTTPResponse {
    var head: RawHTTPHead
    var body: [UInt8]
    /// The server closed the connection before the announced `Content-Length` arrived.
    var closedEarly: Bool

    var status: Int { head.status }
    func header(_ name: String) -> String? { head.header(name) }
}

/// One client connection to `127.0.0.1:<port>`. Not thread-safe; use it from one task.
final class RawHTTPConnection {
    private let fd: Int32
    /// Bytes received and not consumed yet.
    private var pending: [UInt8] = []
    private var isClosed = false

    /// Connects to `127.0.0.1:port`; every receive fails with ``RawHTTPError/timedOut`` after
    /// `timeout` without data.
    init(port: Int, timeout: Duration = .seconds(10)) throws {
        #if canImport(Glibc)
        let socketType = Int32(SOCK_STREAM.rawValue)
        #else
        let socketType = SOCK_STREAM
        #endif
        fd = socket(AF_INET, socketType, 0)
        guard fd >= 0 else { throw RawHTTPError.system(call: "socket", errno: errno) }
        do {
            try setTimeout(timeout, option: SO_RCVTIMEO)
            try setTimeout(timeout, option: SO_SNDTIMEO)
            var one: Int32 = 1
            _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))

            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            address.sin_addr = in_addr(s_addr: in_addr_t(UInt32(0x7F00_0001).bigEndian))
            let result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard result == 0 else { throw RawHTTPError.system(call: "connect", errno: errno) }
        } catch {
            _ = Glibc.close(fd)
            throw error
        }
    }

    deinit { close() }

    private func setTimeout(_ timeout: Duration, option: Int32) throws {
        let (seconds, attoseconds) = timeout.components
        var interval = timeval(tv_sec: Int(seconds), tv_usec: Int(attoseconds / 1_000_000_000_000))
        guard setsockopt(fd, SOL_SOCKET, option, &interval, socklen_t(MemoryLayout<timeval>.size)) == 0 else {
            throw RawHTTPError.system(call: "setsockopt", errno: errno)
        }
    }

    /// Changes how long a receive waits for data before failing with ``RawHTTPError/timedOut``.
    func setReceiveTimeout(_ timeout: Duration) throws {
        try setTimeout(timeout, option: SO_RCVTIMEO)
    }

    func close() {
        guard !isClosed else { return }
        isClosed = true
        _ = Glibc.close(fd)
    }

    // MARK: Sending

    /// Sends a request head (`Host` is added); no request body.
    func send(_ method: String, _ target: String, headers: [(String, String)] = []) throws {
        var text = "\(method) \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        text += "\r\n"
        try sendAll(Array(text.utf8))
    }

    private func sendAll(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL))
            }
            if sent < 0 {
                if errno == EINTR { continue }
                throw RawHTTPError.system(call: "send", errno: errno)
            }
            offset += sent
        }
    }

    // MARK: Receiving

    /// One `recv`; returns 0 when the server closed the connection.
    private func receive(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        while true {
            let count = recv(fd, buffer.baseAddress, buffer.count, 0)
            if count >= 0 { return count }
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: throw RawHTTPError.timedOut
            case ECONNRESET: return 0
            case let code: throw RawHTTPError.system(call: "recv", errno: code)
            }
        }
    }

    /// Appends what arrives next to `pending`; returns 0 at the end of the stream.
    private func receiveMore() throws -> Int {
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        let count = try chunk.withUnsafeMutableBytes { try receive(into: $0) }
        pending.append(contentsOf: chunk[0..<count])
        return count
    }

    /// Reads the status line and header fields.
    func readHead() throws -> RawHTTPHead {
        var searchFrom = 0
        while true {
            if pending.count >= 4 {
                var index = max(0, searchFrom - 3)
                while index + 3 < pending.count {
                    if pending[index] == 13, pending[index + 1] == 10, pending[index + 2] == 13, pending[index + 3] == 10 {
                        let text = String(decoding: pending[0..<index], as: UTF8.self)
                        pending.removeFirst(index + 4)
                        return try Self.parseHead(text)
                    }
                    index += 1
                }
                searchFrom = pending.count
            }
            guard pending.count < 1 << 20 else { throw RawHTTPError.malformed("no end of head in 1 MiB") }
            guard try receiveMore() > 0 else { throw RawHTTPError.closedBeforeHead(receivedBytes: pending.count) }
        }
    }

    private static func parseHead(_ text: String) throws -> RawHTTPHead {
        var lines = text.split(separator: "\r\n", omittingEmptySubsequences: false).map(String.init)
        let statusLine = lines.removeFirst()
        let parts = statusLine.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/"), let status = Int(parts[1]) else {
            throw RawHTTPError.malformed(statusLine)
        }
        var fields: [RawHTTPHead.Field] = []
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { throw RawHTTPError.malformed(line) }
            let name = String(line[..<colon])
            let value = line[line.index(after: colon)...].drop { $0 == " " || $0 == "\t" }
            let trimmed = value.reversed().drop { $0 == " " || $0 == "\t" }.reversed()
            fields.append(.init(name: name, value: String(trimmed)))
        }
        return RawHTTPHead(version: String(parts[0]), status: status, fields: fields)
    }

    /// Reads body bytes as they arrive, at most `limit` of them (nil: until the server closes),
    /// handing each piece to `consume`; never reads past `limit`, so a following response on the
    /// same connection stays intact. Returns how many bytes were read (fewer than `limit` when the
    /// server closed first).
    @discardableResult
    func readBody(limit: Int?, _ consume: (ArraySlice<UInt8>) throws -> Void) throws -> Int {
        let limit = limit ?? Int.max
        var count = 0
        if !pending.isEmpty, limit > 0 {
            let take = min(pending.count, limit)
            try consume(pending[0..<take])
            pending.removeFirst(take)
            count = take
        }
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while count < limit {
            let want = min(chunk.count, limit - count)
            let received = try chunk.withUnsafeMutableBytes {
                try receive(into: UnsafeMutableRawBufferPointer(rebasing: $0[0..<want]))
            }
            if received == 0 { break }
            try consume(chunk[0..<received])
            count += received
        }
        return count
    }

    /// Reads everything until the server closes the connection.
    func readUntilClose() throws -> [UInt8] {
        var bytes: [UInt8] = []
        try readBody(limit: nil) { bytes.append(contentsOf: $0) }
        return bytes
    }

    /// Reads one response; `method` tells whether a body follows (none for `HEAD`).
    func readResponse(method: String = "GET") throws -> RawHTTPResponse {
        let head = try readHead()
        if method == "HEAD" || (100..<200).contains(head.status) || head.status == 204 || head.status == 304 {
            return RawHTTPResponse(head: head, body: [], closedEarly: false)
        }
        if head.header("Transfer-Encoding") != nil {
            throw RawHTTPError.malformed("Transfer-Encoding is not supported by this client")
        }
        var body: [UInt8] = []
        if let length = head.contentLength {
            body.reserveCapacity(length)
            let read = try readBody(limit: length) { body.append(contentsOf: $0) }
            return RawHTTPResponse(head: head, body: body, closedEarly: read < length)
        }
        try readBody(limit: nil) { body.append(contentsOf: $0) }
        return RawHTTPResponse(head: head, body: body, closedEarly: false)
    }

    /// Sends a request and reads its response.
    func request(_ method: String = "GET", _ target: String, headers: [(String, String)] = []) throws -> RawHTTPResponse {
        try send(method, target, headers: headers)
        return try readResponse(method: method)
    }
}
