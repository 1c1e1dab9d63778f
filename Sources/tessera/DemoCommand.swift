import ArgumentParser
import Foundation
import Tessera
import TesseraTesting

/// `tessera demo`: the engine against an embedded loopback origin, with faults to recover from.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Download a handful of files from an embedded loopback origin, with faults to recover from."
    )

    @Option(name: [.short, .customLong("output")], help: "Keep the files in this directory (default: a temporary one, removed at the end).")
    var output: String?

    @Option(name: .customLong("limit-rate"), help: "A global rate limit in bytes per second.")
    var limitRate: Int64?

    func run() async throws {
        let origin = try await LoopbackOrigin.start()
        let directory = output ?? (NSTemporaryDirectory() as NSString).appendingPathComponent("tessera-demo-\(getpid())")
        defer {
            if output == nil { try? FileManager.default.removeItem(atPath: directory) }
        }
        var configuration = CurlEngine.Configuration()
        configuration.proxy = .none
        configuration.globalRateLimit = limitRate
        let engine = try CurlEngine(configuration: configuration)

        let files = DemoFile.catalogue(on: origin)
        print("Tessera \(Tessera.version) demo: libcurl \(CurlEngine.libcurlVersion), origin \(origin.baseURL.absoluteString)")
        print("Downloading \(files.count) files into \(directory)\n")
        let board = ProgressBoard(files: files)
        let started = ContinuousClock.now
        let ticker = Task {
            while !Task.isCancelled {
                board.render()
                try? await Task.sleep(for: .milliseconds(250))
            }
        }
        let outcomes = await withTaskGroup(of: DemoOutcome.self) { group in
            for file in files {
                group.addTask {
                    await file.download(with: engine, into: directory, origin: origin, board: board)
                }
            }
            var outcomes: [DemoOutcome] = []
            for await outcome in group { outcomes.append(outcome) }
            return outcomes
        }
        ticker.cancel()
        board.render(final: true)
        let elapsed = ContinuousClock.now - started
        await engine.shutdown()
        try await origin.shutdown()

        print("")
        print(DemoOutcome.table(outcomes.sorted { $0.name < $1.name }))
        let bytes = outcomes.reduce(Int64(0)) { $0 + $1.bytes }
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        print("\n\(Format.bytes(bytes)) in \(String(format: "%.2f", seconds)) s, "
            + "\(origin.totalRequests) requests, at most \(origin.maxConcurrentConnections) connections at once.")
        #if DEBUG
        print("(A debug build: the embedded origin generates its content in unoptimized code, so these speeds are")
        print(" the origin's. `make bench` measures the engine against curl and aria2c.)")
        #endif
        guard outcomes.allSatisfy(\.verified) else {
            throw ExitCode.failure
        }
    }
}
