import ArgumentParser
import Foundation
import TesseraCLI

/// The `tessera` command: the downloads, and the commands `tessera-server` runs (`serve`,
/// `fleet`, `demo`), listed here by name and abstract.
struct TesseraCommand: ParsableCommand {
    static let configuration = CommandMain.configuration(
        subcommands: CommandMain.downloadCommands + [DemoEntry.self, ServeEntry.self, FleetEntry.self])
}

/// A command `tessera-server` runs, as `tessera --help` lists it: its name and abstract. Its
/// command lines are handed over before they are parsed here (`Main`); one that reached `run`
/// would be handed over too.
protocol ServerEntry: ParsableCommand {
    static var command: CommandMain.ServerCommand { get }
}

extension ServerEntry {
    static var configuration: CommandConfiguration {
        CommandConfiguration(commandName: command.rawValue, abstract: command.abstract)
    }

    func run() throws { ServerExecutable.handOver(CommandLine.arguments) }
}

/// `tessera demo`.
struct DemoEntry: ServerEntry { static let command = CommandMain.ServerCommand.demo }
/// `tessera serve`.
struct ServeEntry: ServerEntry { static let command = CommandMain.ServerCommand.serve }
/// `tessera fleet`.
struct FleetEntry: ServerEntry { static let command = CommandMain.ServerCommand.fleet }

@main
enum Main {
    static func main() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        if CommandMain.serverRuns(arguments) { ServerExecutable.handOver(CommandLine.arguments) }
        await CommandMain.run(TesseraCommand.self, arguments: arguments)
    }
}
