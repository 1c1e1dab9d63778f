// tessera-fleet-bench: `make fleet-demo` and `make fleet-bench`.
//
//   tessera-fleet-bench demo  --tessera PATH   three workers, one SIGKILLed mid-download, every file
//                                              verified, the takeover time printed
//   tessera-fleet-bench bench --tessera PATH   the targets: takeover after SIGKILL (lease 2 s
//                                              and the defaults), enqueue to first byte, claims/s
//                                              with 100,000 queued
//   tessera-fleet-bench claims --tessera PATH  the claims/s rows only
//
// Everything runs on this machine: a PostgreSQL 15 of its own (PostgresTestServer), a loopback
// origin, and real `tessera serve --fleet` processes; all of it is stopped at the end.

import Foundation
import Logging
import PostgresNIO
import Tessera
import TesseraFleet
import TesseraTesting

#if canImport(Glibc)
import Glibc
#endif


struct Failure: Error, CustomStringConvertible {
    var description: String
}

let arguments = CommandLine.arguments
guard arguments.count >= 2, ["demo", "bench", "claims"].contains(arguments[1]),
    let tesseraIndex = arguments.firstIndex(of: "--tessera"), tesseraIndex + 1 < arguments.count
else {
    FileHandle.standardError.write(Data("usage: tessera-fleet-bench demo|bench|claims --tessera PATH\n".utf8))
    exit(2)
}
let tessera = arguments[tesseraIndex + 1]
var logger = Logger(label: "fleet-bench")
logger.logLevel = .error

/// A database, an origin, a shared root and worker processes.
final class Fleet: @unchecked Sendable {
    let server: PostgresTestServer
    let origin: LoopbackOrigin
    let connection: FleetConnection
    let directory: String
    var root: String { directory + "/shared" }
    var workers: [(pid: Int32, process: SpawnedProcess)] = []

    init(server: PostgresTestServer, origin: LoopbackOrigin, connection: FleetConnection, directory: String) {
        self.server = server
        self.origin = origin
        self.connection = connection
        self.directory = directory
    }

    static func start() async throws -> Fleet {
        let server = try await PostgresTestServer.start()
        let origin = try await LoopbackOrigin.start(threads: 2)
        let connection = try await FleetConnection.open(try FleetDatabase(url: server.url), connections: 8, logger: logger)
        let directory = NSTemporaryDirectory() + "tessera-fleet-bench-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory + "/shared", withIntermediateDirectories: true)
        return Fleet(server: server, origin: origin, connection: connection, directory: directory)
    }

    func startWorker(lease: Double, jobs: Int = 3) throws {
        let index = workers.count
        let state = directory + "/state-\(index)"
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        let process = try SpawnedProcess(
            tessera,
            [
                "serve", "--fleet", server.url, "--fleet-lease", String(lease), "--dir", root, "--state-dir", state,
                "--rpc-listen-port", "0", "-j", String(jobs), "-x", "2", "--proxy", "", "--no-cache",
            ],
            environment: childEnvironment(), directory: directory, input: .null, output: .null, error: .null)
        workers.append((process.pid, process))
    }

    func waitForWorkers(_ count: Int) async throws {
        guard await eventually(within: .seconds(30), { (try? await FleetStatus.read(self.connection.queue).workers.filter { $0.state == "active" }.count) == count })
        else { throw Failure(description: "the workers did not join") }
    }

    /// Task key -> (state, owner pid, epoch).
    func rows() async throws -> [String: (state: String, pid: Int?, epoch: Int64)] {
        var result: [String: (String, Int?, Int64)] = [:]
        let rows = try await connection.queue.client.query(
            "SELECT t.id, t.state, w.pid, t.epoch FROM tessera_fleet_tasks t LEFT JOIN tessera_fleet_workers w ON w.id = t.owner")
        for try await (key, state, pid, epoch) in rows.decode((String, String, Int?, Int64).self) { result[key] = (state, pid, epoch) }
        return result
    }

    func progress(_ key: String) async throws -> Int64 {
        for try await bytes in try await connection.queue.client.query("SELECT bytes_done FROM tessera_fleet_progress WHERE task_id = \(key)")
            .decode(Int64.self)
        {
            return bytes
        }
        return 0
    }

