import Foundation
import Logging
import PostgresNIO
import Tessera
import TesseraFleet
import TesseraTesting
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A fleet for a test: its own PostgreSQL 15, a loopback origin, a shared download root, and real
/// `tessera serve --fleet` worker processes (the built executable, next to the test bundle), with
/// a connection of the test's own to look into the queue.
final class FleetHarness: @unchecked Sendable {
    /// One worker process.
    final class Worker: @unchecked Sendable {
        let index: Int
        let process: SpawnedProcess
        let stateDirectory: String
        let errors: String
        let output: String
        var pid: Int32 { process.pid }

        init(index: Int, process: SpawnedProcess, stateDirectory: String, errors: String, output: String) {
            self.index = index
            self.process = process
            self.stateDirectory = stateDirectory
            self.errors = errors
            self.output = output
        }

        /// What it wrote on standard error so far.
        var log: String { fileText(errors) }
        /// What it wrote on standard output so far.
        var standardOutput: String { fileText(output) }

        /// The port its RPC listens on, once it prints it (`nil` after 30 s).
        func port() async -> Int? {
            var port: Int?
            _ = await eventually(within: .seconds(30)) {
                let text = standardOutput
                guard let range = text.range(of: "listening on http://127.0.0.1:") else { return false }
                port = Int(text[range.upperBound...].prefix { $0.isNumber })
                return port != nil
            }
            return port
        }

        /// The result of a JSON-RPC call to this worker (no secret); throws the error object.
        func call(_ method: String, _ params: [Any] = []) async throws -> Any? {
            guard let port = await port() else { throw FleetTestFailure("worker \(index) does not listen") }
            let request: [String: Any] = ["jsonrpc": "2.0", "id": 1, "method": method, "params": params]
            let answer = try await LoopbackHTTP.request(
                port: port, method: "POST", path: "/jsonrpc", body: try JSONSerialization.data(withJSONObject: request))
            let object = try JSONSerialization.jsonObject(with: answer.body) as? [String: Any]
            if let error = object?["error"] as? [String: Any] { throw FleetTestFailure("\(method): \(error)") }
            return object?["result"]
        }
    }

    let server: PostgresTestServer
    let origin: LoopbackOrigin
    let connection: FleetConnection
    let directory: String
    var root: String { directory + "/shared" }
    let lease: Double
    /// What every worker's environment has besides the test's (a fake ffmpeg's PATH, say).
    let environment: [String: String]
    /// Options every worker's `serve` gets besides the harness's (`--fleet-host-connections 3`).
    let arguments: [String]
    private(set) var workers: [Worker] = []
    private var nextIndex = 0

    static var executable: String {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent().appendingPathComponent("tessera").path
    }

    private init(
        server: PostgresTestServer, origin: LoopbackOrigin, connection: FleetConnection, directory: String, lease: Double,
        environment: [String: String], arguments: [String]
    ) {
        self.arguments = arguments
        self.server = server
        self.origin = origin
        self.connection = connection
        self.directory = directory
        self.lease = lease
        self.environment = environment
    }

    /// A database, an origin and `workers` workers (each `-j jobs`), lease `lease` seconds, with
    /// `environment` added to each worker's.
    static func start(
        workers count: Int, jobs: Int = 3, lease: Double = 2, environment: [String: String] = [:], arguments: [String] = []
    ) async throws -> FleetHarness {
        let server = try await PostgresTestServer.start()
        let origin: LoopbackOrigin
        do {
            origin = try await LoopbackOrigin.start(threads: 2)
        } catch {
            await server.stop()
            throw error
        }
        var logger = Logger(label: "tessera.fleet.test")
        logger.logLevel = .error
        let connection: FleetConnection
        do {
            connection = try await FleetConnection.open(try FleetDatabase(url: server.url), connections: 3, logger: logger)
        } catch {
            await server.stop()
            try? await origin.shutdown()
            throw error
        }
        let directory = NSTemporaryDirectory() + "tessera-fleet-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory + "/shared", withIntermediateDirectories: true)
        let harness = FleetHarness(
            server: server, origin: origin, connection: connection, directory: directory, lease: lease, environment: environment,
            arguments: arguments)
        for _ in 0..<count { try harness.startWorker(jobs: jobs) }
        return harness
    }

    /// Runs `body` with a fleet of `workers` workers, once they all joined, and tears it down;
    /// an error is recorded with the workers' logs.
    static func with(
        workers: Int, jobs: Int, lease: Double, environment: [String: String] = [:], arguments: [String] = [],
        _ body: (FleetHarness) async throws -> Void
    ) async throws {
        let fleet = try await start(workers: workers, jobs: jobs, lease: lease, environment: environment, arguments: arguments)
        do {
            #expect(await eventually(within: .seconds(30)) { (try? await fleet.activeWorkerPids().count) == workers }, "\(fleet.logs)")
            try await body(fleet)
        } catch {
            Issue.record("\(error)\n\(fleet.logs)")
        }
        await fleet.tearDown()
    }

