import Foundation
import Testing
import Tessera
import TesseraTesting

/// `tessera serve` as a process: what a stop (SIGTERM) and the next start leave of its tasks.
@Suite(.timeLimit(.minutes(3))) struct CLIServeTests {
    /// A port nothing listens on (an origin that was there and is gone).
    static func downPort() async throws -> Int {
        let origin = try await LoopbackOrigin.start()
        let port = origin.port
        try await origin.shutdown()
        return port
    }

    /// The task waits for a host that refuses connections (up to 30 s); SIGTERM after it has
    /// waited a moment: the store keeps it waiting, not failed "after waiting 30 s", and the
    /// next start resumes it.
    @Test func sigtermLeavesATaskWaitingForItsHostWaiting() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        let port = try await Self.downPort()
        let url = "http://127.0.0.1:\(port)/bytes/50000/refused.bin"
        let serve = try await ServeProcess.start(cli, ["--network-wait", "30"])
        _ = try await serve.call("aria2.addUri", [[url]])
        let waiting = await eventually(within: .seconds(30)) {
            (try? await serve.tasks())?.first?["state"] as? String == "interrupted(network)"
        }
        let seen = (try? await serve.tasks()) ?? []
        #expect(waiting, "\(seen)")
        #expect(await serve.stop() == 0, "\(serve.standardError)")

        let list = try await cli.run(["list", "--json", "--state-dir", cli.state])
        let task = try #require((list.json?["tasks"] as? [[String: Any]])?.first, "\(list.output)")
        #expect(task["state"] as? String == "interrupted(network)", "\(task)")
        #expect((task["error"] as? String)?.contains("gave up") != true, "\(task)")

        // The next start resumes it: with the host back, it completes.
        let origin = try await LoopbackOrigin.start(port: port)
        let again = try await ServeProcess.start(cli, ["--network-wait", "30"])
        let completed = await eventually(within: .seconds(60)) {
            (try? await again.tasks())?.first?["state"] as? String == "completed"
        }
        let finished = (try? await again.tasks()) ?? []
        #expect(completed, "\(finished)")
        #expect(await again.stop() == 0)
        #expect(await origin.content(at: "/bytes/50000/refused.bin").verifyFile(atPath: cli.downloads + "/refused.bin", size: 50_000))
        try await origin.shutdown()
    }
}
