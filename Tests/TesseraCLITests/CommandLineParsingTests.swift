import ArgumentParser
import Testing
@testable import TesseraCLI

/// A command line that starts with a command's name is parsed by that command alone
/// (`CommandMain.directlyParsed`): the same command, with the same values, as parsed from the
/// root; anything the command alone refuses is left to the root.
@Suite struct CommandLineParsingTests {
    struct Root: ParsableCommand {
        static let configuration = CommandMain.configuration(subcommands: CommandMain.downloadCommands)
    }

    @Test func aCommandParsedAloneIsTheOneTheRootParses() throws {
        let lines: [[String]] = [
            ["get", "http://127.0.0.1/a"],
            ["get", "-j", "16", "-N", "16", "-i", "list.txt", "-d", "out", "--no-merge", "-q", "--proxy", ""],
            ["get", "--limit-rate", "2M", "-x", "4", "--header", "A: b", "--header", "C: d", "http://h/x", "--", "-not-an-option"],
            ["get", "-o", "%(title)s.%(ext)s", "--json", "--state-dir", "s", "help"],
            ["resolve", "--json", "http://h/manifest.mpd"],
            ["cache", "--no-config", "http://h/a"],
            ["list", "--json"],
            ["pause", "direct:http://h/a#", "x"],
            ["resume", "--all"],
            ["remove", "--delete-files", "direct:http://h/a#"],
            ["plugins"],
        ]
        for line in lines {
            let alone = try #require(CommandMain.directlyParsed(line, commands: Root.configuration.subcommands), "\(line)")
            let rooted = try Root.parseAsRoot(line)
            #expect(type(of: alone) == type(of: rooted), "\(line)")
            #expect(String(describing: alone) == String(describing: rooted), "\(line)")
        }
    }

    @Test func whatTheCommandAloneRefusesIsLeftToTheRoot() {
        for line in [
            [], ["--help"], ["--version"], ["get", "--help"], ["get", "-h"], ["get", "--version"], ["get", "--bogus"],
            ["get", "-j", "0", "http://h/a"], ["get", "--generate-completion-script", "bash"], ["gte", "http://h/a"],
            ["help", "get"], ["list", "--what"],
        ] {
            #expect(CommandMain.directlyParsed(line, commands: Root.configuration.subcommands) == nil, "\(line)")
        }
    }

    /// A command parsed on its own skips argument-parser's completion-script check (its
    /// configuration names `tessera` as its super-command); parsed from the root, as help and the
    /// completion scripts are, it is worded as it always was.
    @Test func theRootWordsACommandsHelpAndCompletionsAsBefore() {
        let help = Root.helpMessage(for: GetCommand.self)
        #expect(help.contains("USAGE: tessera get "), "\(help)")
        #expect(!help.contains("tessera tessera"), "\(help)")
        let script = Root.completionScript(for: .bash)
        #expect(script.contains("--no-merge") && script.contains("--limit-rate"))
        for command in CommandMain.downloadCommands {
            #expect(command.configuration._superCommandName == "tessera", "\(command)")
        }
    }
}
