import Foundation
import PostgresNIO
import Tessera

/// What `tessera fleet status` shows: the workers (host, pid, port, state, last heartbeat by the
/// database's clock, tasks held) and the queue by state.
public struct FleetStatus: Sendable {
    /// One worker.
    public struct Worker: Sendable {
        /// Its id.
        public var id: Int64
        /// Its host.
        public var host: String
        /// Its pid.
        public var pid: Int
        /// Its RPC port, if it told.
        public var port: Int?
        /// `active`, `gone` or `dead`.
        public var state: String
        /// Seconds since its last heartbeat, by the database's clock.
        public var secondsSinceHeartbeat: Double
        /// Seconds until its lease expires (negative: expired), by the database's clock.
        public var secondsToExpiry: Double
        /// Running tasks it holds.
        public var tasks: Int
        /// `-j`.
        public var maxTasks: Int
    }

    /// The workers: active ones, and those that left or died in the last hour.
    public var workers: [Worker]
    /// Tasks by queue state.
    public var queue: [String: Int]
    /// Completions logged, and tasks that completed more than once (should be 0).
    public var completions: Int
    /// Tasks with more than one completion logged.
    public var doubleCompletions: Int

    /// Reads the status.
    public static func read(_ queue: FleetQueue) async throws -> FleetStatus {
        let client = queue.client
        var workers: [Worker] = []
        let rows = try await client.query(
            """
            SELECT w.id, w.host, w.pid, w.port, w.state,
                   extract(epoch FROM now() - w.heartbeat_at)::float8, extract(epoch FROM w.expires_at - now())::float8,
                   (SELECT count(*) FROM tessera_fleet_tasks t WHERE t.owner = w.id AND t.state = 'running')::int, w.max_tasks
            FROM tessera_fleet_workers w
            WHERE w.state = 'active' OR w.heartbeat_at > now() - interval '1 hour'
            ORDER BY w.id
            """)
        for try await (id, host, pid, port, state, since, expiry, tasks, maxTasks) in rows.decode(
            (Int64, String, Int, Int?, String, Double, Double, Int, Int).self)
        {
            workers.append(Worker(
                id: id, host: host, pid: pid, port: port, state: state, secondsSinceHeartbeat: since, secondsToExpiry: expiry,
                tasks: tasks, maxTasks: maxTasks))
        }
        var states: [String: Int] = [:]
        for try await (state, count) in try await client.query("SELECT state, count(*)::int FROM tessera_fleet_tasks GROUP BY state")
            .decode((String, Int).self)
        {
            states[state] = count
        }
        var completions = 0, doubles = 0
        for try await (total, twice) in try await client.query(
            """
            SELECT count(*)::int, (SELECT count(*)::int FROM (SELECT task_id FROM tessera_fleet_completions GROUP BY task_id HAVING count(*) > 1) d)
            FROM tessera_fleet_completions
            """
        ).decode((Int, Int).self) {
            completions = total
            doubles = twice
        }
        return FleetStatus(workers: workers, queue: states, completions: completions, doubleCompletions: doubles)
    }

    /// The status as text lines (every text from the database made printable).
    public var lines: [String] {
        var lines = ["WORKER  HOST                  PID      PORT   STATE   HEARTBEAT  TASKS"]
        for worker in workers {
            let host = UntrustedText.printable(worker.host, limit: 20)
            let beat = worker.state == "active" ? String(format: "%.1fs ago", worker.secondsSinceHeartbeat) : "-"
            lines.append(
                String(worker.id).padding(toLength: 8, withPad: " ", startingAt: 0) + host.padding(toLength: 22, withPad: " ", startingAt: 0)
                    + String(worker.pid).padding(toLength: 9, withPad: " ", startingAt: 0)
                    + (worker.port.map(String.init) ?? "-").padding(toLength: 7, withPad: " ", startingAt: 0)
                    + worker.state.padding(toLength: 8, withPad: " ", startingAt: 0) + beat.padding(toLength: 11, withPad: " ", startingAt: 0)
                    + "\(worker.tasks)/\(worker.maxTasks)")
        }
        let order = ["queued", "running", "paused", "completed", "failed", "invalid", "removed"]
        lines.append("")
        lines.append("queue: " + order.map { "\($0) \(queue[$0] ?? 0)" }.joined(separator: ", "))
        lines.append("completions: \(completions) (tasks completed twice: \(doubleCompletions))")
        return lines
    }
}
