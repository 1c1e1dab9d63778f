import ArgumentParser
import Foundation
import Logging
import Tessera

/// What the two executables share: `tessera` (the downloads) and `tessera-server` (`serve`,
/// `fleet` and `demo`, which `tessera` hands its command line to: they link the daemon's, the
/// fleet's and the test origin's libraries, which `tessera get` does not load).
package enum CommandMain {
    /// The commands that download, list and manage tasks: `tessera`'s own.
    package static let downloadCommands: [any ParsableCommand.Type] = [
        GetCommand.self, ResolveCommand.self, CacheCommand.self, ListCommand.self, PauseCommand.self,
        ResumeCommand.self, RemoveCommand.self, PluginsCommand.self,
    ]

    /// The commands `tessera-server` runs, by name.
    package enum ServerCommand: String, CaseIterable, Sendable {
        case demo, serve, fleet

        /// The line `tessera --help` shows (the command's own abstract: one home for both).
        package var abstract: String {
            switch self {
            case .demo: "Download from an embedded loopback origin: a playurl group, DASH, Metalink, HLS with AES-128, a large file."
            case .serve: "Run as a download daemon: aria2's JSON-RPC on /jsonrpc, a dashboard on /, metrics on /metrics."
            case .fleet: "A fleet of tessera serve --fleet workers sharing one queue in PostgreSQL."
            }
        }
    }

    /// The executable that runs ``ServerCommand``s.
    package static let serverExecutableName = "tessera-server"

    /// Whether `tessera-server` runs this command line (without the program's name): one of its
    /// commands, `help` for one, or what argument-parser writes from the whole command tree (the
    /// completion scripts, the manual's dump, the completions it asks for at a prompt), so that
    /// those show `serve`'s options too.
    package static func serverRuns(_ arguments: [String]) -> Bool {
        guard let first = arguments.first else { return false }
        if ServerCommand(rawValue: first) != nil { return true }
        if first == "help", arguments.count > 1, ServerCommand(rawValue: arguments[1]) != nil { return true }
        return ["--generate-completion-script", "--experimental-dump-help", "---completion"].contains { first == $0 || first.hasPrefix($0 + "=") }
    }

    /// Where `tessera-server` is looked for, in order, for a `tessera` at `executable` (its path
    /// with symbolic links resolved): beside it (a build directory, or `bin` when installed
    /// there), then `../libexec/tessera/` from its directory (`make install`'s place).
    package static func serverExecutableCandidates(besides executable: String) -> [String] {
        let directory = (executable as NSString).deletingLastPathComponent
        let prefix = (directory as NSString).deletingLastPathComponent
        return [
            (directory as NSString).appendingPathComponent(serverExecutableName),
            (prefix as NSString).appendingPathComponent("libexec/tessera/" + serverExecutableName),
        ]
    }

    /// The root command's configuration: `tessera`, its version, these subcommands.
    package static func configuration(subcommands: [any ParsableCommand.Type]) -> CommandConfiguration {
        CommandConfiguration(
            commandName: "tessera",
            abstract: "A plugin-extensible downloader on libcurl: plain files, DASH, HLS, Metalink, playurl APIs.",
            version: "\(Tessera.version) (libcurl \(CurlEngine.libcurlVersion))",
            subcommands: subcommands
        )
    }

    /// Parses the command line with `root` and runs the command, with the exit codes people
    /// expect: 0 all completed, 1 some task failed (or an input could not be used), 2 a usage
    /// error, 7 the run ended with tasks paused or waiting (aria2c's "unfinished downloads"),
    /// 130 interrupted.
    package static func run(_ root: any ParsableCommand.Type, arguments: [String]) async -> Never {
        // Thousands of transfers each allocate and free a receive buffer: kept in the heap, not
        // faulted in again per transfer.
        CurlEngine.tuneAllocatorForManyTransfers()
        LoggingSystem.bootstrap(TerminalLogHandler.init)
        if let suggestion = suggestion(for: arguments, commands: root.configuration.subcommands) {
            Terminal.err("tessera: \(suggestion)")
            Foundation.exit(2)
        }
        do {
            let arguments = try ConfigFile.expand(arguments)
            var command = try directlyParsed(arguments, commands: root.configuration.subcommands) ?? root.parseAsRoot(arguments)
            if var asynchronous = command as? any AsyncParsableCommand {
                try await asynchronous.run()
            } else {
                try command.run()
            }
            Foundation.exit(0)
        } catch let exit as ExitCode {
            Foundation.exit(exit.rawValue)
        } catch let error as DownloadError {
            Terminal.err("tessera: \(error.message)")
            Foundation.exit(1)
        } catch {
            let code = root.exitCode(for: error)
            if code == .success {
                // --help, --version.
                Terminal.outLines(root.fullMessage(for: error))
                Foundation.exit(0)
            }
            if code == .validationFailure || error is ValidationError {
                Terminal.errLines(root.fullMessage(for: error))
                Foundation.exit(2)
            }
            Terminal.errLines("tessera: \(root.message(for: error))")
            Foundation.exit(1)
        }
    }

    /// A command's configuration as a subcommand of `tessera`: argument-parser's "super-command"
    /// is set, which only a command parsed on its own (``directlyParsed(_:commands:)``) looks at:
    /// it then skips its check for `--generate-completion-script`, two more parsers built from
    /// their types at every start (a one-file `get`: 57.9 -> 57.0 M instructions; most of what
    /// the check cost was the runtime's first look at conformances the command's own parse asks
    /// for next). Parsed from the root, as `--help`, a mistake and the completion scripts are,
    /// the root's configuration is the one consulted: the words are the same. A command line
    /// that asks for a completion script is not the command's own (the command alone refuses
    /// it), and goes to the root as it always has.
    package static func subcommand(_ configuration: CommandConfiguration) -> CommandConfiguration {
        var configuration = configuration
        configuration._superCommandName = "tessera"
        return configuration
    }

    /// The command a command line names first (`get …`), parsed by that command alone, when it
    /// takes the rest as it is; `nil` otherwise. argument-parser, parsing from the root, builds
    /// the named command's whole set of options three times over before parsing it (it asks
    /// whether the command captures all remaining input, twice, then checks for a completion
    /// script request): 24 M of a one-file `get`'s 63 M instructions, at every start. A command
    /// line the command alone refuses (`--help`, `--version`, a mistake) is parsed again from
    /// the root, which words the answer as it always has (`USAGE: tessera get …`).
    static func directlyParsed(_ arguments: [String], commands: [any ParsableCommand.Type]) -> (any ParsableCommand)? {
        guard let name = arguments.first,
            let command = commands.first(where: { $0.configuration.commandName == name }),
            command.configuration.subcommands.isEmpty
        else { return nil }
        // (Asked for help, argument-parser gives its help command instead: left to the root too.)
        guard let parsed = try? command.parseAsRoot(Array(arguments.dropFirst())),
            ObjectIdentifier(type(of: parsed)) == ObjectIdentifier(command)
        else { return nil }
        return parsed
    }

    /// For a first argument that is no command but close to one (`gte`): the line that says
    /// which one was meant.
    static func suggestion(for arguments: [String], commands: [any ParsableCommand.Type]) -> String? {
        guard let first = arguments.first, !first.hasPrefix("-"), !first.contains(":"), !first.contains("/") else { return nil }
        let names = commands.compactMap { $0.configuration.commandName } + ["help"]
        guard !names.contains(first) else { return nil }
        let close = names.map { ($0, distance(first.lowercased(), $0)) }.filter { $0.1 <= max(1, $0.0.count / 3) }.min { $0.1 < $1.1 }
        if let close {
            return "unknown command \"\(UntrustedText.printable(first, limit: 40))\": did you mean \"\(close.0)\"? (see `tessera --help`)"
        }
        return "unknown command \"\(UntrustedText.printable(first, limit: 40))\"; the commands are \(names.filter { $0 != "help" }.joined(separator: ", "))"
    }

    /// The edit distance (insertions, deletions, substitutions, swaps of neighbours).
    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        guard !a.isEmpty else { return b.count }
        guard !b.isEmpty else { return a.count }
        var table = Array(repeating: Array(repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { table[i][0] = i }
        for j in 0...b.count { table[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                table[i][j] = min(table[i - 1][j] + 1, table[i][j - 1] + 1, table[i - 1][j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] { table[i][j] = min(table[i][j], table[i - 2][j - 2] + 1) }
            }
        }
        return table[a.count][b.count]
    }
}
