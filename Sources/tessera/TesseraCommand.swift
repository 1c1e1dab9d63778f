import ArgumentParser
import Foundation
import Tessera

/// The `tessera` command.
struct TesseraCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tessera",
        abstract: "A plugin-extensible downloader on libcurl: plain files, DASH, HLS, Metalink, playurl APIs.",
        version: "\(Tessera.version) (libcurl \(CurlEngine.libcurlVersion))",
        subcommands: [
            GetCommand.self, ResolveCommand.self, CacheCommand.self, ListCommand.self, PauseCommand.self,
            ResumeCommand.self, RemoveCommand.self, PluginsCommand.self, DemoCommand.self,
        ]
    )
}

/// Runs the command with the exit codes people expect: 0 all completed, 1 some task failed
/// (or an input could not be used), 2 a usage error, 7 the run ended with tasks paused or
/// waiting (aria2c's "unfinished downloads"), 130 interrupted.
@main
enum Main {
    static func main() async {
        do {
            var command = try TesseraCommand.parseAsRoot()
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
