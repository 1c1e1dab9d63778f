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
        /// Its lease in seconds (its expiry less its last heartbeat).
        public var lease: Double

        /// Its health: ``Health/gone`` and ``Health/dead`` as its row says, ``Health/dead`` too
        /// once its lease expired by the database's clock (before any worker declares it), and
        /// ``Health/late`` when it missed a heartbeat: its last one is older than a heartbeat
        /// interval and the margin (a third and a fifth of its lease, ``FleetLeasePolicy``'s).
        public var health: Health {
            Self.health(state: state, secondsSinceHeartbeat: secondsSinceHeartbeat, secondsToExpiry: secondsToExpiry, lease: lease)
        }

        /// The health of a worker in `state` whose last heartbeat was `secondsSinceHeartbeat`
        /// ago and whose lease (of `lease` seconds) ends in `secondsToExpiry`.
        public static func health(state: String, secondsSinceHeartbeat: Double, secondsToExpiry: Double, lease: Double) -> Health {
            switch state {
            case "gone": return .gone
            case "active":
                if secondsToExpiry < 0 { return .dead }
                return secondsSinceHeartbeat > lease / 3 + lease / 5 ? .late : .alive
            default: return .dead
            }
        }

        /// How a worker is doing.
        public enum Health: String, Sendable, Equatable {
            /// It heartbeats on time.
            case alive
            /// It missed a heartbeat; its lease still holds.
            case late
            /// Its lease ended: its tasks are (or are about to be) taken over.
            case dead
            /// It left gracefully.
            case gone
        }
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
        let workers = try await queue.workers()
        // (Counted through indexes and the triggers' counts: never every finished task.)
        let counts = try await queue.counts()
        let states = counts.filter { !$0.key.hasPrefix("#") && $0.value > 0 }
        let completions = counts["#completions"] ?? 0, doubles = counts["#doubles"] ?? 0
        return FleetStatus(workers: workers, queue: states, completions: completions, doubleCompletions: doubles)
    }

    /// The status as text lines (every text from the database made printable).
    public var lines: [String] {
        var lines = ["WORKER  HOST                  PID      PORT   STATE   HEARTBEAT  TASKS  HEALTH"]
        for worker in workers {
            let host = UntrustedText.printable(worker.host, limit: 20)
            let beat = worker.state == "active" ? String(format: "%.1fs ago", worker.secondsSinceHeartbeat) : "-"
            lines.append(
                String(worker.id).padding(toLength: 8, withPad: " ", startingAt: 0) + host.padding(toLength: 22, withPad: " ", startingAt: 0)
                    + String(worker.pid).padding(toLength: 9, withPad: " ", startingAt: 0)
                    + (worker.port.map(String.init) ?? "-").padding(toLength: 7, withPad: " ", startingAt: 0)
                    + worker.state.padding(toLength: 8, withPad: " ", startingAt: 0) + beat.padding(toLength: 11, withPad: " ", startingAt: 0)
                    + "\(worker.tasks)/\(worker.maxTasks)".padding(toLength: 7, withPad: " ", startingAt: 0) + worker.health.rawValue)
        }
        let order = ["queued", "running", "paused", "completed", "failed", "invalid", "removed"]
        lines.append("")
        lines.append("queue: " + order.map { "\($0) \(queue[$0] ?? 0)" }.joined(separator: ", "))
        lines.append("completions: \(completions) (tasks completed twice: \(doubleCompletions))")
        return lines
    }
}

extension FleetQueue {
    /// The workers: the active ones, and those that left or died in the last hour, each with
    /// its last heartbeat and expiry by the database's clock and the running tasks it holds
    /// (counted through the partial index of running tasks).
    public func workers() async throws -> [FleetStatus.Worker] {
        var workers: [FleetStatus.Worker] = []
        let rows = try await client.query(
            """
            SELECT w.id, w.host, w.pid, w.port, w.state,
                   extract(epoch FROM now() - w.heartbeat_at)::float8, extract(epoch FROM w.expires_at - now())::float8,
                   (SELECT count(*) FROM tessera_fleet_tasks t WHERE t.owner = w.id AND t.state = 'running')::int, w.max_tasks,
                   extract(epoch FROM w.expires_at - w.heartbeat_at)::float8
            FROM tessera_fleet_workers w
            WHERE w.state = 'active' OR w.heartbeat_at > now() - interval '1 hour'
            ORDER BY w.id
            """, logger: logger)
        for try await (id, host, pid, port, state, since, expiry, tasks, maxTasks, lease) in rows.decode(
            (Int64, String, Int, Int?, String, Double, Double, Int, Int, Double).self)
        {
            workers.append(FleetStatus.Worker(
                id: id, host: host, pid: pid, port: port, state: state, secondsSinceHeartbeat: since, secondsToExpiry: expiry,
                tasks: tasks, maxTasks: maxTasks, lease: lease))
        }
        return workers
    }
}
