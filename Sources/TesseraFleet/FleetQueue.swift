import Foundation
import Logging
import PostgresNIO
import Tessera

/// The fleet's statements, one method each: every time comparison is made by the database with
/// its own `now()`, every write of a running task's state is fenced by the owner and the epoch it
/// was claimed with (`WHERE owner = $me AND epoch = $epoch ... RETURNING`: no row back, the task
/// is no longer this worker's), and NOTIFY only wakes workers up (one per batch, never per task
/// or per progress tick).
public struct FleetQueue: Sendable {
    /// The NOTIFY channel that wakes workers (work was queued or handed back).
    public static let channel = "tessera_fleet"

    /// The client (its `run()` must be running).
    public let client: PostgresClient
    /// Where it is, for messages.
    public let database: FleetDatabase
    let logger: Logger

    /// Statements over `client`.
    public init(client: PostgresClient, database: FleetDatabase, logger: Logger = Logger(label: "tessera.fleet")) {
        self.client = client
        self.database = database
        self.logger = logger
    }

    /// A client for `database` (start its `run()`; `connections`: the pool's size).
    public static func makeClient(_ database: FleetDatabase, connections: Int, logger: Logger) -> PostgresClient {
        var configuration = PostgresClient.Configuration(
            host: database.host, port: database.port, username: database.user, password: database.password,
            database: database.database, tls: .disable)
        configuration.options.maximumConnections = max(1, connections)
        configuration.options.connectTimeout = .seconds(5)
        configuration.options.keepAliveBehavior = .init(frequency: .seconds(10))
        return PostgresClient(configuration: configuration, backgroundLogger: logger)
    }

    // MARK: - Schema

    /// Creates or migrates the schema, with a clear error when it cannot.
    public func prepareSchema() async throws(FleetError) {
        do {
            try await FleetSchema.migrate(client, database: database, logger: logger)
        } catch let error as FleetError {
            throw error
        } catch {
            throw FleetError(server: database.description, reason: Self.describe(error))
        }
    }

    /// Words for an error of the driver (the server's message, or the connection's failure).
    public static func describe(_ error: any Error) -> String {
        if let error = error as? PSQLError {
            if let message = error.serverInfo?[.message] {
                let state = error.serverInfo?[.sqlState].map { " (SQLSTATE \($0))" } ?? ""
                return UntrustedText.printable(message, limit: 300) + state
            }
            if let underlying = error.underlying { return "cannot connect: \(UntrustedText.printable("\(underlying)", limit: 300))" }
            return "\(error.code)"
        }
        if let error = error as? FleetError { return error.reason }
        return UntrustedText.printable("\(error)", limit: 300)
    }

    // MARK: - Workers

    /// Registers a worker with a fresh lease; returns its id.
    public func join(host: String, pid: Int32, port: Int?, maxTasks: Int, lease: Duration) async throws -> Int64 {
        let rows = try await client.query(
            """
            INSERT INTO tessera_fleet_workers (host, pid, port, max_tasks, expires_at)
            VALUES (\(host), \(Int(pid)), \(port), \(maxTasks), now() + make_interval(secs => \(lease.fleetSeconds)))
            RETURNING id
            """, logger: logger)
        for try await id in rows.decode(Int64.self) { return id }
        throw FleetError(server: database.description, reason: "registering the worker returned nothing")
    }

    /// What a heartbeat learned: whether the lease was renewed, and the commands (pause, remove)
    /// other workers left on this worker's running tasks.
    public struct Heartbeat: Sendable, Equatable {
        /// The lease was renewed (`false`: this worker was declared dead).
        public var alive: Bool
        /// The running tasks this worker holds in the database, with their epochs.
        public var held: [String: Int64]
        /// Commands left on them, by task key.
        public var commands: [String: String]
    }

    /// Renews the worker's lease, only while it has not expired and the worker was not declared
    /// dead (River's rule); returns the tasks it holds and the commands left on them.
    public func heartbeat(worker: Int64, lease: Duration) async throws -> Heartbeat {
        let rows = try await client.query(
            """
            WITH me AS (
                UPDATE tessera_fleet_workers
                SET heartbeat_at = now(), expires_at = now() + make_interval(secs => \(lease.fleetSeconds))
                WHERE id = \(worker) AND state = 'active' AND expires_at >= now()
                RETURNING id
            )
            SELECT me.id, t.id, t.epoch, t.command
            FROM me LEFT JOIN tessera_fleet_tasks t ON t.owner = me.id AND t.state = 'running'
            """, logger: logger)
        var result = Heartbeat(alive: false, held: [:], commands: [:])
        for try await (_, key, epoch, command) in rows.decode((Int64, String?, Int64?, String?).self) {
            result.alive = true
            if let key, let epoch { result.held[key] = epoch }
            if let key, let command { result.commands[key] = command }
        }
        return result
    }

