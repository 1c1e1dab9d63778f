import ArgumentParser
import Tessera

/// The `tessera` command.
@main
struct TesseraCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tessera",
        abstract: "A plugin-extensible downloader on libcurl.",
        version: Tessera.version,
        subcommands: [DemoCommand.self]
    )
}
