import Logging
import PostgresNIO

/// The fleet's two clients to its database, running: one pool for claims and task writes, and a
/// small one for heartbeats and LISTEN, so a busy pool never delays a heartbeat. Open it once per
/// process; ``close()`` ends both.
public final class FleetConnection: Sendable {
    /// The database.
    public let database: FleetDatabase
    /// Claims, writes, commands, status.
    public let queue: FleetQueue
    /// Heartbeats, joins and rescues (the small pool).
    let beats: FleetQueue
    let beatsClient: PostgresClient
    private let runs: [Task<Void, Never>]

    private init(database: FleetDatabase, queue: FleetQueue, beats: FleetQueue, runs: [Task<Void, Never>]) {
        self.database = database
        self.queue = queue
        self.beats = beats
        self.beatsClient = beats.client
        self.runs = runs
    }

    /// Connects (pools of `connections` and 2), checks the server answers within `timeout`, and
    /// creates or migrates the schema. The error names the server and the reason.
    public static func open(
        _ database: FleetDatabase, connections: Int = 4, timeout: Duration = .seconds(10), logger: Logger
    ) async throws(FleetError) -> FleetConnection {
        var quiet = logger
        quiet.logLevel = .critical
        let main = FleetQueue.makeClient(database, connections: connections, logger: quiet)
        let small = FleetQueue.makeClient(database, connections: 2, logger: quiet)
        let runs = [Task { await main.run() }, Task { await small.run() }]
        let connection = FleetConnection(
            database: database, queue: FleetQueue(client: main, database: database, logger: logger),
            beats: FleetQueue(client: small, database: database, logger: logger), runs: runs)
        do {
            try await connection.probe(timeout: timeout)
            try await connection.queue.prepareSchema()
        } catch {
            await connection.close()
            throw error
        }
        return connection
    }

    /// Ends both clients.
    public func close() async {
        for run in runs { run.cancel() }
        for run in runs { await run.value }
    }

    private func probe(timeout: Duration) async throws(FleetError) {
        let client = queue.client, database = self.database
        let outcome: Result<Void, FleetError> = await withTaskGroup(of: Result<Void, FleetError>?.self) { group in
            group.addTask {
                do {
                    try await client.query("SELECT 1")
                    return .success(())
                } catch {
                    return .failure(FleetError(server: database.description, reason: FleetQueue.describe(error)))
                }
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return Task.isCancelled ? nil : .failure(FleetError(server: database.description, reason: "no answer within \(timeout)"))
            }
            var result: Result<Void, FleetError> = .failure(FleetError(server: database.description, reason: "cancelled"))
            for await next in group {
                guard let next else { continue }
                result = next
                break
            }
            group.cancelAll()
            return result
        }
        try outcome.get()
    }
}
