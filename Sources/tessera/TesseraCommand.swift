import ArgumentParser
import Foundation
import Logging
import Tessera

/// The `tessera` command.
struct TesseraCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tessera",
        abstract: "A plugin-extensible downloader on libcurl: plain files, DASH, HLS, Metalink, playurl APIs.",
        version: "\(Tessera.version) (libcurl \(CurlEngine.libcurlVersion))",
        subcommands: [
            GetCommand.self, ResolveCommand.self, CacheCommand.self, ListCommand.self, PauseCommand.self,
            ResumeCommand.self, RemoveCommand.self, PluginsCommand.self, DemoCommand.self, ServeCommand.self,
            FleetCommand.self,
        ]
    )
}

/// Runs the command with the exit codes people expect: 0 all completed, 1 some task failed
/// (or an input could not be used), 2 a usage error, 7 the run ended with tasks paused or
/// waiting (aria2c's "unfinished downloads"), 130 interrupted.
@main
enum Main {
    static func main() async {
        // Thousands of transfers each allocate and free a receive buffer: kept in the heap, not
        // faulted in again per transfer.
        CurlEngine.tuneAllocatorForManyTransfers()
        LoggingSystem.bootstrap(TerminalLogHandler.init)
        if let suggestion = TesseraCommand.suggestion(for: Array(CommandLine.arguments.dropFirst())) {
            Terminal.err("tessera: \(suggestion)")
            Foundation.exit(2)
        }
        do {
            let arguments = try ConfigFile.expand(Array(CommandLine.arguments.dropFirst()))
            var command = try TesseraCommand.parseAsRoot(arguments)
            if var asynchronous = command as? any AsyncParsableCommand {
                try await asynchronous.run()
            } else {
                try command.run()
            }
        } catch let exit as ExitCode {
            Foundation.exit(exit.rawValue)
        } catch let error as DownloadError {
            Terminal.err("tessera: \(error.message)")
            Foundation.exit(1)
        } catch {
            let code = TesseraCommand.exitCode(for: error)
            if code == .success {
                // --help, --version.
                Terminal.outLines(TesseraCommand.fullMessage(for: error))
                Foundation.exit(0)
            }
            if code == .validationFailure || error is ValidationError {
                Terminal.errLines(TesseraCommand.fullMessage(for: error))
                Foundation.exit(2)
            }
            Terminal.errLines("tessera: \(TesseraCommand.message(for: error))")
            Foundation.exit(1)
        }
    }
}

extension TesseraCommand {
    /// For a first argument that is no command but close to one (`gte`): the line that says
    /// which one was meant.
    static func suggestion(for arguments: [String]) -> String? {
        guard let first = arguments.first, !first.hasPrefix("-"), !first.contains(":"), !first.contains("/") else { return nil }
        let names = configuration.subcommands.compactMap { $0.configuration.commandName } + ["help"]
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
