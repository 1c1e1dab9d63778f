import Foundation
import Tessera

#if canImport(Glibc)
import Glibc
#endif

/// A PostgreSQL 15 server of a test's own: a fresh cluster in a temporary directory (`initdb`,
/// trust authentication, user `tessera`), on 127.0.0.1 and a port of its own, `fsync=off`
/// (commits synchronous: what was committed outlives ``kill()``), stopped with
/// `pg_ctl -m immediate` and deleted by ``stop()``. For the fleet's tests, its demo
/// and its benchmark.
///
/// `initdb` refuses root: as root, the cluster belongs to the `postgres` system user (the
/// `postgresql-15` package creates it) and every `pg_ctl` runs through `runuser`.
///
/// ```swift
/// let server = try await PostgresTestServer.start()
/// defer { server.stop() }
/// // postgres://tessera@127.0.0.1:<port>/postgres
/// print(server.url)
/// ```
package final class PostgresTestServer: Sendable {
    /// Where the PostgreSQL 15 binaries are (`postgresql-15` from apt).
    package static let binaries = "/usr/lib/postgresql/15/bin"

    /// Whether the binaries are installed.
    package static var isInstalled: Bool { FileManager.default.isExecutableFile(atPath: binaries + "/pg_ctl") }

    /// Whether a test that needs PostgreSQL should run: the binaries are there, or this is CI
    /// (`CI=true`), where their absence must fail the test, not skip it.
    package static var shouldRun: Bool { isInstalled || ProcessInfo.processInfo.environment["CI"] == "true" }

    /// Why a test was skipped, for `.enabled(if:_:)`.
    package static let skipReason =
        "PostgreSQL 15 is not installed (/usr/lib/postgresql/15/bin): apt-get install postgresql-15, or run make test"

    /// The cluster's directory (the data directory is `data/` in it, the socket beside it).
    package let directory: String
    /// The port, on 127.0.0.1.
    package let port: Int
    /// The database user (a superuser).
    package let user = "tessera"

    /// `postgres://tessera@127.0.0.1:PORT/postgres`.
    package var url: String { "postgres://\(user)@127.0.0.1:\(port)/postgres" }

    private init(directory: String, port: Int) {
        self.directory = directory
        self.port = port
    }

    /// Creates a cluster and starts it (a few seconds). Throws when the binaries are missing or
    /// the server does not start (its log's end in the message).
    package static func start() async throws -> PostgresTestServer {
        guard isInstalled else { throw ServerError("PostgreSQL 15 is not installed in \(binaries) (apt-get install postgresql-15)") }
        return try await onThread {
            let directory = NSTemporaryDirectory() + "tessera-pg-" + UUID().uuidString
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            if getuid() == 0 {
                _ = try run("/bin/chown", ["postgres:postgres", directory])
            }
            let initdb = try run(
                binaries + "/initdb", ["-D", directory + "/data", "--auth=trust", "-U", "tessera", "--no-sync", "-E", "UTF8", "--locale=C"],
                asServer: true)
            guard initdb.status == 0 else { throw ServerError("initdb failed: \(initdb.output.suffix(600))") }
            var lastError = "no port was free"
            for _ in 0..<5 {
                let port = try LoopbackSocket(listening: false).closingPort()
                let server = PostgresTestServer(directory: directory, port: port)
                do {
                    try server.startProcess()
                    return server
                } catch {
                    lastError = "\(error)"
                }
            }
            throw ServerError(lastError)
        }
    }

    /// Starts the server again after ``kill()`` (same cluster, same port).
    package func restart() async throws {
        try await onThread { try self.startProcess() }
    }

    /// Stops the server at once (`pg_ctl -m immediate stop`: no checkpoint, clients cut), keeping
    /// the cluster for ``restart()``.
    /// (On a thread of its own: `pg_ctl -w` waits, and the cooperative pool must not.)
    package func kill() async {
        let directory = self.directory
        _ = try? await onThread {
            try Self.run(Self.binaries + "/pg_ctl", ["-D", directory + "/data", "-m", "immediate", "-w", "stop"], asServer: true)
        }
    }

    /// Stops the server and deletes the cluster.
    package func stop() async {
        await kill()
        let directory = self.directory
        _ = try? await onThread { try FileManager.default.removeItem(atPath: directory) }
    }

    /// The end of the server's log (for a failing test's message).
    package var logTail: String {
        String(((try? String(contentsOfFile: directory + "/log", encoding: .utf8)) ?? "").suffix(2000))
    }

    private func startProcess() throws {
        // (No `synchronous_commit=off`: a commit then stays in the WAL buffers for up to three
        // `wal_writer_delay`s, and ``kill()`` right after it loses it at recovery, as a fleet's
        // tasks vanished once. With `fsync=off` a synchronous commit is one write(), no sync.)
        let options = "-p \(port) -k \(directory) -c listen_addresses=127.0.0.1 -c fsync=off "
            + "-c full_page_writes=off -c max_connections=300 -c shared_buffers=64MB"
        let result = try Self.run(
            Self.binaries + "/pg_ctl", ["-D", directory + "/data", "-l", directory + "/log", "-o", options, "-w", "-t", "60", "start"],
            asServer: true)
        guard result.status == 0 else {
            throw ServerError("pg_ctl start failed on port \(port): \(result.output.suffix(400)) \(logTail.suffix(600))")
        }
    }

    private static func run(_ executable: String, _ arguments: [String], asServer: Bool = false) throws -> (status: Int32?, output: String) {
        let (path, argv) = asServer && getuid() == 0 ? ("/sbin/runuser", ["-u", "postgres", "--", executable] + arguments) : (executable, arguments)
        let captured = try SpawnedProcess.capture(path, argv, environment: childEnvironment(), mergingErrors: true, timeout: .seconds(90))
        return (captured.termination?.status, String(decoding: captured.output, as: UTF8.self))
    }

    /// Why the server could not be started.
    package struct ServerError: Error, CustomStringConvertible {
        /// What happened.
        package var description: String
        init(_ description: String) { self.description = description }
    }
}

extension LoopbackSocket {
    /// The port, after closing the socket (so a server can bind it right after).
    func closingPort() -> Int {
        let port = self.port
        close()
        return port
    }
}
