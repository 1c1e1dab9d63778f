import ArgumentParser
import Foundation
import Logging
import Tessera
import TesseraCLI
import TesseraFleet

/// `tessera fleet`: the fleet of `tessera serve --fleet` workers, seen from its database.
struct FleetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fleet",
        abstract: CommandMain.ServerCommand.fleet.abstract,
        subcommands: [FleetStatusCommand.self, FleetAddCommand.self]
    )
}

/// The `--fleet` option of the `fleet` commands.
struct FleetOptions: ParsableArguments {
    @Option(name: .customLong("fleet"), help: ArgumentHelp("The fleet's database.", valueName: "postgres://user@host:port/db"))
    var url: String

    /// Connects (and migrates the schema), or exits with the reason.
    func connect() async throws -> FleetConnection {
        var logger = Logger(label: "tessera.fleet")
        logger.logLevel = .warning
        do {
            return try await FleetConnection.open(try FleetDatabase(url: url), connections: 2, logger: logger)
        } catch {
            Terminal.err("tessera: \(error)")
            throw ExitCode(1)
        }
    }
}

/// `tessera fleet status`: the workers (host, pid, last heartbeat, tasks held) and the queue by state.
struct FleetStatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status", abstract: "List the fleet's workers (host, pid, last heartbeat, tasks held) and its queue by state.")

    @OptionGroup var fleet: FleetOptions

    func run() async throws {
        let connection = try await fleet.connect()
        defer { Task { await connection.close() } }
        do {
            let status = try await FleetStatus.read(connection.queue)
            Terminal.outLines(status.lines.joined(separator: "\n"))
        } catch {
            Terminal.err("tessera: the fleet's database \(connection.database): \(FleetQueue.describe(error))")
            await connection.close()
            throw ExitCode(1)
        }
        await connection.close()
    }
}

/// `tessera fleet add INPUT...`: resolves inputs as `get` does and queues their tasks for the
/// fleet's workers.
struct FleetAddCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add", abstract: "Queue downloads for the fleet's workers (inputs as tessera get takes them).")

    @OptionGroup var fleet: FleetOptions

    @Option(name: .customLong("plugin-arg"), help: ArgumentHelp("An argument for a plugin, e.g. playurl:api=https://…/{cid}.", valueName: "plugin:key=value"))
    var pluginArguments: [String] = []

    @Option(name: .customLong("priority"), help: ArgumentHelp("Higher is claimed first (default 0).", valueName: "n"))
    var priority: Int = 0

    @Option(name: [.customShort("f"), .customLong("format")], help: ArgumentHelp("Which variants to take: best, worst, all, or ids joined by '+'.", valueName: "selector"))
    var format: String?

    @OptionGroup var network: NetworkOptions

    @Argument(help: ArgumentHelp("URLs or plugin:key inputs.", valueName: "input"))
    var inputs: [String]

    func run() async throws {
        var arguments = PluginArguments()
        for text in pluginArguments {
            do { try arguments.add(text) } catch { throw ValidationError(error.message) }
        }
        let selector: FormatSelector?
        do { selector = try format.map(FormatSelector.init) } catch { throw ValidationError(error.message) }
        let engine = try CurlEngine()
        let context = ResolveContext(engine: engine, headers: try network.headerFields(), documentTimeout: network.documentTimeout)
        let resolver = InputResolver(registry: makeRegistry(), context: context, arguments: arguments, format: selector)
        var tasks: [FleetQueue.NewTask] = []
        var failed = false
        for input in inputs {
            do {
                for entity in try await resolver.entities(for: input) { tasks.append(try FleetQueue.NewTask(entity, priority: priority)) }
            } catch {
                Terminal.err("tessera: \(UntrustedText.printable(input, limit: 200)): \(describe(error))")
                failed = true
            }
        }
        await engine.shutdown()
        let connection = try await fleet.connect()
        do {
            let states = try await connection.queue.enqueue(tasks)
            for task in tasks {
                Terminal.outLines("\(states[task.key] ?? "already queued, running or completed") \(UntrustedText.printable(task.key, limit: 300))")
            }
        } catch {
            Terminal.err("tessera: the fleet's database \(connection.database): \(FleetQueue.describe(error))")
            failed = true
        }
        await connection.close()
        if failed { throw ExitCode(1) }
    }
}