    /// Declares dead every worker whose lease expired by the database's clock, and queues again
    /// the running tasks of dead or departed workers, in one statement (the worker row is locked
    /// by the UPDATE, so a heartbeat racing with it either renews first, and the worker is not
    /// declared dead, or finds it dead). Returns the keys of the tasks queued again.
    @discardableResult
    public func rescue() async throws -> [String] {
        let rows = try await client.query(
            """
            WITH dead AS (
                UPDATE tessera_fleet_workers SET state = 'dead'
                WHERE state = 'active' AND expires_at < now()
                RETURNING id
            )
            UPDATE tessera_fleet_tasks t
            SET state = 'queued', owner = NULL, command = NULL, updated_at = now()
            WHERE t.state = 'running'
              AND (t.owner IN (SELECT id FROM dead)
                   OR NOT EXISTS (SELECT 1 FROM tessera_fleet_workers w WHERE w.id = t.owner AND w.state = 'active'))
            RETURNING t.id
            """, logger: logger)
        var keys: [String] = []
        for try await key in rows.decode(String.self) { keys.append(key) }
        if !keys.isEmpty { try await notify() }
        return keys
    }

    /// Leaves the fleet: the worker's running tasks go back to the queue at once (a graceful
    /// stop), and the worker is marked gone. Returns the keys handed back.
    @discardableResult
    public func handBack(worker: Int64) async throws -> [String] {
        let rows = try await client.query(
            """
            WITH me AS (
                UPDATE tessera_fleet_workers SET state = 'gone', expires_at = now() WHERE id = \(worker) AND state = 'active' RETURNING id
            )
            UPDATE tessera_fleet_tasks t
            SET state = CASE WHEN t.command = 'pause' THEN 'paused' ELSE 'queued' END, owner = NULL, command = NULL, updated_at = now()
            WHERE t.owner = \(worker) AND t.state = 'running'
            RETURNING t.id
            """, logger: logger)
        var keys: [String] = []
        for try await key in rows.decode(String.self) { keys.append(key) }
        try await notify()
        return keys
    }

    /// Hands one task back to the queue (the worker could not run it here).
    public func release(_ key: String, worker: Int64, epoch: Int64) async throws -> Bool {
        let rows = try await client.query(
            """
            UPDATE tessera_fleet_tasks SET state = 'queued', owner = NULL, updated_at = now()
            WHERE id = \(key) AND owner = \(worker) AND epoch = \(epoch) AND state = 'running'
            RETURNING id
            """, logger: logger)
        var released = false
        for try await _ in rows.decode(String.self) { released = true }
        if released { try await notify() }
        return released
    }

    // MARK: - Claiming

    /// A task a claim gave this worker.
    public struct Claim: Sendable {
        /// The task's key (its ``DownloadTaskID``'s description).
        public var key: String
        /// The epoch of this claim: every fenced write carries it.
        public var epoch: Int64
        /// The queue's order of the task.
        public var sequence: Int64
        /// The entity, as JSON.
        public var entity: String
        /// The manager's last record of the task, as JSON (`nil` before any).
        public var record: String?
    }

    /// Claims up to `count` queued tasks, priority first, then the oldest: a CTE picks them
    /// `FOR UPDATE SKIP LOCKED` through the partial index (workers claiming at once never wait
    /// for each other or take the same row), and the UPDATE makes them this worker's under a new
    /// epoch, only while the worker's own lease holds. One round trip, a statement prepared once
    /// per connection (``ClaimStatement``): planning it each time cost more than running it.
    public func claim(worker: Int64, count: Int) async throws -> [Claim] {
        var claims: [Claim] = []
        for try await claim in try await client.execute(ClaimStatement(worker: worker, count: count), logger: logger) {
            claims.append(claim)
        }
        return claims
    }

