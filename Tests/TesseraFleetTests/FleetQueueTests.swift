import Foundation
import Logging
import PostgresNIO
import Tessera
@testable import TesseraFleet
import TesseraTesting
import Testing

/// The fleet's statements against a real PostgreSQL 15: schema and its version, claims, the
/// epoch fence, heartbeats and takeover by the database's clock.
@Suite(.enabled(if: PostgresTestServer.shouldRun, Comment(rawValue: PostgresTestServer.skipReason)), .timeLimit(.minutes(3)))
struct FleetQueueTests {
    static func withFleet(connections: Int = 4, _ body: (FleetConnection, PostgresTestServer) async throws -> Void) async throws {
        let server = try await PostgresTestServer.start()
        var logger = Logger(label: "test")
        logger.logLevel = .error
        do {
            let connection = try await FleetConnection.open(try FleetDatabase(url: server.url), connections: connections, logger: logger)
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
            #expect(versions == Array(1...FleetSchema.version))
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

    /// The test server's crash (`pg_ctl -m immediate`, as the restart test does) keeps what was
    /// committed, however soon after the commit it comes: with `synchronous_commit=off` the last
    /// commits were still in the WAL buffers and the tasks of the queue vanished at recovery.
    @Test func whatWasCommittedOutlivesTheTestServersCrash() async throws {
        try await Self.withFleet { connection, server in
            _ = try await connection.queue.enqueue(Self.tasks(6))
            await server.kill()
            try await server.restart()
            #expect(await eventually(within: .seconds(20)) { (try? await connection.queue.counts())?["queued"] == 6 })
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

    /// The claim is a statement prepared once per connection (planning it each time cost more
    /// than running it: 0.7 ms against 0.4 ms with 100,000 queued), one round trip per claim.
    @Test func theClaimIsPreparedOncePerConnection() async throws {
        // (One connection: the session the claims ran in is the one asked.)
        try await Self.withFleet(connections: 1) { connection, _ in
            let queue = connection.queue
            try await queue.enqueue(Self.tasks(3) { $0 == 2 ? 1 : 0 })
            let worker = try await queue.join(host: "a", pid: 1, port: nil, maxTasks: 3, lease: .seconds(30))
            #expect(try await queue.claim(worker: worker, count: 1).map(\.key) == ["direct:t2"])
            #expect(try await queue.claim(worker: worker, count: 1).map(\.key) == ["direct:t0"])
            var prepared: [String] = []
            for try await name in try await queue.client.query("SELECT name FROM pg_prepared_statements").decode(String.self) {
                prepared.append(name)
            }
            #expect(prepared == ["tessera_fleet_claim"])
        }
    }

    /// `EXPLAIN (ANALYZE, BUFFERS)` of a statement: its plan's lines.
    static func explain(_ query: PostgresQuery, on client: PostgresClient) async throws -> [String] {
        var lines: [String] = []
        let explained = PostgresQuery(unsafeSQL: "EXPLAIN (ANALYZE, BUFFERS) " + query.sql, binds: query.binds)
        for try await line in try await client.query(explained).decode(String.self) { lines.append(line) }
        return lines
    }

    /// The rows a plan read from the tasks table: each scan of it (actual rows times loops)
    /// and every row a filter removed.
    static func rowsRead(_ plan: [String]) -> Int {
        func number(after key: String, in line: Substring) -> Int? {
            guard let range = line.range(of: key) else { return nil }
            return Int(line[range.upperBound...].prefix { $0.isNumber })
        }
        return plan.reduce(0) { total, line in
            if let removed = number(after: "Rows Removed by Filter: ", in: line[...]) { return total + removed }
            guard line.contains(" on tessera_fleet_tasks"), let actual = line.range(of: "(actual ") else { return total }
            let measured = line[actual.upperBound...]
            return total + (number(after: "rows=", in: measured) ?? 0) * (number(after: "loops=", in: measured) ?? 1)
        }
    }

    /// `tessera fleet status`, `tellStopped`, `getGlobalStat` and the daemons' once-a-second
    /// change poll read the queue, a window, indexes and counts: 100,000 finished tasks are
    /// not read by any of them (their plans read at most a few hundred rows of the tasks, none
    /// scans the table), and the counts stay right.
    @Test func statusCallsNeverReadEveryFinishedTask() async throws {
        try await Self.withFleet { connection, _ in
            let queue = connection.queue
            let finished = 100_000
            try await queue.client.query(
                """
                INSERT INTO tessera_fleet_tasks (id, entity, state, updated_at)
                SELECT 'direct:done' || i, '{}', CASE WHEN i % 10 = 0 THEN 'failed' ELSE 'completed' END,
                       now() - interval '1 day' + make_interval(secs => i / 1000.0)
                FROM generate_series(1, \(finished)) i
                """)
            try await queue.enqueue(Self.tasks(5))
            let worker = try await queue.join(host: "a", pid: 1, port: nil, maxTasks: 2, lease: .seconds(30))
            let claims = try await queue.claim(worker: worker, count: 2)
            try await queue.writeProgress(claims.map { ($0.key, $0.epoch, 1_000, 1) })
            #expect(try await queue.pause("direct:t4"))
            try await queue.client.query("ANALYZE tessera_fleet_tasks")
            try await queue.client.query("ANALYZE tessera_fleet_progress")
            let since = try await queue.changes(since: nil).now - 60

            let statements: [(String, PostgresQuery)] = [
                ("unfinished tasks (tellActive, tellWaiting, the first change poll)", FleetQueue.unfinishedQuery()),
                ("tellStopped 0 100", FleetQueue.stoppedQuery(offset: 0, count: 100)),
                ("tellStopped -1 100", FleetQueue.stoppedQuery(offset: -1, count: 100)),
                ("the change poll", FleetQueue.changesQuery(since: since)),
                ("counts (fleet status, getGlobalStat)", FleetQueue.countsQuery()),
                ("one task (tellStatus)", FleetQueue.selectTasks(where: "t.id = ", "direct:done500", order: "")),
            ]
            for (name, statement) in statements {
                let plan = try await Self.explain(statement, on: queue.client)
                let rows = Self.rowsRead(plan)
                print("fleet status call at \(finished) finished: \(name): \(rows) rows of the tasks read")
                #expect(!plan.contains { $0.contains("Seq Scan on tessera_fleet_tasks") }, "\(name): \(plan.joined(separator: "\n"))")
                #expect(rows < 1_000, "\(name): \(plan.joined(separator: "\n"))")
            }

            // The calls themselves, timed, and what they say.
            let clock = ContinuousClock()
            var status: FleetStatus?
            let statusTime = try await clock.measure { status = try await FleetStatus.read(queue) }
            #expect(status?.queue == ["completed": finished - finished / 10, "failed": finished / 10, "queued": 2, "running": 2, "paused": 1])
            var stopped: [FleetTask] = []
            let stoppedTime = try await clock.measure { stopped = try await queue.stoppedTasks(offset: 0, count: 100) }
            #expect(stopped.prefix(2).map(\.info.id.description) == ["direct:done1", "direct:done2"])
            #expect(try await queue.stoppedTasks(offset: -1, count: 1).map(\.info.id.description) == ["direct:done\(finished)"])
            var changed: [FleetTask] = []
            let changesTime = try await clock.measure { changed = try await queue.changes(since: since).tasks }
            #expect(changed.map(\.info.id.description) == ["direct:t0", "direct:t1", "direct:t2", "direct:t3", "direct:t4"])
            var unfinished: [FleetTask] = []
            let tasksTime = try await clock.measure { unfinished = try await queue.tasks() }
            #expect(unfinished.count == 5)
            print("fleet status calls at \(finished) finished: fleet status \(statusTime), tellStopped \(stoppedTime), changes \(changesTime), unfinished \(tasksTime)")

            // Completions and tasks completed twice are counted as they are logged.
            try await queue.client.query("INSERT INTO tessera_fleet_completions (task_id, epoch, worker) VALUES ('direct:done1', 1, 1), ('direct:done1', 2, 1), ('direct:done2', 1, 1)")
            let counted = try await FleetStatus.read(queue)
            #expect(counted.completions == 3)
            #expect(counted.doubleCompletions == 1)
        }
    }
}
