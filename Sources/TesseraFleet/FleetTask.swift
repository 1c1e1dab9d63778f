import Foundation
import PostgresNIO
import Tessera

/// A task of the fleet as its row in PostgreSQL tells it, wherever it runs: what a worker's
/// RPC shows of the tasks other workers hold or the queue keeps.
public struct FleetTask: Sendable, Equatable {
    /// The worker holding a running task.
    public struct Holder: Sendable, Equatable, CustomStringConvertible {
        /// Its id in the fleet.
        public var id: Int64
        /// Its host.
        public var host: String
        /// Its pid.
        public var pid: Int
        /// Its RPC port, when it told.
        public var port: Int?

        /// `host:pid` (the host made printable): how the RPC and the dashboard name it.
        public var description: String { UntrustedText.printable(host, limit: 80) + ":" + String(pid) }
    }

    /// The task as a snapshot: its state by the queue (a running task's by its last record),
    /// bytes by the progress table while it runs (its record's otherwise).
    public var info: DownloadTaskInfo
    /// The queue's state (`queued`, `running`, `paused`, `completed`, `failed`, `invalid`,
    /// `removed`).
    public var queueState: String
    /// Who runs it (running tasks only).
    public var holder: Holder?

    /// The state a task in `queueState` shows, `recorded` being the state of its last record.
    public static func state(queueState: String, recorded: DownloadTaskState?) -> DownloadTaskState {
        switch queueState {
        case "queued": .waiting
        case "running":
            switch recorded?.kind {
            case .resolving?: .resolving
            case .downloading?: .downloading
            case .interrupted?: recorded ?? .waiting
            default: .waiting
            }
        case "paused": .paused
        case "completed": .completed
        case "failed": .failed
        case "invalid": .invalid
        default: .removed
        }
    }

    /// A row's task; `nil` when its key is not a task ID.
    init?(
        key: String, queueState: String, title: String, groupKey: String?, record: String?, lastError: String?, holder: Holder?,
        progress: (bytes: Int64, segments: Int)?
    ) {
        guard let id = DownloadTaskID(key) else { return nil }
        let stored = record.flatMap { try? JSONDecoder().decode(TaskRecord.self, from: Data($0.utf8)) }
        let state = Self.state(queueState: queueState, recorded: stored?.state)
        let error = stored?.lastError.map(DownloadError.init(stored:))
            ?? lastError.map { DownloadError(.transport, UntrustedText.printable($0, limit: 500)) }
        // (The progress table is written while the task runs, more often than its row.)
        let running = queueState == "running"
        let bytes = running ? max(progress?.bytes ?? 0, stored?.bytesDone ?? 0) : (stored?.bytesDone ?? progress?.bytes ?? 0)
        let segments = running ? max(progress?.segments ?? 0, stored?.segmentsDone ?? 0) : (stored?.segmentsDone ?? 0)
        var total = stored?.bytesTotal
        if state == .completed, total == nil { total = bytes }
        info = DownloadTaskInfo(
            recordOf: id, title: title.isEmpty ? (stored?.manifest?.title ?? id.entityKey) : title,
            groupKey: groupKey.flatMap { $0.isEmpty ? nil : $0 }, state: state, mode: stored?.mode ?? .download,
            bytesDone: max(0, bytes), bytesTotal: total, segmentsDone: max(0, segments), segmentsTotal: max(0, segments),
            error: state == .completed ? nil : error, weight: stored?.weight ?? 0)
        self.queueState = queueState
        self.holder = running ? holder : nil
    }
}

extension FleetQueue {
    // Every status call reads through an index: the unfinished tasks through the partial
    // indexes of queued, running and paused ones (the queue's size), the finished ones as a
    // window of the partial index in the order they finished, changes through `updated_at`,
    // counts of finished tasks from `tessera_fleet_counts`. None reads every finished task.

    /// Every unfinished task of the fleet (queued, running, paused) in the queue's order, with
    /// who holds the running ones and their progress. `except`: keys to leave out (the tasks the
    /// asking worker runs).
    public func tasks(except: Set<String> = []) async throws -> [FleetTask] {
        try await read(Self.unfinishedQuery()).filter { !except.contains($0.info.id.description) }
    }

    /// Finished tasks (completed, failed, invalid, removed) in the order they finished: `count`
    /// from `offset`; a negative offset counts from the last (-1) backwards, as aria2's
    /// `tellStopped` does.
    public func stoppedTasks(offset: Int, count: Int) async throws -> [FleetTask] {
        guard count > 0 else { return [] }
        return try await read(Self.stoppedQuery(offset: offset, count: count))
    }

    /// One task by its key, through the primary key.
    public func task(_ key: String) async throws -> FleetTask? {
        try await read(Self.selectTasks(where: "t.id = ", key, order: "")).first
    }

    /// Every task's key (the primary key's index only, no row): read once by a daemon that
    /// starts, so that it knows every GID without listing the tasks.
    public func taskKeys() async throws -> [String] {
        var keys: [String] = []
        for try await key in try await client.query("SELECT id FROM tessera_fleet_tasks", logger: logger).decode(String.self) {
            keys.append(key)
        }
        return keys
    }