    func stop() async {
        for worker in workers {
            worker.process.send(SIGKILL)
            _ = await worker.process.ended()
        }
        await connection.close()
        try? await origin.shutdown()
        await server.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// Enqueues throttled plain files and kills the worker holding the first one once it has
/// `after` bytes; returns the takeover time (until every task it held runs elsewhere or is done).
func killAndMeasure(_ fleet: Fleet, paths: [String], after: Int64) async throws -> (Duration, victim: Int32) {
    let keys = try await enqueue(fleet, paths)
    guard await eventually(within: .seconds(60), { ((try? await fleet.progress(keys[0])) ?? 0) >= after }) else {
        throw Failure(description: "the first download did not start")
    }
    let before = try await fleet.rows()
    guard let pid = before[keys[0]]?.pid, let victim = fleet.workers.first(where: { Int($0.pid) == pid }) else {
        throw Failure(description: "nobody holds the first download")
    }
    let held = before.filter { $0.value.state == "running" && $0.value.pid == pid }
    victim.process.send(SIGKILL)
    let killed = ContinuousClock.now
    guard await eventually(within: .seconds(60), every: .milliseconds(10), {
        guard let now = try? await fleet.rows() else { return false }
        return held.allSatisfy { key, was in
            guard let row = now[key] else { return false }
            return row.state == "completed" || (row.state == "running" && row.epoch > was.epoch)
        }
    }) else { throw Failure(description: "no takeover within 60 s") }
    return (ContinuousClock.now - killed, victim.pid)
}

func enqueue(_ fleet: Fleet, _ paths: [String]) async throws -> [String] {
    let tasks = try paths.map { try FleetQueue.NewTask(DirectEntity(url: fleet.origin.url($0))) }
    try await fleet.connection.queue.enqueue(tasks)
    return tasks.map(\.key)
}

func seconds(_ duration: Duration) -> String {
    String(format: "%.2f s", Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18)
}

// MARK: - make fleet-demo

func demo() async throws {
    let fleet = try await Fleet.start()
    do {
        print("fleet-demo: PostgreSQL 15 on 127.0.0.1:\(fleet.server.port), origin on 127.0.0.1:\(fleet.origin.port), shared root \(fleet.root)")
        for _ in 0..<3 { try fleet.startWorker(lease: 2) }
        try await fleet.waitForWorkers(3)
        print("fleet-demo: 3 workers joined (lease 2 s, heartbeat every 0.67 s)")
        let size: Int64 = 12 << 20
        let paths = (0..<6).map { "/bytes/\(size)/demo-\($0).bin" }
        for path in paths { fleet.origin.inject(.throttle(bytesPerSecond: 2 << 20), at: path) }
        let dash = DASHFixture.install(on: fleet.origin)
        let metalink = MetalinkFixture.install(on: fleet.origin)
        let add = try SpawnedProcess.capture(
            tessera, ["fleet", "add", "--fleet", fleet.server.url, "--proxy", ""] + dash.inputs + metalink.inputs,
            environment: childEnvironment(), mergingErrors: true, timeout: .seconds(60))
        print(String(decoding: add.output, as: UTF8.self), terminator: "")
        let (takeover, victim) = try await killAndMeasure(fleet, paths: paths, after: 3 << 20)
        print("fleet-demo: worker pid \(victim) SIGKILLed mid-download; its tasks were taken over in \(seconds(takeover))")
        guard await eventually(within: .seconds(120), { (try? await fleet.rows().values.allSatisfy { $0.state == "completed" }) ?? false }) else {
            throw Failure(description: "not every task completed")
        }
        var problems: [String] = []
        for path in paths {
            let name = String(path.split(separator: "/").last!)
            if !(await fleet.origin.content(at: path).verifyFile(atPath: fleet.root + "/" + name, size: size)) { problems.append(name) }
        }
        problems += await dash.verify(downloadRoot: fleet.root)
        problems += await metalink.verify(downloadRoot: fleet.root)
        let rows = try await fleet.rows()
        print("")
        print("task".padding(toLength: 72, withPad: " ", startingAt: 0) + "state      worker  claims")
        for (key, row) in rows.sorted(by: { $0.key < $1.key }) {
            print(String(UntrustedText.printable(key, limit: 70)).padding(toLength: 72, withPad: " ", startingAt: 0)
                + row.state.padding(toLength: 11, withPad: " ", startingAt: 0) + String(row.pid ?? 0).padding(toLength: 8, withPad: " ", startingAt: 0)
                + String(row.epoch))
        }
        print("")
        print(try await FleetStatus.read(fleet.connection.queue).lines.joined(separator: "\n"))
        print("")
        if problems.isEmpty {
            print("fleet-demo: every file verified byte for byte; takeover after SIGKILL \(seconds(takeover))")
        } else {
            print("fleet-demo: FAILED: \(problems)")
        }
        await fleet.stop()
        if !problems.isEmpty { exit(1) }
    } catch {
        await fleet.stop()
        throw error
    }
}

// MARK: - make fleet-bench

func bench(claimsOnly: Bool = false) async throws {
    var results: [(String, String, String)] = []
    // Takeover after SIGKILL, lease 2 s (test timing) and 15 s (the defaults).
    for (lease, target) in claimsOnly ? [] : [(2.0, 4.0), (15.0, 20.0)] {
        let fleet = try await Fleet.start()
        do {
            for _ in 0..<3 { try fleet.startWorker(lease: lease) }
            try await fleet.waitForWorkers(3)
            let size: Int64 = 64 << 20
            let paths = (0..<3).map { "/bytes/\(size)/take-\($0).bin" }
            for path in paths { fleet.origin.inject(.throttle(bytesPerSecond: 1 << 20), at: path) }
            let (takeover, _) = try await killAndMeasure(fleet, paths: paths, after: 1 << 20)
            results.append(("takeover after SIGKILL, lease \(Int(lease)) s", seconds(takeover), "<= \(Int(target)) s"))
            print("takeover (lease \(Int(lease)) s): \(seconds(takeover))")
        } catch {
            await fleet.stop()
            throw error
        }
        await fleet.stop()
    }
    // Enqueue to first byte: two idle workers, 40 downloads queued one at a time.
    if !claimsOnly {
        let fleet = try await Fleet.start()
        do {
            for _ in 0..<2 { try fleet.startWorker(lease: 15) }
            try await fleet.waitForWorkers(2)
            var samples: [Double] = []
            for index in 0..<40 {
                let path = "/bytes/65536/first-\(index).bin"
                let start = ContinuousClock.now
                _ = try await enqueue(fleet, [path])
                while fleet.origin.bytesServed(for: path) == 0 {
                    guard ContinuousClock.now - start < .seconds(10) else { throw Failure(description: "no first byte in 10 s") }
                    try await Task.sleep(for: .microseconds(500))
                }
                let elapsed = ContinuousClock.now - start
                samples.append(Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15)
                try await Task.sleep(for: .milliseconds(50))
            }
            samples.sort()
            let p50 = samples[samples.count / 2], p90 = samples[samples.count * 9 / 10]
            results.append(("enqueue to first byte, p50 (p90)", String(format: "%.1f ms (%.1f ms)", p50, p90), "p50 <= 100 ms"))
            print(String(format: "enqueue to first byte: p50 %.1f ms, p90 %.1f ms", p50, p90))
        } catch {
            await fleet.stop()
            throw error
        }
        await fleet.stop()
    }
    // Claims per second: 4 claimers (a worker each) taking one task per statement, then ten, with
    // 5,000 and with 100,000 tasks queued.
    for depth in [5_000, 100_000] {
        let server = try await PostgresTestServer.start()
        let connection = try await FleetConnection.open(try FleetDatabase(url: server.url), connections: 8, logger: logger)
        do {
            let queue = connection.queue
            var start = 0
            while start < depth {
                let count = min(5_000, depth - start)
                try await queue.enqueue((start..<start + count).map {
                    FleetQueue.NewTask(key: "direct:bench-\($0)", entity: "{}", title: "", groupKey: nil)
                })
                start += count
            }
            try await queue.client.query("ANALYZE tessera_fleet_tasks")
            var workers: [Int64] = []
            for index in 0..<4 { workers.append(try await queue.join(host: "bench", pid: Int32(index), port: nil, maxTasks: 1, lease: .seconds(600))) }
            for (batch, label) in [(1, "1 task per claim"), (10, "10 tasks per claim")] {
                let total = 2_000
                let share = total / workers.count
                let began = ContinuousClock.now
                try await withThrowingTaskGroup(of: Int.self) { group in
                    for worker in workers {
                        group.addTask {
                            var claimed = 0
                            while claimed < share {
                                let got = try await queue.claim(worker: worker, count: batch).count
                                guard got > 0 else { throw Failure(description: "the queue ran dry") }
                                claimed += got
                            }
                            return claimed
                        }
                    }
                    try await group.waitForAll()
                }
                let elapsed = ContinuousClock.now - began
                let rate = Double(total) / (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
                results.append(("claims/s, \(depth) queued, \(label), 4 workers", String(format: "%.0f", rate), ">= 2,000"))
                print(String(format: "claims/s with %d queued (%@): %.0f", depth, label, rate))
            }
        } catch {
            await connection.close()
            await server.stop()
            throw error
        }
        await connection.close()
        await server.stop()
    }
    print("")
    print("| target | measured | goal |")
    print("|---|---|---|")
    for (name, value, goal) in results { print("| \(name) | \(value) | \(goal) |") }
}

do {
    if arguments[1] == "demo" { try await demo() } else { try await bench(claimsOnly: arguments[1] == "claims") }
} catch {
    FileHandle.standardError.write(Data("tessera-fleet-bench: \(error)\n".utf8))
    exit(1)
}
