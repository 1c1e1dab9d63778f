import Logging
import PostgresNIO

extension FleetQueue {
    /// What an acquire of host slots answered.
    package struct HostSlotsAnswer: Sendable, Equatable {
        /// The slots this worker holds for the host now (0 when its lease is not live).
        package var slots: Int
        /// `ceil(limit / workers wanting the host)`, this worker counted when it wants some.
        package var fairShare: Int
        /// Whether another live worker wants more slots than it holds.
        package var othersWaiting: Bool
    }

    /// Takes up to `want` slots of `host` in all for `worker`, out of `limit` over the fleet, and
    /// records `want` for the others' fair share. One transaction, serialized per host by a
    /// transaction-level advisory lock (two workers asking at once cannot both take the last
    /// slot); the slots of other workers count only while their lease is live by the database's
    /// clock, and nothing is taken unless this worker's own lease is. Never lowers what the
    /// worker holds (``releaseHostSlots(host:worker:to:)`` does, once its transfers ended).
    package func acquireHostSlots(host: String, worker: Int64, want: Int, limit: Int) async throws -> HostSlotsAnswer {
        let want = min(max(0, want), 1 << 20), limit = min(max(1, limit), 1 << 20)
        return try await client.withTransaction(logger: logger) { connection in
            try await connection.query("SELECT pg_advisory_xact_lock(hashtext('tessera_host:' || \(host)))", logger: logger)
            let rows = try await connection.query(
                """
                SELECT
                    coalesce(sum(s.slots) FILTER (WHERE s.worker <> \(worker)), 0)::bigint,
                    count(*) FILTER (WHERE s.worker <> \(worker) AND s.wanted > 0),
                    coalesce(bool_or(s.worker <> \(worker) AND s.wanted > s.slots), false),
                    coalesce(max(s.slots) FILTER (WHERE s.worker = \(worker)), 0),
                    EXISTS (SELECT 1 FROM tessera_fleet_workers w WHERE w.id = \(worker) AND w.state = 'active' AND w.expires_at >= now())
                FROM tessera_fleet_host_slots s JOIN tessera_fleet_workers w ON w.id = s.worker
                WHERE s.host = \(host) AND w.state = 'active' AND w.expires_at >= now()
                """, logger: logger)
            var taken: Int64 = 0, wanting: Int64 = 0, waiting = false, held = 0, live = false
            for try await (t, n, w, h, l) in rows.decode((Int64, Int64, Bool, Int, Bool).self) {
                (taken, wanting, waiting, held, live) = (t, n, w, h, l)
            }
            // (Counts from the database, bounded before any arithmetic.)
            let wanters = max(1, Int(clamping: min(max(0, wanting), 1 << 20)) + (want > 0 ? 1 : 0))
            let share = (limit + wanters - 1) / wanters
            guard live else { return HostSlotsAnswer(slots: 0, fairShare: share, othersWaiting: waiting) }
            let free = max(0, limit - Int(clamping: min(max(0, taken), Int64(limit))))
            let slots = max(min(max(0, held), limit), min(want, free))
            try await connection.query(
                """
                INSERT INTO tessera_fleet_host_slots (host, worker, slots, wanted) VALUES (\(host), \(worker), \(slots), \(want))
                ON CONFLICT (host, worker) DO UPDATE SET slots = EXCLUDED.slots, wanted = EXCLUDED.wanted, updated_at = now()
                """, logger: logger)
            return HostSlotsAnswer(slots: slots, fairShare: share, othersWaiting: waiting)
        }
    }

    /// Writes that `worker` holds `to` slots of `host` (never more than it held; the row goes at 0).
    package func releaseHostSlots(host: String, worker: Int64, to: Int) async throws {
        let to = max(0, to)
        if to == 0 {
            try await client.query(
                "DELETE FROM tessera_fleet_host_slots WHERE host = \(host) AND worker = \(worker)", logger: logger)
        } else {
            try await client.query(
                """
                UPDATE tessera_fleet_host_slots SET slots = least(slots, \(to)), updated_at = now()
                WHERE host = \(host) AND worker = \(worker)
                """, logger: logger)
        }
    }

    /// Deletes the host slots of workers no longer active (they stopped counting when their
    /// leases ended; this only keeps the table small).
    package func pruneHostSlots() async throws {
        try await client.query(
            """
            DELETE FROM tessera_fleet_host_slots s USING tessera_fleet_workers w
            WHERE w.id = s.worker AND w.state <> 'active'
            """, logger: logger)
    }
}
