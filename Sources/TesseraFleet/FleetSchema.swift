import Logging
import PostgresNIO

/// The fleet's tables in PostgreSQL, created and migrated by the first worker (under an advisory
/// lock, so workers starting together migrate once), with a version table: a binary refuses a
/// database whose schema is newer than it knows.
///
/// - `tessera_fleet_workers`: one row per worker run (host, pid, port, `-j`), its lease as
///   `expires_at` (the database's clock) and its state (`active`, `gone` after a graceful stop,
///   `dead` once another worker found its lease expired). A worker that comes back after being
///   declared dead joins as a new row.
/// - `tessera_fleet_tasks`: the queue and the tasks' records. `state` is the queue's state
///   (`queued`, `running`, `paused`, `completed`, `failed`, `invalid`, `removed`); a running task
///   has an `owner` and the `epoch` of the claim that gave it (every claim adds one). `entity` and
///   `record` hold the entity and the manager's task record (with its manifest) as JSON, written
///   on state and manifest changes only. The partial index on `(priority DESC, seq) WHERE state =
///   'queued'` is what a claim reads: it stays as small as the queue's head however many tasks
///   are finished, and updates of running or finished tasks never touch it.
/// - `tessera_fleet_progress` (UNLOGGED): bytes and segments done per task, upserted at most once
///   a second per worker and fenced by epoch; kept out of the claimed row so progress never
///   bloats the queue or its indexes.
/// - `tessera_fleet_completions`: one row per (task, epoch) that completed: a double completion
///   would be two rows for a task (the tests count them).
/// - Version 2, for status calls that never read every finished task: an index on
///   `updated_at` (the daemons' once-a-second change poll), partial indexes of paused and of
///   finished tasks (`tellWaiting`; `tellStopped`'s window in the order they finished), an
///   index on the progress table's `updated_at`, and `tessera_fleet_counts`: the number of
///   finished tasks by state, of completions and of tasks completed twice, kept by triggers in
///   64 slots (by task key for a row's change, by backend for a batch of rows added: concurrent
///   writers rarely share a row, and a batch does not update one row again and again) and
///   summed by the status. A claim moves a task from `queued` to `running`, which no trigger
///   counts: it pays nothing.
/// - Version 3, for a fleet-wide per-host limit (`--fleet-host-connections`):
///   `tessera_fleet_host_slots`, the transfer slots each worker holds per `host:port` and how
///   many it wants. A row counts only while its worker is `active` and its lease live by the
///   database's clock, so a dead worker's slots go away with its lease; the rescue deletes the
///   rows of workers no longer active.
public enum FleetSchema {
    /// The schema version this binary writes.
    public static let version = 3

    /// The finished states, as SQL (the partial index's predicate and the counted states).
    static let finishedStates = "('completed', 'failed', 'invalid', 'removed')"