    /// Tasks by queue state, and `#completions` (completions logged) and `#doubles` (tasks
    /// completed more than once): unfinished ones counted through their partial indexes,
    /// finished ones from the triggers' counts.
    public func counts() async throws -> [String: Int] {
        var counts: [String: Int] = [:]
        for try await (name, count) in try await client.query(Self.countsQuery(), logger: logger).decode((String, Int64).self) {
            counts[name] = Int(clamping: count)
        }
        return counts
    }

    /// The tasks whose rows or progress changed since `since` (seconds since 1970 by the
    /// database's clock; every unfinished task when `nil`), and the database's time before they
    /// were read: the `since` of the next call (a row written while they were read comes again
    /// then).
    public func changes(since: Double?) async throws -> (tasks: [FleetTask], now: Double) {
        var now = 0.0
        for try await seconds in try await client.query("SELECT extract(epoch FROM now())::float8", logger: logger).decode(Double.self) {
            now = seconds
        }
        guard let since else { return (try await read(Self.unfinishedQuery()), now) }
        return (try await read(Self.changesQuery(since: since)), now)
    }

    // MARK: The statements (internal: the tests EXPLAIN them)

    static let taskColumns = """
        SELECT t.id, t.state, t.title, t.group_key, t.record, t.last_error, w.id, w.host, w.pid, w.port, p.bytes_done, p.segments_done
        """
    static let taskJoins = """
        LEFT JOIN tessera_fleet_workers w ON w.id = t.owner AND t.state = 'running'
        LEFT JOIN tessera_fleet_progress p ON p.task_id = t.id AND p.epoch = t.epoch
        """

    static func selectTasks(where condition: String, _ value: String, order: String) -> PostgresQuery {
        "\(unescaped: taskColumns) FROM tessera_fleet_tasks t \(unescaped: taskJoins) WHERE \(unescaped: condition)\(value) \(unescaped: order)"
    }

    static func unfinishedQuery() -> PostgresQuery {
        """
        \(unescaped: taskColumns)
        FROM (SELECT * FROM tessera_fleet_tasks WHERE state = 'queued'
              UNION ALL SELECT * FROM tessera_fleet_tasks WHERE state = 'running'
              UNION ALL SELECT * FROM tessera_fleet_tasks WHERE state = 'paused') t
        \(unescaped: taskJoins)
        ORDER BY t.seq
        """
    }

    static func stoppedQuery(offset: Int, count: Int) -> PostgresQuery {
        let direction = offset >= 0 ? "" : " DESC"
        let skip = offset >= 0 ? offset : -(offset + 1)
        return """
            \(unescaped: taskColumns)
            FROM (SELECT * FROM tessera_fleet_tasks WHERE state IN \(unescaped: FleetSchema.finishedStates)
                  ORDER BY updated_at\(unescaped: direction), seq\(unescaped: direction) OFFSET \(skip) LIMIT \(min(count, 100_000))) t
            \(unescaped: taskJoins)
            ORDER BY t.updated_at\(unescaped: direction), t.seq\(unescaped: direction)
            """
    }

    static func changesQuery(since: Double) -> PostgresQuery {
        """
        \(unescaped: taskColumns)
        FROM tessera_fleet_tasks t
        \(unescaped: taskJoins)
        WHERE t.id IN (SELECT id FROM tessera_fleet_tasks WHERE updated_at > to_timestamp(\(since)::float8)
                       UNION SELECT task_id FROM tessera_fleet_progress WHERE updated_at > to_timestamp(\(since)::float8))
        ORDER BY t.seq
        """
    }

    static func countsQuery() -> PostgresQuery {
        """
        SELECT 'queued', count(*) FROM tessera_fleet_tasks WHERE state = 'queued'
        UNION ALL SELECT 'running', count(*) FROM tessera_fleet_tasks WHERE state = 'running'
        UNION ALL SELECT 'paused', count(*) FROM tessera_fleet_tasks WHERE state = 'paused'
        UNION ALL SELECT name, sum(n)::bigint FROM tessera_fleet_counts GROUP BY name
        """
    }

    private func read(_ query: PostgresQuery) async throws -> [FleetTask] {
        let rows = try await client.query(query, logger: logger)
        var tasks: [FleetTask] = []
        for try await (key, state, title, group, record, error, worker, host, pid, port, bytes, segments) in rows.decode(
            (String, String, String, String?, String?, String?, Int64?, String?, Int?, Int?, Int64?, Int?).self)
        {
            let holder = worker.flatMap { id in host.flatMap { host in pid.map { FleetTask.Holder(id: id, host: host, pid: $0, port: port) } } }
            let progress = bytes.map { ($0, segments ?? 0) }
            guard
                let task = FleetTask(
                    key: key, queueState: state, title: title, groupKey: group, record: record, lastError: error, holder: holder,
                    progress: progress)
            else { continue }
            tasks.append(task)
        }
        return tasks
    }
}
