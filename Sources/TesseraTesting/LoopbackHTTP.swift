import Foundation
import Tessera

/// A few lines of plain HTTP/1.1 to a server on 127.0.0.1 (`tessera serve`, the daemon's
/// server in tests), over POSIX sockets on a thread of their own: one request per connection,
/// `Connection: close`, the answer read to its end (`Content-Length`, chunked, or until close).
///
/// Not FoundationNetworking's `URLSession`: on Linux it leaks a few of libcurl's strings for
/// every request, which LeakSanitizer (`make check`) reports.
public enum LoopbackHTTP {
    /// An answer.
    public struct Response: Sendable {
        /// The status code.
        public var statusCode: Int
        /// The header fields, in order.
        public var headers: [(name: String, value: String)]
        /// The body (de-chunked).
        public var body: Data

        /// The first field named `name`, case-insensitively.
        public func value(forHTTPHeaderField name: String) -> String? {
            headers.first { $0.name.lowercased() == name.lowercased() }?.value
        }
    }

    /// Why a request failed.
    public struct Failure: Error, CustomStringConvertible {
        /// What went wrong.
        public var description: String
    }

    /// Sends one request to `127.0.0.1:port` and returns the whole answer (``readTimeout`` at
    /// most between two reads).
    public static func request(
        port: Int, method: String = "GET", path: String, headers: [String: String] = [:], body: Data? = nil
    ) async throws -> Response {
        try await onThread {
            let socket = try connect(port: port)
            defer { close(socket) }
            try send(socket, head(method: method, path: path, port: port, headers: headers, body: body) + Array(body ?? Data()))
            var received: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = buffer.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
                if count < 0, errno == EINTR { continue }
                if count < 0, errno == EAGAIN || errno == EWOULDBLOCK, headEnd(received) == nil {
                    throw Failure(description: "no HTTP answer within \(readTimeout) s (\(received.count) bytes of it)")
                }
                guard count > 0 else { break }
                received += buffer[..<count]
            }
            return try parse(received)
        }
    }

    /// A response read as it streams (server-sent events), on a thread of its own, until the
    /// server closes it or ``close()``.
    public final class Stream: Sendable {
        private struct State {
            var received: [UInt8] = []
            /// Set when the reading thread has closed the socket: its number may belong to
            /// another connection from then on, which ``close()`` must not shut down.
            var ended = false
        }

        private let state = Locked(State())
        private let socket: Int32

        fileprivate init(socket: Int32) {
            self.socket = socket
            Thread { [self] in
                var buffer = [UInt8](repeating: 0, count: 65_536)
                while true {
                    let count = buffer.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
                    if count < 0, errno == EINTR { continue }
                    guard count > 0 else { break }
                    state.withLock { $0.received += buffer[..<count] }
                }
                state.withLock { state in
                    state.ended = true
                    Glibc.close(socket)
                }
            }.start()
        }

        /// The status code, once the head has arrived (0 before).
        public var statusCode: Int {
            let bytes = state.withLock { $0.received }
            return (try? LoopbackHTTP.parse(bytes).statusCode) ?? 0
        }

        /// The body so far (its complete chunks, when chunked), as text.
        public var text: String {
            let bytes = state.withLock { $0.received }
            return (try? LoopbackHTTP.parse(bytes)).map { String(decoding: $0.body, as: UTF8.self) } ?? ""
        }

        /// Whether the server closed the stream (or ``close()`` ended it).
        public var ended: Bool { state.withLock { $0.ended } }

        /// Ends the stream (the reading thread closes the socket).
        public func close() {
            // (Under the lock the thread closes the socket with: never a number reused since.)
            state.withLock { state in
                if !state.ended { shutdown(socket, Int32(SHUT_RDWR)) }
            }
        }
    }

    /// Opens `path` as a streamed GET.
    public static func stream(port: Int, path: String, headers: [String: String] = [:]) throws -> Stream {
        let socket = try connect(port: port)
        do {
            try send(socket, head(method: "GET", path: path, port: port, headers: headers, body: nil))
        } catch {
            close(socket)
            throw error
        }
        return Stream(socket: socket)
    }

    // MARK: - The wire

    /// The longest wait between two reads, in seconds: long, because a test's server shares two
    /// cores with a thousand other tests in the parallel phase, where a request that takes
    /// milliseconds alone has been seen to wait more than 30 s (the suites' limit is two minutes).
    static let readTimeout = 90

    private static func connect(port: Int) throws -> Int32 {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw Failure(description: "socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            let code = errno
            close(socket)
            throw Failure(description: "connect to 127.0.0.1:\(port): \(String(cString: strerror(code)))")
        }
        var timeout = timeval(tv_sec: readTimeout, tv_usec: 0)
        setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        return socket
    }

    private static func head(method: String, path: String, port: Int, headers: [String: String], body: Data?) -> [UInt8] {
        var text = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n"
        for (name, value) in headers.sorted(by: { $0.key < $1.key }) { text += "\(name): \(value)\r\n" }
        if let body {
            if headers.keys.contains(where: { $0.lowercased() == "content-type" }) == false {
                text += "Content-Type: application/json\r\n"
            }
            text += "Content-Length: \(body.count)\r\n"
        }
        return Array((text + "\r\n").utf8)
    }

    private static func send(_ socket: Int32, _ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { Glibc.send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { throw Failure(description: "send: \(String(cString: strerror(errno)))") }
            sent += count
        }
    }

    /// Where the body starts (after the blank line), if the head has arrived.
    fileprivate static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 0...(bytes.count - 4) where bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13 && bytes[index + 3] == 10 {
            return index + 4
        }
        return nil
    }

    fileprivate static func parse(_ bytes: [UInt8]) throws -> Response {
        guard let end = headEnd(bytes) else {
            throw Failure(description: "no complete HTTP answer: \(String(decoding: bytes.prefix(200), as: UTF8.self))")
        }
        let lines = String(decoding: bytes[..<(end - 4)], as: UTF8.self).components(separatedBy: "\r\n")
        let status = lines.first?.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
        let headers = lines.dropFirst().compactMap { line -> (name: String, value: String)? in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        var body = Array(bytes[end...])
        if headers.contains(where: { $0.name.lowercased() == "transfer-encoding" && $0.value.lowercased().contains("chunked") }) {
            body = dechunked(body)
        }
        return Response(statusCode: status, headers: headers, body: Data(body))
    }

    private static func dechunked(_ bytes: [UInt8]) -> [UInt8] {
        var result: [UInt8] = []
        var index = 0
        while index < bytes.count - 1 {
            guard let lineEnd = (index..<bytes.count - 1).first(where: { bytes[$0] == 13 && bytes[$0 + 1] == 10 }),
                let size = Int(String(decoding: bytes[index..<lineEnd], as: UTF8.self).split(separator: ";").first ?? "", radix: 16),
                size > 0
            else { break }
            let start = lineEnd + 2
            result += bytes[start..<min(bytes.count, start + size)]
            index = start + size + 2
        }
        return result
    }
}
