import ArgumentParser
import TesseraCLI

/// `tessera-server`: the whole `tessera` command tree, which `tessera serve`, `fleet` and
/// `demo` run (`tessera` hands its command line over to this executable; see `ServerExecutable`
/// in the `tessera` target). Named `tessera` in its help, usage lines and messages.
struct TesseraServerCommand: ParsableCommand {
    static let configuration = CommandMain.configuration(
        subcommands: CommandMain.downloadCommands + [DemoCommand.self, ServeCommand.self, FleetCommand.self])
}

@main
enum Main {
    static func main() async {
        await CommandMain.run(TesseraServerCommand.self, arguments: Array(CommandLine.arguments.dropFirst()))
    }
}
