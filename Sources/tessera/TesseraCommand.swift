import ArgumentParser
import Foundation
import TesseraCLI

/// The `tessera` command: the downloads, and the commands `tessera-server` runs (`serve`,
/// `fleet`, `demo`), listed here by name and abstract.
struct TesseraCommand: ParsableCommand {
    static let configuration = CommandMain.configuration(
        subcommands: CommandMain.downloadCommands + [DemoEntry.self, ServeEntry.self, FleetEntry.self])
}

/// `tessera demo` as `tessera --help` lists it (run by `tessera-server`).
struct DemoEntry: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "demo", abstract: CommandMain.ServerCommand.demo.abstract)
    func run() throws { ServerExecutable.handOver(CommandLine.arguments) }
}

/// `tessera serve` as `tessera --help` lists it (run by `tessera-server`).
struct ServeEntry: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "serve", abstract: CommandMain.ServerCommand.serve.abstract)
    func run() throws { ServerExecutable.handOver(CommandLine.arguments) }
}

/// `tessera fleet` as `tessera --help` lists it (run by `tessera-server`).
struct FleetEntry: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "fleet", abstract: CommandMain.ServerCommand.fleet.abstract)
    func run() throws { ServerExecutable.handOver(CommandLine.arguments) }
}

@main
enum Main {
    static func main() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        if CommandMain.serverRuns(arguments) { ServerExecutable.handOver(CommandLine.arguments) }
        await CommandMain.run(TesseraCommand.self, arguments: arguments)
    }
}
