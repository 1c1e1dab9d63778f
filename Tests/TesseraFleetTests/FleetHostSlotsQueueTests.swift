import Logging
import PostgresNIO
import Tessera
@testable import TesseraFleet
import TesseraTesting
import Testing

/// The per-host slots in a real PostgreSQL 15: schema version 3 and its migration, the acquire
/// under its advisory lock, slots that count only while their worker's lease is live.
@Suite(.enabled(if: PostgresTestServer.shouldRun, Comment(rawValue: PostgresTestServer.skipReason)), .timeLimit(.minutes(3)))
struct FleetHostSlotsQueueTests {
    let host = "origin:80"

    @Test func aVersion2DatabaseMigratesToHostSlots() async throws {
        let server = try await PostgresTestServer.start()
        var logger = Logger(label: "test")
        logger.logLevel = .error
        do {
            let database = try FleetDatabase(url: server.url)
            // A database left by the previous release: version 2, a worker registered.
            let old = FleetQueue(client: FleetQueue.makeClient(database, connections: 1, logger: logger), database: database, logger: logger)
            let run = Task { await old.client.run() }
            try await FleetSchema.migrate(old.client, database: database, to: 2, logger: logger)
            let worker = try await old.join(host: "a", pid: 1, port: nil, maxTasks: 1, lease: .seconds(30))
            run.cancel()
            await run.value
            let connection = try await FleetConnection.open(database, logger: logger)
            var versions: [Int] = []
            for try await version in try await connection.queue.client.query("SELECT version FROM tessera_fleet_schema ORDER BY version").decode(Int.self) {
                versions.append(version)
            }
            #expect(versions == [1, 2, 3])
            let answer = try await connection.queue.acquireHostSlots(host: host, worker: worker, want: 2, limit: 3)
            #expect(answer.slots == 2, "the worker registered under version 2 takes slots under version 3")
            await connection.close()
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
    }

    @Test func slotsNeverAddUpAboveTheLimitAndALapsedLeaseFreesThem() async throws {
        try await FleetQueueTests.withFleet { connection, _ in
            let queue = connection.queue
            let a = try await queue.join(host: "a", pid: 1, port: nil, maxTasks: 4, lease: .seconds(60))
            let b = try await queue.join(host: "b", pid: 2, port: nil, maxTasks: 4, lease: .seconds(60))
            let c = try await queue.join(host: "c", pid: 3, port: nil, maxTasks: 4, lease: .seconds(60))
            #expect(try await queue.acquireHostSlots(host: host, worker: a, want: 3, limit: 3).slots == 3)
            let waiting = try await queue.acquireHostSlots(host: host, worker: b, want: 3, limit: 3)
            #expect(waiting.slots == 0 && waiting.fairShare == 2)
            let told = try await queue.acquireHostSlots(host: host, worker: a, want: 3, limit: 3)
            #expect(told.slots == 3 && told.othersWaiting && told.fairShare == 2, "a learns that b waits")
            // Asking at once, under the per-host lock: never more than the limit in all.
            try await queue.releaseHostSlots(host: host, worker: a, to: 0)
            async let fromB = queue.acquireHostSlots(host: host, worker: b, want: 3, limit: 3)
            async let fromC = queue.acquireHostSlots(host: host, worker: c, want: 3, limit: 3)
            let (answerB, answerC) = try await (fromB, fromC)
            #expect(answerB.slots + answerC.slots == 3)
            // A lapsed lease: its slots count no more, without anyone deleting them.
            try await queue.releaseHostSlots(host: host, worker: c, to: 0)
            try await queue.releaseHostSlots(host: host, worker: b, to: 0)
            #expect(try await queue.acquireHostSlots(host: host, worker: a, want: 3, limit: 3).slots == 3)
            #expect(try await queue.acquireHostSlots(host: host, worker: b, want: 3, limit: 3).slots == 0)
            // a's lease ends (by the database's clock, as a killed worker's would).
            try await queue.client.query("UPDATE tessera_fleet_workers SET expires_at = now() - interval '1 second' WHERE id = \(a)")
            #expect(try await queue.acquireHostSlots(host: host, worker: b, want: 3, limit: 3).slots == 3)
            #expect(try await queue.acquireHostSlots(host: host, worker: a, want: 3, limit: 3).slots == 0, "a dead worker takes nothing")
            _ = try await queue.rescue()
            try await queue.pruneHostSlots()
            var rows = 0
            for try await _ in try await queue.client.query("SELECT worker FROM tessera_fleet_host_slots WHERE worker = \(a)").decode(Int64.self) {
                rows += 1
            }
            #expect(rows == 0, "the rescue's prune deletes a dead worker's rows")
        }
    }
}
