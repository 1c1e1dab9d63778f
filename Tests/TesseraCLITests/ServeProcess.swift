import Foundation
import Testing
import Tessera
import TesseraTesting

/// `tessera serve` run as a process, as its users run it, on a port of its choosing on
/// 127.0.0.1; its JSON-RPC and native API reached with plain HTTP (`LoopbackHTTP`).
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
            let text = fileText(out)
            guard let range = text.range(of: "listening on http://127.0.0.1:") else { return process.termination != nil }
            port = Int(text[range.upperBound...].prefix { $0.isNumber })
            return true
        }
        guard listening, let port else {
            process.terminate()
            _ = await process.ended()
            let errors = fileText(err)
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
    var standardOutput: String { fileText(output) }
    /// What the process wrote on standard error.
    var standardError: String { fileText(errors) }

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

    /// One request to the server; the body of its answer.
    func http(_ method: String, _ path: String, body: Data?) async throws -> Data {
        try await LoopbackHTTP.request(port: port, method: method, path: path, body: body).body
    }
}

/// Why a step with `tessera serve` failed.
struct ServeFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
