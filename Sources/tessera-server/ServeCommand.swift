import ArgumentParser
import CoreMetrics
import Foundation
import Logging
import Tessera
import TesseraCLI
import TesseraFleet
import TesseraServer

/// `tessera serve`: the manager as a daemon that aria2's RPC clients (aria2p, AriaNg, browser
/// extensions) can drive, with the native API, a live dashboard and metrics.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandMain.subcommand(CommandConfiguration(
        commandName: "serve",
        abstract: CommandMain.ServerCommand.serve.abstract,
        discussion: """
            Listens on 127.0.0.1 only unless --rpc-listen-all. Tasks in the state directory are \
            restored and resumed on start; SIGTERM or Ctrl-C stops cleanly (the tasks resume \
            next time). Point an aria2 client at http://127.0.0.1:PORT/jsonrpc with the secret \
            as its token. RPC dir options must stay under --dir.

            With --fleet postgres://USER@HOST:PORT/DB the daemon is one worker of a fleet: \
            downloads added to any worker are queued in PostgreSQL and claimed by whichever has \
            room; --dir must be the same shared directory on every worker, each with its own \
            --state-dir. A worker that dies or freezes past its lease has its downloads taken \
            over by the others, from the bytes it left; SIGTERM hands its downloads back at once. \
            --fleet-host-connections N keeps the whole fleet to N transfers at once to any one \
            server (host:port); each worker's -N still caps its own.
            """
    ))

    @Option(name: .customLong("rpc-listen-port"), help: ArgumentHelp("The port to listen on (0: a free one, printed on start).", valueName: "port"))
    var port: Int = 6800

    @Option(name: .customLong("rpc-secret"), help: ArgumentHelp("The secret every RPC call and the dashboard's actions must give (aria2's token:SECRET).", valueName: "secret"))
    var secret: String?

    @Flag(name: .customLong("rpc-listen-all"), help: "Listen on every interface, not only 127.0.0.1 (set --rpc-secret too).")
    var listenAll = false

    @Flag(name: .customLong("rpc-allow-origin-all"), help: "Answer JSON-RPC with Access-Control-Allow-Origin: * (as aria2), for a web front-end served from another origin.")
    var allowOriginAll = false

    @Option(name: [.customShort("d"), .customLong("dir")], help: ArgumentHelp("The download root; RPC dir options must stay under it.", valueName: "dir"))
    var directory: String = "downloads"

    @Option(name: [.customShort("j"), .customLong("max-concurrent-downloads")], help: ArgumentHelp("Tasks active at once.", valueName: "n"))
    var maxConcurrentDownloads: Int = 5

    @Option(name: .customLong("max-overall-download-limit"), help: ArgumentHelp("A rate limit for all transfers together, e.g. 500K or 2M (0: none).", valueName: "rate"))
    var maxOverallDownloadLimit: String?

    @Option(name: .customShort("N"), help: ArgumentHelp("Segment transfers at once, over all tasks.", valueName: "n"))
    var segments: Int = 16

    @Option(name: [.customShort("x"), .customLong("max-connection-per-server")], help: ArgumentHelp("Connections one large file may use.", valueName: "n"))
    var connectionsPerFile: Int = SplitPolicy().maxConnections

    @Option(name: [.customShort("f"), .customLong("format")], help: ArgumentHelp("Which variants added inputs take: best, worst, all, or ids joined by '+'.", valueName: "selector"))
    var format: String?

    @Option(name: .customLong("plugin-arg"), help: ArgumentHelp("An argument for a plugin, e.g. playurl:api=https://…/{cid}.", valueName: "plugin:key=value"))
    var pluginArguments: [String] = []

    @Option(name: .customLong("max-request-size"), help: ArgumentHelp("The largest request body accepted (a Metalink for addMetalink included).", valueName: "size"))
    var maxRequestSize: String = "4M"

    @Option(name: .customLong("fleet"), help: ArgumentHelp("Join a fleet whose queue is in this PostgreSQL database (--dir shared by every worker).", valueName: "postgres://user@host:port/db"))
    var fleet: String?

    @Option(name: .customLong("fleet-lease"), help: ArgumentHelp("Seconds a worker's lease lasts without a heartbeat (heartbeats every third of it); others take over after it.", valueName: "seconds"))
    var fleetLease: Double = 15

    @Option(name: .customLong("fleet-host-connections"), help: ArgumentHelp("With --fleet: transfers at once to one host:port over the whole fleet (each worker's -N still caps its own).", valueName: "n"))
    var fleetHostConnections: Int?

    @OptionGroup var network: NetworkOptions
    @OptionGroup var state: StateOptions
    @OptionGroup var merge: MergeOptions
    @Flag(name: .shortAndLong, help: "More on standard error: -v what the manager and the server decide, -vv every transfer.")
    var verbose: Int

    var logLevel: Logger.Level { verbose >= 2 ? .debug : verbose == 1 ? .info : .warning }

    func validate() throws {
        guard (0...65535).contains(port) else { throw ValidationError("--rpc-listen-port takes 0 to 65535") }
        guard maxConcurrentDownloads >= 1 else { throw ValidationError("--max-concurrent-downloads must be at least 1") }
        guard segments >= 1 else { throw ValidationError("-N must be at least 1") }
        guard connectionsPerFile >= 1 else { throw ValidationError("-x must be at least 1") }
        if let secret, secret.isEmpty { throw ValidationError("--rpc-secret cannot be empty") }
        guard fleetLease.isFinite, fleetLease >= 1, fleetLease <= 3600 else { throw ValidationError("--fleet-lease takes 1 to 3600 seconds") }
        if let limit = fleetHostConnections {
            guard fleet != nil else { throw ValidationError("--fleet-host-connections needs --fleet") }
            guard (1...10_000).contains(limit) else { throw ValidationError("--fleet-host-connections takes 1 to 10000") }
        }
        if let limit = maxOverallDownloadLimit, limit != "0", ByteCount.parse(limit) == nil {
            throw ValidationError("--max-overall-download-limit takes a size per second such as 500K or 2M, not \"\(limit)\"")
        }
        guard let size = ByteCount.parse(maxRequestSize), size >= 1024, size <= 1 << 30 else {
            throw ValidationError("--max-request-size takes a size from 1K to 1G")
        }
    }

    func run() async throws {
        TerminalLogHandler.level.withLock { $0 = logLevel }
        let arguments = try parsedPluginArguments()
        var formatSelector: FormatSelector?
        if let format {
            do { formatSelector = try FormatSelector(format) } catch { throw ValidationError(error.message) }
        }
        if let problem = writableDirectoryProblem(absolute(directory)) {
            Terminal.err("tessera: cannot write to the download directory \(absolute(directory)): \(problem)")
            throw ExitCode(1)
        }
        var network = self.network
        if let limit = maxOverallDownloadLimit { network.limitRate = limit == "0" ? nil : limit }
        // Everything that reports through swift-metrics in this process (the engine and the cache
        // the session creates, Hummingbird's request metrics) goes to the daemon's registry, which
        // /metrics exports. Once per process, before any of them is created.
        let metrics = DaemonMetrics()
        MetricsSystem.bootstrap(metrics.factory)
        var logger = Logger(label: "tessera.serve")
        logger.logLevel = logLevel
        let fleetWorker = try await joinFleet(logger: logger)
        let session: Session
        do {
            var settings = Session.Settings(
                downloadRoot: directory, jobs: maxConcurrentDownloads, segments: segments, connectionsPerFile: connectionsPerFile,
                network: network, state: state, merging: merge.policy)
            if let worker = fleetWorker?.worker {
                settings.fleet = (worker.store, worker.fence)
                settings.fleetHostLimit = fleetHostConnections
            }
            session = try await Session.open(settings)
        } catch {
            await fleetWorker?.connection.close()
            Terminal.err("tessera: \(describe(error))")
            throw ExitCode(1)
        }
        let report: DownloadTaskManager.RestoreReport
        do {
            // (A fleet worker's tasks come from the queue, claimed; its store holds none yet.)
            report = try await session.manager.restore(resuming: true)
        } catch {
            await session.close()
            await fleetWorker?.connection.close()
            Terminal.err("tessera: \(error.message)")
            throw ExitCode(1)
        }
        for (id, error) in report.skipped {
            Terminal.err("tessera: the stored task \(id) is skipped: \(error.message)")
        }
        let resolver = InputResolver(registry: session.registry, context: session.resolveContext, arguments: arguments, format: formatSelector)
        var daemonConfiguration = TesseraDaemon.Configuration(
            downloadRoot: session.downloadRoot, secret: secret, documentDirectory: session.stateDirectory + "/rpc-documents")
        daemonConfiguration.reportedOptions = [
            "rpc-listen-port": String(port), "rpc-listen-all": listenAll ? "true" : "false",
            "max-connection-per-server": String(connectionsPerFile), "split": String(connectionsPerFile),
        ]
        // aria2.shutdown stops the daemon as SIGTERM does (the server's handler takes it).
        daemonConfiguration.shutdownRequest = { kill(getpid(), SIGTERM) }
        if let fleetWorker {
            let queue = fleetWorker.connection.queue
            daemonConfiguration.enqueue = { entities, paused in
                try await queue.enqueue(try entities.map { try FleetQueue.NewTask($0, paused: paused) })
            }
            daemonConfiguration.fleet = FleetDaemonBridge(queue: queue, worker: fleetWorker.worker)
        }
        let daemon = TesseraDaemon(manager: session.manager, configuration: daemonConfiguration, metrics: metrics) { input, directory in
            try await resolver.entities(for: input, destinationDirectory: directory)
        }
        if listenAll && secret == nil {
            Terminal.err("tessera: warning: --rpc-listen-all without --rpc-secret: anyone who reaches this machine can add downloads")
        }
        await daemon.start()
        var serverConfiguration = TesseraServer.Configuration()
        serverConfiguration.host = listenAll ? "0.0.0.0" : "127.0.0.1"
        serverConfiguration.allowsAnyOrigin = allowOriginAll
        serverConfiguration.port = port
        serverConfiguration.maxBodySize = Int(ByteCount.parse(maxRequestSize) ?? 4 << 20)
        let server = TesseraServer(daemon: daemon, configuration: serverConfiguration, logger: logger)
        let restored = report.restored.count
        let host = serverConfiguration.host
        let authenticated = secret != nil
        let fleetRun = fleetWorker.map { fleet in Task { await fleet.worker.run(manager: session.manager) } }
        // `tessera pause|resume|remove` and a second `get` on this state directory reach the
        // daemon through its mailbox, as they reach a running `get` (a fleet worker answers
        // that its tasks are the fleet's).
        let mailbox = MailboxApplier(
            session: session,
            refusal: fleetWorker.map { "this tessera serve is a worker of the fleet on \($0.connection.database): add and change tasks with `tessera fleet add` or its RPC" })
        let mailboxRun = Task { await mailbox.serve() }
        let fleetText = fleetWorker.map { "; fleet worker on \($0.connection.database)" } ?? ""
        do {
            try await server.run(stopsOnSignals: true) { port in
                Terminal.outLines(
                    "tessera serve: listening on http://\(host):\(port) (JSON-RPC on /jsonrpc, dashboard on /, metrics on /metrics)"
                        + (restored > 0 ? "; \(restored) stored tasks restored" : "") + fleetText
                        + (authenticated ? "" : "; no --rpc-secret: every caller may act"))
            }
        } catch {
            mailboxRun.cancel()
            await mailboxRun.value
            await fleetWorker?.worker.stop()
            await fleetRun?.value
            await fleetWorker?.connection.close()
            let reason = "\(error)".contains("Address already in use") ? "the port is in use (another aria2c or tessera serve?)" : describe(error)
            Terminal.err("tessera: cannot serve on \(host):\(port): \(reason)")
            await session.close()
            await daemon.shutdown()
            throw ExitCode(1)
        }
        mailboxRun.cancel()
        await mailboxRun.value
        if let fleetWorker {
            // The tasks go back to the queue first (their runs stopped, their journals written).
            await fleetWorker.worker.stop()
            await fleetRun?.value
        }
        await session.close()
        await daemon.shutdown()
        if let fleetWorker {
            await fleetWorker.connection.close()
            Terminal.outLines("tessera serve: stopped; this worker's tasks went back to the fleet's queue")
            return
        }
        Terminal.outLines("tessera serve: stopped; unfinished tasks resume on the next start")
    }

    /// With `--fleet`: connects, migrates the schema and makes the worker (not running yet).
    func joinFleet(logger: Logger) async throws -> (connection: FleetConnection, worker: FleetWorker)? {
        guard let fleet else { return nil }
        do {
            let database = try FleetDatabase(url: fleet)
            let connection = try await FleetConnection.open(database, connections: 4, logger: logger)
            let lease = Duration.milliseconds(Int64(fleetLease * 1000))
            let timing = FleetLeasePolicy.Timing(lease: lease, heartbeat: lease / 3, margin: lease / 5, claimPoll: min(.seconds(2), lease / 3))
            let settings = FleetWorker.Settings(
                timing: timing, maxTasks: maxConcurrentDownloads, downloadRoot: absolute(directory),
                host: ProcessInfo.processInfo.hostName, pid: getpid(), port: port == 0 ? nil : port,
                hostConnections: fleetHostConnections, localHostLimit: max(1, segments))
            return (connection, FleetWorker(connection: connection, settings: settings, logger: logger))
        } catch {
            Terminal.err("tessera: cannot join the fleet: \(error)")
            throw ExitCode(1)
        }
    }

    func parsedPluginArguments() throws -> PluginArguments {
        var arguments = PluginArguments()
        for text in pluginArguments {
            do { try arguments.add(text) } catch { throw ValidationError(error.message) }
        }
        return arguments
    }
}