    /// The claim, prepared once per connection.
    struct ClaimStatement: PostgresPreparedStatement {
        static let name = "tessera_fleet_claim"
        static let sql = """
            WITH next AS (
                SELECT id FROM tessera_fleet_tasks
                WHERE state = 'queued'
                ORDER BY priority DESC, seq
                LIMIT $2
                FOR UPDATE SKIP LOCKED
            )
            UPDATE tessera_fleet_tasks t
            SET state = 'running', owner = $1, epoch = t.epoch + 1, attempts = t.attempts + 1, command = NULL, updated_at = now()
            FROM next
            WHERE t.id = next.id
              AND EXISTS (SELECT 1 FROM tessera_fleet_workers w WHERE w.id = $1 AND w.state = 'active' AND w.expires_at >= now())
            RETURNING t.id, t.epoch, t.seq, t.entity, t.record
            """
        static let bindingDataTypes: [PostgresDataType] = [.int8, .int8]

        var worker: Int64
        var count: Int

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 2)
            bindings.append(worker)
            bindings.append(Int64(count))
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> Claim {
            let (key, epoch, sequence, entity, record) = try row.decode((String, Int64, Int64, String, String?).self)
            return Claim(key: key, epoch: epoch, sequence: sequence, entity: entity, record: record)
        }
    }

    // MARK: - Adding

    /// A task to queue.
    public struct NewTask: Sendable {
        /// The key (the task ID's description).
        public var key: String
        /// The entity, as JSON.
        public var entity: String
        /// The title, for the status.
        public var title: String
        /// The group, if any.
        public var groupKey: String?
        /// Higher runs first.
        public var priority: Int
        /// Added paused (aria2's `pause`).
        public var paused: Bool

        /// A task to queue.
        public init(key: String, entity: String, title: String, groupKey: String?, priority: Int = 0, paused: Bool = false) {
            self.key = key
            self.entity = entity
            self.title = title
            self.groupKey = groupKey
            self.priority = priority
            self.paused = paused
        }
    }

    /// Queues tasks (one statement for the batch, one NOTIFY after it). A known task that is
    /// paused, failed, invalid or removed is queued again; a queued, running or completed one is
    /// left as it is. Returns each task's state after the call, by key.
    @discardableResult
    public func enqueue(_ tasks: [NewTask]) async throws -> [String: String] {
        guard !tasks.isEmpty else { return [:] }
        let rows = try await client.query(
            """
            INSERT INTO tessera_fleet_tasks AS t (id, entity, title, group_key, priority, state)
            SELECT * FROM unnest(\(tasks.map(\.key))::text[], \(tasks.map(\.entity))::text[], \(tasks.map(\.title))::text[],
                                 \(tasks.map { $0.groupKey ?? "" })::text[], \(tasks.map { Int32(clamping: $0.priority) })::int[],
                                 \(tasks.map { $0.paused ? "paused" : "queued" })::text[])
            ON CONFLICT (id) DO UPDATE SET state = EXCLUDED.state, owner = NULL, command = NULL, updated_at = now()
                WHERE t.state IN ('paused', 'failed', 'invalid', 'removed')
            RETURNING t.id, t.state
            """, logger: logger)
        var states: [String: String] = [:]
        for try await (key, state) in rows.decode((String, String).self) { states[key] = state }
        if states.values.contains("queued") { try await notify() }
        return states
    }

    /// Wakes every listening worker.
    public func notify() async throws {
        try await client.query("SELECT pg_notify(\(Self.channel), '')", logger: logger)
    }

    // MARK: - Fenced writes

    /// The queue state a held task's record maps to: a completed task whose merge is pending
    /// stays `running` (leased: the merge is a fenced step of the task, and a worker that dies
    /// during it leaves it to the next holder, which merges again); it is `completed` once its
    /// merge has ended.
    public static func queueState(for record: TaskRecord) -> String {
        if record.state == .completed, record.manifest?.mergeIsPending == true { return "running" }
        return queueState(for: record.state)
    }

    /// The queue state a manager's task state maps to while this worker holds the task.
    public static func queueState(for state: DownloadTaskState) -> String {
        switch state {
        case .completed: "completed"
        case .failed: "failed"
        case .invalid: "invalid"
        case .paused: "paused"
        case .removed: "removed"
        case .idle, .waiting, .resolving, .downloading, .interrupted: "running"
        }
    }

    /// Writes a held task's record and queue state, only while `worker` holds it under `epoch`
    /// (and it runs); a terminal state lets it go (and a completion is logged once per epoch).
    /// Returns whether the row was this worker's: `false` means the task was taken over.
    public func write(
        key: String, worker: Int64, epoch: Int64, state: String, record: String, title: String, lastError: String?
    ) async throws -> Bool {
        let completed = state == "completed"
        let rows = try await client.query(
            """
            WITH done AS (
                UPDATE tessera_fleet_tasks
                SET state = \(state), record = \(record), title = \(title), last_error = \(lastError), updated_at = now(),
                    command = CASE WHEN \(state) = 'running' THEN command ELSE NULL END
                WHERE id = \(key) AND owner = \(worker) AND epoch = \(epoch) AND state = 'running'
                RETURNING id, epoch
            ), logged AS (
                INSERT INTO tessera_fleet_completions (task_id, epoch, worker)
                SELECT id, epoch, \(worker) FROM done WHERE \(completed)
            )
            SELECT id FROM done
            """, logger: logger)
        var written = false
        for try await _ in rows.decode(String.self) { written = true }
        return written
    }

    /// Upserts the progress of held tasks (UNLOGGED, out of the claimed rows), never over a
    /// later epoch's.
    public func writeProgress(_ items: [(key: String, epoch: Int64, bytes: Int64, segments: Int)]) async throws {
        guard !items.isEmpty else { return }
        try await client.query(
            """
            INSERT INTO tessera_fleet_progress AS p (task_id, epoch, bytes_done, segments_done)
            SELECT * FROM unnest(\(items.map(\.key))::text[], \(items.map(\.epoch))::bigint[], \(items.map(\.bytes))::bigint[],
                                 \(items.map { Int32(clamping: $0.segments) })::int[])
            ON CONFLICT (task_id) DO UPDATE
                SET epoch = EXCLUDED.epoch, bytes_done = EXCLUDED.bytes_done, segments_done = EXCLUDED.segments_done, updated_at = now()
                WHERE p.epoch <= EXCLUDED.epoch
            """, logger: logger)
    }

    // MARK: - Commands from any worker

    /// Pauses a task wherever it is: a queued one at once, a running one by a command its owner
    /// reads at its next heartbeat. Returns whether the task is known.
    public func pause(_ key: String) async throws -> Bool {
        try await command(key, "pause", queuedState: "paused")
    }

    /// Removes a task wherever it is (its owner deletes its partial files, and with `files` its
    /// outputs). Returns whether the task is known.
    public func remove(_ key: String, files: Bool) async throws -> Bool {
        try await command(key, files ? "remove-files" : "remove", queuedState: "removed")
    }

    private func command(_ key: String, _ command: String, queuedState: String) async throws -> Bool {
        let rows = try await client.query(
            """
            UPDATE tessera_fleet_tasks
            SET state = CASE WHEN state = 'running' THEN state ELSE \(queuedState) END,
                command = CASE WHEN state = 'running' THEN \(command) ELSE NULL END, updated_at = now()
            WHERE id = \(key) AND state IN ('queued', 'running', 'paused')
            RETURNING id
            """, logger: logger)
        var found = false
        for try await _ in rows.decode(String.self) { found = true }
        return found
    }

    /// Queues a paused, failed or invalid task again.
    public func resume(_ key: String) async throws -> Bool {
        let rows = try await client.query(
            """
            UPDATE tessera_fleet_tasks SET state = 'queued', owner = NULL, command = NULL, updated_at = now()
            WHERE id = \(key) AND state IN ('paused', 'failed', 'invalid')
            RETURNING id
            """, logger: logger)
        var found = false
        for try await _ in rows.decode(String.self) { found = true }
        if found { try await notify() }
        return found
    }
}

extension FleetQueue.NewTask {
    /// The task of `entity`, to queue (its record as JSON: any worker rebuilds the entity through
    /// its registry).
    public init(_ entity: DownloadBaseEntity, priority: Int = 0, paused: Bool = false) throws {
        let record = try entity.record()
        self.init(
            key: entity.taskID.description, entity: String(decoding: try JSONEncoder().encode(record), as: UTF8.self),
            title: entity.title, groupKey: entity.aggregationKey, priority: priority, paused: paused)
    }
}
