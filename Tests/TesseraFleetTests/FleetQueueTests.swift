import Foundation
import Logging
import PostgresNIO
import Tessera
import TesseraFleet
import TesseraTesting
import Testing

/// The fleet's statements against a real PostgreSQL 15: schema and its version, claims, the
/// epoch fence, heartbeats and takeover by the database's clock.
@Suite(.enabled(if: PostgresTestServer.shouldRun, Comment(rawValue: PostgresTestServer.skipReason)), .timeLimit(.minutes(3)))
struct FleetQueueTests {
    static func withFleet(_ body: (FleetConnection, PostgresTestServer) async throws -> Void) async throws {
        let server = try await PostgresTestServer.start()
        var logger = Logger(label: "test")
        logger.logLevel = .error
        do {
            let connection = try await FleetConnection.open(try FleetDatabase(url: server.url), connections: 4, logger: logger)
            do {
                try await body(connection, server)
            } catch {
                await connection.close()
                throw error
            }
            await connection.close()
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
    }

    static func tasks(_ count: Int, priority: (Int) -> Int = { _ in 0 }) -> [FleetQueue.NewTask] {
        (0..<count).map { index in
            FleetQueue.NewTask(key: "direct:t\(index)", entity: "{}", title: "t\(index)", groupKey: nil, priority: priority(index))
        }
    }

    @Test func theSchemaIsVersionedAndANewerOneIsRefusedWithTheServerNamed() async throws {
        try await Self.withFleet { connection, server in
            // Opening again (a second worker) migrates nothing.
            var logger = Logger(label: "test")
            logger.logLevel = .error
            let again = try await FleetConnection.open(try FleetDatabase(url: server.url), logger: logger)
            await again.close()
            var versions: [Int] = []
            for try await version in try await connection.queue.client.query("SELECT version FROM tessera_fleet_schema").decode(Int.self) {
                versions.append(version)
            }
            #expect(versions == [FleetSchema.version])
            try await connection.queue.client.query("INSERT INTO tessera_fleet_schema (version) VALUES (99)")
            do throws(FleetError) {
                let newer = try await FleetConnection.open(try FleetDatabase(url: server.url), logger: logger)
                await newer.close()
                Issue.record("a schema newer than the binary was accepted")
            } catch {
                #expect(error.server == "127.0.0.1:\(server.port)/postgres")
                #expect(error.reason.contains("version 99, newer than this tessera's"))
            }
        }
    }

    @Test func anUnreachableServerIsNamedWithTheReason() async throws {
        let port = try LoopbackSocket(listening: false)
        defer { port.close() }
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        do throws(FleetError) {
            let connection = try await FleetConnection.open(
                try FleetDatabase(url: "postgres://tessera@127.0.0.1:\(port.port)/fleet"), timeout: .seconds(5), logger: logger)
            await connection.close()
            Issue.record("connected to a port nobody serves")
        } catch {
            #expect(error.description.hasPrefix("the fleet's database 127.0.0.1:\(port.port)/fleet: "))
            #expect(!error.reason.isEmpty)
        }
        #expect(throws: FleetError.self) { try FleetDatabase(url: "http://x/y") }
        #expect(throws: FleetError.self) { try FleetDatabase(url: "postgres://127.0.0.1/db") }
    }

    @Test func claimsTakePriorityThenAgeAndNeverTheSameTaskTwice() async throws {
        try await Self.withFleet { connection, _ in
            let queue = connection.queue
            try await queue.enqueue(Self.tasks(40) { $0 == 30 ? 5 : 0 })
            let a = try await queue.join(host: "a", pid: 1, port: nil, maxTasks: 20, lease: .seconds(30))
            let b = try await queue.join(host: "b", pid: 2, port: nil, maxTasks: 20, lease: .seconds(30))
            let first = try await queue.claim(worker: a, count: 3)
            #expect(first.map(\.key) == ["direct:t30", "direct:t0", "direct:t1"])
            #expect(first.allSatisfy { $0.epoch == 1 })
            // Two workers claiming at once never get the same row.
            async let fromA = queue.claim(worker: a, count: 20)
            async let fromB = queue.claim(worker: b, count: 20)
            let (claimsA, claimsB) = try await (fromA, fromB)
            let all = first.map(\.key) + claimsA.map(\.key) + claimsB.map(\.key)
            #expect(all.count == 40)
            #expect(Set(all).count == 40)
        }
    }

    @Test func aTakenOverTaskRefusesEveryWriteOfItsFormerOwner() async throws {
        try await Self.withFleet { connection, _ in
            let queue = connection.queue
            try await queue.enqueue(Self.tasks(1))
            // (A lease long enough for the claim and the write below on a loaded machine: with
            // 300 ms, it sometimes ended before the claim, which was then rightly refused.)
            let stale = try await queue.join(host: "a", pid: 1, port: nil, maxTasks: 1, lease: .seconds(3))
            let claim = try #require(try await queue.claim(worker: stale, count: 1).first)
            #expect(try await queue.write(key: claim.key, worker: stale, epoch: claim.epoch, state: "running", record: "{}", title: "", lastError: nil))
            // Its lease expires by the database's clock; another worker takes the task over.
            let next = try await queue.join(host: "b", pid: 2, port: nil, maxTasks: 1, lease: .seconds(30))
            #expect(await eventually(within: .seconds(15)) { (try? await queue.rescue()) == [claim.key] })
            let taken = try #require(try await queue.claim(worker: next, count: 1).first)
            #expect(taken.epoch == claim.epoch + 1)
            // The former owner's heartbeat finds it dead; its writes change nothing.
            #expect(try await queue.heartbeat(worker: stale, lease: .seconds(30)).alive == false)
            #expect(try await !queue.write(key: claim.key, worker: stale, epoch: claim.epoch, state: "completed", record: "{}", title: "", lastError: nil))
            #expect(try await queue.claim(worker: stale, count: 1).isEmpty)
            #expect(try await queue.write(key: taken.key, worker: next, epoch: taken.epoch, state: "completed", record: "{}", title: "", lastError: nil))
            // Completed once; a completed task is not rescued.
            #expect(try await queue.rescue().isEmpty)
            let status = try await FleetStatus.read(queue)
            #expect(status.completions == 1)
            #expect(status.doubleCompletions == 0)
            #expect(status.queue["completed"] == 1)
        }
    }

    @Test func aHeartbeatRenewsOnlyALiveLeaseAndReportsCommands() async throws {
        try await Self.withFleet { connection, _ in
            let queue = connection.queue
            try await queue.enqueue(Self.tasks(2))
            let worker = try await queue.join(host: "a", pid: 1, port: nil, maxTasks: 2, lease: .seconds(30))
            let claims = try await queue.claim(worker: worker, count: 2)
            #expect(try await queue.pause(claims[0].key))
            let beat = try await queue.heartbeat(worker: worker, lease: .seconds(30))
            #expect(beat.alive)
            #expect(beat.held == [claims[0].key: 1, claims[1].key: 1])
            #expect(beat.commands == [claims[0].key: "pause"])
            // A graceful stop hands both back at once (the paused one stays paused).
            #expect(Set(try await queue.handBack(worker: worker)) == Set(claims.map(\.key)))
            #expect(try await FleetStatus.read(queue).queue == ["queued": 1, "paused": 1])
            #expect(try await queue.heartbeat(worker: worker, lease: .seconds(30)).alive == false)
        }
    }

    @Test func theFleetsTasksAndTheirChangesAreReadWithTheirHolders() async throws {
        try await Self.withFleet { connection, _ in
            let queue = connection.queue
            try await queue.enqueue(Self.tasks(3))
            let (all, cursor) = try await queue.changes(since: nil)
            #expect(all.map(\.info.id.description) == ["direct:t0", "direct:t1", "direct:t2"])
            #expect(all.allSatisfy { $0.info.state == .waiting && $0.holder == nil })
            let worker = try await queue.join(host: "host-a", pid: 7, port: 6800, maxTasks: 1, lease: .seconds(30))
            let claim = try #require(try await queue.claim(worker: worker, count: 1).first)
            #expect(try await queue.pause("direct:t2"))
            try await queue.writeProgress([(claim.key, claim.epoch, 5_000, 2)])
            // Only the rows changed since: the claimed task (running, with its holder and its
            // progress) and the paused one.
            let (changed, _) = try await queue.changes(since: cursor)
            #expect(changed.map(\.info.id.description) == ["direct:t0", "direct:t2"])
            #expect(changed.first?.holder?.description == "host-a:7")
            #expect(changed.first?.info.bytesDone == 5_000)
            #expect(changed.first?.queueState == "running")
            #expect(changed.last?.info.state == .paused)
            #expect(try await queue.tasks(except: ["direct:t0"]).map(\.info.id.description) == ["direct:t1", "direct:t2"])
        }
    }
}