    /// Starts another worker.
    @discardableResult
    func startWorker(jobs: Int = 3) throws -> Worker {
        let index = nextIndex
        nextIndex += 1
        let state = directory + "/state-\(index)"
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        let errors = directory + "/worker-\(index).err"
        let errFile = open(errors, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        defer { if errFile >= 0 { close(errFile) } }
        let output = directory + "/worker-\(index).out"
        let outFile = open(output, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        defer { if outFile >= 0 { close(outFile) } }
        let process = try SpawnedProcess(
            Self.executable,
            [
                "serve", "--fleet", server.url, "--fleet-lease", String(lease), "--dir", root, "--state-dir", state,
                "--rpc-listen-port", "0", "-j", String(jobs), "-N", "8", "-x", "2", "--proxy", "", "--no-cache", "-v",
            ] + arguments,
            environment: childEnvironment(adding: environment.merging(["XDG_CONFIG_HOME": directory + "/no-config"]) { $1 }),
            directory: directory, input: .null,
            output: .descriptor(outFile), error: .descriptor(errFile))
        let worker = Worker(index: index, process: process, stateDirectory: state, errors: errors, output: output)
        workers.append(worker)
        return worker
    }

    /// Queues plain downloads of `paths` on the origin (as `tessera fleet add` would).
    func enqueue(_ paths: [String]) async throws -> [String] {
        let tasks = try paths.map { try FleetQueue.NewTask(DirectEntity(url: origin.url($0))) }
        try await connection.queue.enqueue(tasks)
        return tasks.map(\.key)
    }

    /// Runs `tessera fleet add` with `inputs` (manifests resolved as `get` does).
    func fleetAdd(_ inputs: [String]) async throws -> String {
        let captured = try await onThread {
            try SpawnedProcess.capture(
                Self.executable, ["fleet", "add", "--fleet", self.server.url, "--proxy", ""] + inputs,
                environment: childEnvironment(adding: ["XDG_CONFIG_HOME": self.directory + "/no-config"]), mergingErrors: true,
                timeout: .seconds(60))
        }
        return String(decoding: captured.output, as: UTF8.self)
    }

    /// A task's row: state, owner's pid, epoch.
    struct Row: Sendable, Equatable {
        var state: String
        var ownerPid: Int?
        var epoch: Int64
    }

    func row(_ key: String) async throws -> Row? {
        let rows = try await connection.queue.client.query(
            """
            SELECT t.state, w.pid, t.epoch FROM tessera_fleet_tasks t LEFT JOIN tessera_fleet_workers w ON w.id = t.owner WHERE t.id = \(key)
            """)
        for try await (state, pid, epoch) in rows.decode((String, Int?, Int64).self) { return Row(state: state, ownerPid: pid, epoch: epoch) }
        return nil
    }

    /// Tasks by queue state.
    func states() async throws -> [String: Int] {
        try await FleetStatus.read(connection.queue).queue
    }

    /// Completions logged per task (a double completion would show as 2).
    func completions() async throws -> [String: Int] {
        var result: [String: Int] = [:]
        let rows = try await connection.queue.client.query("SELECT task_id, count(*)::int FROM tessera_fleet_completions GROUP BY task_id")
        for try await (key, count) in rows.decode((String, Int).self) { result[key] = count }
        return result
    }

    /// Active workers' pids.
    func activeWorkerPids() async throws -> [Int] {
        try await FleetStatus.read(connection.queue).workers.filter { $0.state == "active" }.map(\.pid)
    }

    /// Bytes done of a task, from the progress table.
    func progress(_ key: String) async throws -> Int64 {
        let rows = try await connection.queue.client.query("SELECT bytes_done FROM tessera_fleet_progress WHERE task_id = \(key)")
        for try await bytes in rows.decode(Int64.self) { return bytes }
        return 0
    }

    func worker(pid: Int?) -> Worker? {
        workers.first { Int($0.pid) == pid }
    }

    /// Every worker's log, for a failing test's message.
    var logs: String {
        workers.map { "--- worker \($0.index) (pid \($0.pid))\n" + String($0.log.suffix(3000)) }.joined(separator: "\n")
    }

    /// Stops every worker (SIGKILL: the tests judge what the fleet did, not how it stops), the
    /// origin and the server, and deletes the directory.
    func tearDown() async {
        for worker in workers {
            worker.process.send(SIGCONT)
            worker.process.send(SIGKILL)
            _ = await worker.process.ended()
        }
        await connection.close()
        try? await origin.shutdown()
        await server.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// Why a step of a fleet test failed.
struct FleetTestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