    /// The statements of each migration, by the version they lead to.
    static let migrations: [Int: [String]] = [
        1: [
            """
            CREATE TABLE tessera_fleet_workers (
                id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                host text NOT NULL,
                pid integer NOT NULL,
                port integer,
                max_tasks integer NOT NULL,
                state text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'gone', 'dead')),
                started_at timestamptz NOT NULL DEFAULT now(),
                heartbeat_at timestamptz NOT NULL DEFAULT now(),
                expires_at timestamptz NOT NULL
            )
            """,
            "CREATE INDEX tessera_fleet_workers_expiry ON tessera_fleet_workers (expires_at) WHERE state = 'active'",
            """
            CREATE TABLE tessera_fleet_tasks (
                id text PRIMARY KEY,
                seq bigint GENERATED ALWAYS AS IDENTITY,
                priority integer NOT NULL DEFAULT 0,
                state text NOT NULL CHECK (state IN ('queued', 'running', 'paused', 'completed', 'failed', 'invalid', 'removed')),
                owner bigint,
                epoch bigint NOT NULL DEFAULT 0,
                group_key text,
                title text NOT NULL DEFAULT '',
                entity text NOT NULL,
                record text,
                last_error text,
                attempts integer NOT NULL DEFAULT 0,
                command text CHECK (command IN ('pause', 'remove', 'remove-files')),
                added_at timestamptz NOT NULL DEFAULT now(),
                updated_at timestamptz NOT NULL DEFAULT now()
            ) WITH (fillfactor = 80, autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02)
            """,
            "CREATE INDEX tessera_fleet_tasks_claim ON tessera_fleet_tasks (priority DESC, seq) WHERE state = 'queued'",
            "CREATE INDEX tessera_fleet_tasks_held ON tessera_fleet_tasks (owner) WHERE state = 'running'",
            """
            CREATE UNLOGGED TABLE tessera_fleet_progress (
                task_id text PRIMARY KEY,
                epoch bigint NOT NULL,
                bytes_done bigint NOT NULL,
                segments_done integer NOT NULL,
                updated_at timestamptz NOT NULL DEFAULT now()
            )
            """,
            """
            CREATE TABLE tessera_fleet_completions (
                task_id text NOT NULL,
                epoch bigint NOT NULL,
                worker bigint NOT NULL,
                completed_at timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (task_id, epoch)
            )
            """,
        ],
        2: [
            "CREATE INDEX tessera_fleet_tasks_updated ON tessera_fleet_tasks (updated_at)",
            "CREATE INDEX tessera_fleet_tasks_paused ON tessera_fleet_tasks (seq) WHERE state = 'paused'",
            "CREATE INDEX tessera_fleet_tasks_stopped ON tessera_fleet_tasks (updated_at, seq) WHERE state IN \(finishedStates)",
            "CREATE INDEX tessera_fleet_progress_updated ON tessera_fleet_progress (updated_at)",
            """
            CREATE TABLE tessera_fleet_counts (
                name text NOT NULL,
                slot integer NOT NULL,
                n bigint NOT NULL,
                PRIMARY KEY (name, slot)
            )
            """,
            """
            CREATE FUNCTION tessera_fleet_count(counted text, slot integer, delta bigint) RETURNS void LANGUAGE sql AS $$
                INSERT INTO tessera_fleet_counts (name, slot, n) VALUES (counted, slot, delta)
                ON CONFLICT (name, slot) DO UPDATE SET n = tessera_fleet_counts.n + EXCLUDED.n
            $$
            """,
            // A task's change of state: in the slot of its key, so that a transaction changing
            // many tasks spreads over the slots instead of updating one row again and again.
            """
            CREATE FUNCTION tessera_fleet_count_state_change() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF OLD.state IN \(finishedStates) THEN
                    PERFORM tessera_fleet_count(OLD.state, hashtext(OLD.id) & 63, -1);
                END IF;
                IF NEW.state IN \(finishedStates) THEN
                    PERFORM tessera_fleet_count(NEW.state, hashtext(NEW.id) & 63, 1);
                END IF;
                RETURN NULL;
            END
            $$
            """,
            """
            CREATE TRIGGER tessera_fleet_tasks_count_update AFTER UPDATE OF state ON tessera_fleet_tasks
            FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state AND (OLD.state IN \(finishedStates) OR NEW.state IN \(finishedStates)))
            EXECUTE FUNCTION tessera_fleet_count_state_change()
            """,
            // Rows added or deleted: once per statement, by state (a batch is one upsert per state).
            """
            CREATE FUNCTION tessera_fleet_count_rows() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF TG_OP = 'INSERT' THEN
                    PERFORM tessera_fleet_count(state, pg_backend_pid() & 63, count(*)) FROM added WHERE state IN \(finishedStates) GROUP BY state;
                ELSE
                    PERFORM tessera_fleet_count(state, pg_backend_pid() & 63, -count(*)) FROM gone WHERE state IN \(finishedStates) GROUP BY state;
                END IF;
                RETURN NULL;
            END
            $$
            """,
            """
            CREATE TRIGGER tessera_fleet_tasks_count_insert AFTER INSERT ON tessera_fleet_tasks
            REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION tessera_fleet_count_rows()
            """,
            """
            CREATE TRIGGER tessera_fleet_tasks_count_delete AFTER DELETE ON tessera_fleet_tasks
            REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION tessera_fleet_count_rows()
            """,
            """
            CREATE FUNCTION tessera_fleet_count_completions() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                PERFORM tessera_fleet_count('#completions', hashtext(NEW.task_id) & 63, 1);
                -- (The task's second epoch to complete; epochs only grow. Compared by epoch:
                -- an AFTER trigger sees every row its statement inserted.)
                IF (SELECT count(*) FROM tessera_fleet_completions WHERE task_id = NEW.task_id AND epoch <= NEW.epoch) = 2 THEN
                    PERFORM tessera_fleet_count('#doubles', hashtext(NEW.task_id) & 63, 1);
                END IF;
                RETURN NULL;
            END
            $$
            """,
            """
            CREATE TRIGGER tessera_fleet_completions_count AFTER INSERT ON tessera_fleet_completions
            FOR EACH ROW EXECUTE FUNCTION tessera_fleet_count_completions()
            """,
            // What a database of version 1 already holds.
            """
            INSERT INTO tessera_fleet_counts (name, slot, n)
            SELECT state, 0, count(*) FROM tessera_fleet_tasks WHERE state IN \(finishedStates) GROUP BY state
            UNION ALL SELECT '#completions', 0, count(*) FROM tessera_fleet_completions
            UNION ALL SELECT '#doubles', 0, count(*) FROM (SELECT task_id FROM tessera_fleet_completions GROUP BY task_id HAVING count(*) > 1) d
            """,
        ],
        3: [
            """
            CREATE TABLE tessera_fleet_host_slots (
                host text NOT NULL,
                worker bigint NOT NULL REFERENCES tessera_fleet_workers (id) ON DELETE CASCADE,
                slots integer NOT NULL CHECK (slots >= 0),
                wanted integer NOT NULL DEFAULT 0 CHECK (wanted >= 0),
                updated_at timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (host, worker)
            )
            """,
        ],
    ]

    /// Creates or migrates the schema (up to `target`: tests build older versions); throws when
    /// the database's schema is newer than this binary's, or it cannot be read.
    static func migrate(_ client: PostgresClient, database: FleetDatabase, to target: Int = version, logger: Logger) async throws {
        try await client.withTransaction(logger: logger) { connection in
            // One migrator at a time (released at the end of the transaction).
            try await connection.query("SELECT pg_advisory_xact_lock(7201482353512)", logger: logger)
            try await connection.query(
                "CREATE TABLE IF NOT EXISTS tessera_fleet_schema (version integer NOT NULL, migrated_at timestamptz NOT NULL DEFAULT now())",
                logger: logger)
            var current = 0
            for try await (version) in try await connection.query("SELECT coalesce(max(version), 0) FROM tessera_fleet_schema", logger: logger)
                .decode(Int.self)
            {
                current = version
            }
            if current > version {
                throw FleetError(
                    server: database.description,
                    reason: "its schema is version \(current), newer than this tessera's (\(version)): upgrade tessera on this machine")
            }
            for next in (current + 1)...max(current + 1, target) where next <= target {
                for statement in migrations[next] ?? [] {
                    try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                }
                try await connection.query("INSERT INTO tessera_fleet_schema (version) VALUES (\(next))", logger: logger)
                logger.info("fleet schema migrated", metadata: ["version": "\(next)"])
            }
        }
    }
}
