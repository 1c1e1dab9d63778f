import Foundation
import Testing
import TesseraTesting
@testable import TesseraCLI

/// `tessera serve`, `fleet` and `demo` are run by `tessera-server`, which `tessera` replaces
/// itself with: the decision of which command lines go there, where it is looked for, and the
/// two executables as a user runs them (help, completions, a missing `tessera-server`).
@Suite struct CLIServerHandOverTests {
    @Test func theServerRunsItsCommandsTheirHelpAndWhatIsWrittenFromTheWholeTree() {
        for arguments in [
            ["serve"], ["serve", "--rpc-secret", "s"], ["fleet", "status", "--fleet", "postgres://a@b/c"], ["demo", "--serve"],
            ["help", "serve"], ["help", "fleet", "status"], ["--generate-completion-script", "bash"],
            ["--generate-completion-script=zsh"], ["--experimental-dump-help"], ["---completion", "serve", "--", "--rpc"],
        ] {
            #expect(CommandMain.serverRuns(arguments), "\(arguments)")
        }
        for arguments in [
            [], ["get", "serve"], ["get", "http://h/serve"], ["help"], ["help", "get"], ["--help"], ["--version"], ["Serve"],
            ["servex"], ["-serve"], ["resolve", "--json", "demo"], ["--generate-completion-scripts"], ["list", "fleet"],
        ] {
            #expect(!CommandMain.serverRuns(arguments), "\(arguments)")
        }
    }

    @Test func theServerIsLookedForBesideTesseraThenInLibexec() {
        #expect(CommandMain.serverExecutableCandidates(besides: "/usr/local/bin/tessera") == [
            "/usr/local/bin/tessera-server", "/usr/local/libexec/tessera/tessera-server",
        ])
        #expect(CommandMain.serverExecutableCandidates(besides: "/w/.build/debug/tessera") == [
            "/w/.build/debug/tessera-server", "/w/.build/libexec/tessera/tessera-server",
        ])
        #expect(CommandMain.serverExecutableCandidates(besides: "/tessera") == ["/tessera-server", "/libexec/tessera/tessera-server"])
    }

    @Test func theServerCommandsAreListedAndTheirHelpIsTheirOwn() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        let help = try await cli.run(["--help"])
        #expect(help.status == 0)
        for command in CommandMain.ServerCommand.allCases {
            #expect(help.output.contains("  \(command.rawValue) "), "\(command) is listed")
        }
        #expect(help.output.contains("Run as a download daemon"))
        for arguments in [["serve", "--help"], ["help", "serve"]] {
            let serve = try await cli.run(arguments)
            #expect(serve.status == 0, "\(arguments)")
            #expect(serve.output.contains("USAGE: tessera serve"), "\(arguments)")
            #expect(serve.output.contains("--rpc-secret"), "\(arguments)")
        }
        let status = try await cli.run(["fleet", "status", "--help"])
        #expect(status.status == 0 && status.output.contains("--fleet"))
        // A usage error of the server's commands exits 2, as `get`'s do.
        let wrong = try await cli.run(["serve", "--rpc-listen-port", "70000"])
        #expect(wrong.status == 2)
        #expect(wrong.errors.contains("--rpc-listen-port takes 0 to 65535"))
        // The completion scripts know the server's options too.
        let completion = try await cli.run(["--generate-completion-script", "bash"])
        #expect(completion.status == 0)
        #expect(completion.output.contains("--rpc-secret") && completion.output.contains("--limit-rate"))
    }

    @Test func withoutTheServerTesseraSaysWhereItLookedAndGetStillWorks() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        let alone = cli.directory + "/alone/tessera"
        try FileManager.default.createDirectory(atPath: cli.directory + "/alone", withIntermediateDirectories: true)
        try CLI.install(at: alone)
        let serve = try await cli.run(["serve", "--rpc-listen-port", "0"], executable: alone)
        #expect(serve.status == 1)
        #expect(serve.errors.contains("`serve` is run by tessera-server"))
        #expect(serve.errors.contains(cli.directory + "/alone/tessera-server"))
        #expect(serve.errors.contains(cli.directory + "/libexec/tessera/tessera-server"))
        let plugins = try await cli.run(["plugins"], executable: alone)
        #expect(plugins.status == 0 && plugins.output.contains("dash"))
    }

    @Test func anInstalledTesseraFindsTheServerInLibexec() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        let prefix = cli.directory + "/prefix"
        try FileManager.default.createDirectory(atPath: prefix + "/bin", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: prefix + "/libexec/tessera", withIntermediateDirectories: true)
        try CLI.install(at: prefix + "/bin/tessera")
        let server = CLI.executable.deletingLastPathComponent().appendingPathComponent("tessera-server").path
        try FileManager.default.createSymbolicLink(atPath: prefix + "/libexec/tessera/tessera-server", withDestinationPath: server)
        // (Through a link to bin/tessera, as a user's ~/bin may hold one: the real place counts.)
        try FileManager.default.createSymbolicLink(atPath: cli.directory + "/tessera-link", withDestinationPath: prefix + "/bin/tessera")
        let help = try await cli.run(["demo", "--help"], executable: cli.directory + "/tessera-link")
        #expect(help.status == 0)
        #expect(help.output.contains("USAGE: tessera demo"))
    }
}
