import Foundation
import Testing
import Tessera
import TesseraTesting

/// `tessera serve` run as a process, as its users run it, on a port of its choosing on
/// 127.0.0.1; its JSON-RPC and native API reached with a few lines of plain HTTP.
struct ServeProcess {
    let process: SpawnedProcess
    let port: Int
    let output: String
    let errors: String

    /// Starts `tessera serve` with the test's download root and state directory (and `extra`),
    /// and returns once it listens.
    static func start(_ cli: CLI, _ extra: [String] = [], environment: [String: String] = [:]) async throws -> ServeProcess {
        let arguments = ["serve", "--rpc-listen-port", "0", "-d", cli.downloads, "--state-dir", cli.state, "--proxy", ""] + extra
        let (process, out, err) = try cli.start(arguments, environment: environment)
        var port: Int?
        let listening = await eventually(within: .seconds(60)) {
            let text = (try? String(contentsOfFile: out, encoding: .utf8)) ?? ""
            guard let range = text.range(of: "listening on http://127.0.0.1:") else { return process.termination != nil }
            port = Int(text[range.upperBound...].prefix { $0.isNumber })
            return true
        }
        guard listening, let port else {
            process.terminate()
            _ = await process.ended()
            let errors = (try? String(contentsOfFile: err, encoding: .utf8)) ?? ""
            throw ServeFailure("tessera serve did not start listening: \(errors)")
        }
        return ServeProcess(process: process, port: port, output: out, errors: err)
    }

    /// Sends SIGTERM and waits for the process to end; its exit status.
    func stop() async -> Int32 {
        process.terminate()
        if await !process.exited(within: .seconds(30)) {
            Issue.record("tessera serve did not stop on SIGTERM")
            process.send(SIGKILL)
        }
        return await process.ended().status
    }

    /// What the process wrote on standard output.
    var standardOutput: String { (try? String(contentsOfFile: output, encoding: .utf8)) ?? "" }
    /// What the process wrote on standard error.
    var standardError: String { (try? String(contentsOfFile: errors, encoding: .utf8)) ?? "" }

    /// The result of a JSON-RPC call (no secret), or the error object's message.
    func call(_ method: String, _ params: [Any]) async throws -> Any? {
        let request: [String: Any] = ["jsonrpc": "2.0", "id": 1, "method": method, "params": params]
        let body = try JSONSerialization.data(withJSONObject: request)
        let answer = try await http("POST", "/jsonrpc", body: body)
        let object = try JSONSerialization.jsonObject(with: answer) as? [String: Any]
        if let error = object?["error"] as? [String: Any] { throw ServeFailure("\(method): \(error)") }
        return object?["result"]
    }

    /// The native API's tasks (`/api/tasks`).
    func tasks() async throws -> [[String: Any]] {
        let data = try await http("GET", "/api/tasks", body: nil)
        let object = try JSONSerialization.jsonObject(with: data)
        return (object as? [[String: Any]]) ?? ((object as? [String: Any])?["tasks"] as? [[String: Any]]) ?? []
    }

    /// One HTTP/1.1 request on a connection of its own (closed after the answer); the body of
    /// the answer.
    func http(_ method: String, _ path: String, body: Data?) async throws -> Data {
        let port = self.port
        return try await onThread {
            let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard socket >= 0 else { throw POSIXError(.EMFILE) }
            defer { close(socket) }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard connected == 0 else { throw POSIXError(.ECONNREFUSED) }
            var timeout = timeval(tv_sec: 30, tv_usec: 0)
            setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n"
            if let body { head += "Content-Type: application/json\r\nContent-Length: \(body.count)\r\n" }
            let request = Array((head + "\r\n").utf8) + Array(body ?? Data())
            var sent = 0
            while sent < request.count {
                let count = request[sent...].withUnsafeBytes { send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                guard count > 0 else { throw POSIXError(.EPIPE) }
                sent += count
            }
            var response: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = buffer.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
                guard count > 0 else { break }
                response += buffer[..<count]
            }
            let text = String(decoding: response, as: UTF8.self)
            guard let end = text.range(of: "\r\n\r\n") else { throw ServeFailure("no HTTP answer: \(text)") }
            let headers = text[..<end.lowerBound].lowercased()
            let bodyStart = text.utf8.distance(from: text.startIndex, to: end.upperBound)
            var payload = Array(response[bodyStart...])
            if headers.contains("transfer-encoding: chunked") { payload = Self.dechunked(payload) }
            return Data(payload)
        }
    }

    private static func dechunked(_ bytes: [UInt8]) -> [UInt8] {
        var result: [UInt8] = []
        var index = 0
        while index < bytes.count {
            guard let lineEnd = (index..<bytes.count - 1).first(where: { bytes[$0] == 13 && bytes[$0 + 1] == 10 }),
                let size = Int(String(decoding: bytes[index..<lineEnd], as: UTF8.self).split(separator: ";")[0], radix: 16), size > 0
            else { break }
            let start = lineEnd + 2
            result += bytes[start..<min(bytes.count, start + size)]
            index = start + size + 2
        }
        return result
    }
}

/// Why a step with `tessera serve` failed.
struct ServeFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
