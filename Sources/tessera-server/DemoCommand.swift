import ArgumentParser
import Foundation
import Tessera
import TesseraCLI
import TesseraTesting

/// `tessera demo`: every plugin at work against an embedded loopback origin.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandMain.subcommand(CommandConfiguration(
        commandName: "demo",
        abstract: CommandMain.ServerCommand.demo.abstract,
        discussion: "Everything stays on 127.0.0.1. The origin injects faults (failing primary URLs, a corrupt piece) that the downloads recover from."
    ))

    @Option(name: .shortAndLong, help: ArgumentHelp("Keep the downloads in this directory (default: a temporary one, removed at the end).", valueName: "dir"))
    var output: String?

    @Option(name: .customLong("large-size"), help: ArgumentHelp("The size of the large plain file, in MiB.", valueName: "mib"))
    var largeSize: Int = 128

    @Option(name: .customLong("large-rate"), help: ArgumentHelp("How fast the origin serves the large file on each connection, so the live progress has time to show (0: as fast as it can).", valueName: "rate"))
    var largeRate: String = "3M"

    @Flag(help: "Only serve the demo content (on 127.0.0.1) and print the inputs to try with get or resolve; Ctrl-C stops.")
    var serve = false

    @Option(help: ArgumentHelp("The port to serve on with --serve (default: a free one).", valueName: "port"))
    var port: Int = 0

    @OptionGroup var display: DisplayOptions

    func validate() throws {
        guard ByteCount.parse(largeRate) != nil else { throw ValidationError("--large-rate takes a size per second such as 64M, or 0") }
        guard largeSize >= 1 else { throw ValidationError("--large-size must be at least 1 (MiB)") }
    }

    func run() async throws {
        let origin = try await LoopbackOrigin.start(threads: 2, port: serve ? port : 0)
        if serve { return try await serveOnly(origin) }
        let temporary = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("tessera-demo-\(getpid())").path
        let root = output.map(absolute) ?? temporary + "/downloads"
        defer { try? FileManager.default.removeItem(atPath: temporary) }

        // What the origin serves, by plugin.
        let large = LoopbackOrigin.generatedPath(size: Int64(largeSize) << 20, name: "large-file.bin")
        let fixtures: [(plugin: String, fixture: any OriginFixture)] = [
            ("playurl", PlayurlFixture.install(on: origin)),
            ("dash", DASHFixture.install(on: origin)),
            ("metalink", MetalinkFixture.install(on: origin)),
            ("hls", HLSFixture.install(on: origin)),
        ]
        let inputs = fixtures.flatMap(\.fixture.inputs) + [origin.url(large).absoluteString]
        if let rate = ByteCount.parse(largeRate), rate > 0 { origin.inject(.throttle(bytesPerSecond: Int(rate)), at: large) }
        // Option groups come from parsing (their property wrappers need it), as if typed.
        let pluginArguments = try InputOptions.parse(fixtures.flatMap(\.fixture.pluginArguments).flatMap { ["--plugin-arg", $0] })
        let state = try StateOptions.parse(["--state-dir", temporary + "/state"])
        let network = try NetworkOptions.parse(["--proxy", ""])
        let session = try await Session.open(Session.Settings(downloadRoot: root, jobs: 8, segments: 16, network: network, state: state))
        let screen = Display(json: display.json, quiet: display.quiet)
        if screen.mode != .json {
            screen.permanent("Tessera \(Tessera.version) demo — libcurl \(CurlEngine.libcurlVersion), origin \(origin.baseURL.absoluteString)")
            screen.permanent("Downloading \(inputs.count) inputs into \(root)\n")
        }
        // Watched from before the first task is added: each task's time (and speed) in the table
        // runs from its start to its end as the events tell them, not from when a screen redraw
        // or the end of the inputs first saw it.
        let started = ContinuousClock.now
        let watch = CommandRun.Watch(manager: session.manager, display: screen, timesTasks: true)
        let resolver = InputResolver(
            registry: session.registry, context: session.resolveContext,
            arguments: try pluginArguments.parsedPluginArguments(), format: nil)
        var ids: [DownloadTaskID] = []
        var inputErrors = 0
        for text in inputs {
            do {
                for entity in try await resolver.entities(for: text) {
                    ids.append(try await session.manager.start(entity).id)
                }
            } catch {
                screen.inputError(text, error)
                inputErrors += 1
            }
        }
        let commandRun = CommandRun(session: session, display: screen)
        let outcome = await commandRun.run(ids, watch: watch, inputErrors: inputErrors)
        let elapsed = ContinuousClock.now - started

        // Verify each plugin's outputs against what the origin served.
        var problems: [String: [String]] = [:]
        for (plugin, fixture) in fixtures { problems[plugin] = await fixture.verify(downloadRoot: root) }
        let largeInfo = outcome.tasks.first { $0.id.entityType == "direct" }
        var largeOK = false
        if let output = largeInfo?.outputs.first {
            largeOK = await origin.content(at: large).verifyFile(atPath: output.path, size: Int64(largeSize) << 20)
        }
        problems["direct"] = largeOK ? [] : ["the large file differs from the origin's"]

        if screen.mode == .json {
            await commandRun.summarize(outcome)
        } else {
            screen.permanent("")
            screen.permanent(Self.table(outcome, problems: problems))
            let bytes = outcome.tasks.reduce(Int64(0)) { $0 + $1.bytesDone }
            screen.permanent("\n\(ByteCount.format(bytes)) in \(String(format: "%.1f", seconds(elapsed))) s, \(origin.totalRequests) requests, at most \(origin.maxConcurrentConnections) connections at once.")
            for (plugin, list) in problems.sorted(by: { $0.key < $1.key }) where !list.isEmpty {
                screen.permanent("✗ \(plugin): \(list.joined(separator: "; "))")
            }
            if output != nil { screen.permanent("The files are in \(root).") }
        }
        await session.close()
        try await origin.shutdown()
        let verified = problems.values.allSatisfy(\.isEmpty)
        if outcome.exitCode != 0 { throw ExitCode(outcome.exitCode) }
        if !verified { throw ExitCode(1) }
    }

    /// `--serve`: the origin with every fixture, until SIGINT or SIGTERM.
    private func serveOnly(_ origin: LoopbackOrigin) async throws {
        let fixtures: [any OriginFixture] = [
            PlayurlFixture.install(on: origin), DASHFixture.install(on: origin),
            MetalinkFixture.install(on: origin), HLSFixture.install(on: origin),
        ]
        let large = origin.url(LoopbackOrigin.generatedPath(size: Int64(largeSize) << 20, name: "large-file.bin")).absoluteString
        let arguments = fixtures.flatMap(\.pluginArguments).map { "--plugin-arg '\($0)'" }
        var text = "Serving the demo content on \(origin.baseURL.absoluteString) (Ctrl-C stops). Inputs:\n"
        for fixture in fixtures { for input in fixture.inputs { text += "  \(input)\n" } }
        text += "  \(large)   (any /bytes/SIZE/NAME path serves SIZE generated bytes)\n"
        text += "Try:\n  tessera get --proxy '' \(arguments.joined(separator: " ")) \(fixtures.flatMap(\.inputs).joined(separator: " ")) \(large)\n"
        Terminal.outLines(text)
        InterruptSignal.shared.install()
        while !InterruptSignal.shared.fired { try? await Task.sleep(for: .milliseconds(100)) }
        try await origin.shutdown()
    }

    static func table(_ outcome: CommandRun.Outcome, problems: [String: [String]]) -> String {
        var rows = [["task", "plugin", "bytes", "time", "speed", "state", "verified"]]
        for info in outcome.tasks {
            let plugin = info.id.entityType
            let time = outcome.times[info.id].map(seconds) ?? 0
            let speed = time > 0 ? ByteCount.speed(Double(info.bytesDone) / time) : "-"
            rows.append([
                String(info.title.prefix(40)), plugin, ByteCount.format(info.bytesDone), String(format: "%.2f s", time), speed,
                info.state.description, info.state == .completed && (problems[plugin]?.isEmpty ?? false) ? "yes" : "NO",
            ])
        }
        let widths = rows[0].indices.map { column in rows.map { $0[column].count }.max() ?? 0 }
        return rows.map { row in
            zip(row, widths).map { $0.padding(toLength: $1, withPad: " ", startingAt: 0) }.joined(separator: "  ")
                .replacingOccurrences(of: "\\s+$", with: "", options: .regularExpression)
        }.joined(separator: "\n")
    }
}

func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}
