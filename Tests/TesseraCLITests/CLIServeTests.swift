import Foundation
import Testing
import Tessera
import TesseraTesting

/// `tessera serve` as a process: what a stop (SIGTERM) and the next start leave of its tasks.
@Suite(.timeLimit(.minutes(3))) struct CLIServeTests {
    /// The task waits for a host that refuses connections (up to 30 s); SIGTERM after it has
    /// waited a moment: the store keeps it waiting, not failed "after waiting 30 s", and the
    /// next start resumes it.
    @Test func sigtermLeavesATaskWaitingForItsHostWaiting() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        let down = try DownPort()
        let url = "http://127.0.0.1:\(down.port)/bytes/50000/refused.bin"
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
        let origin = try await LoopbackOrigin.start(replacing: down)
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

    /// A finished plain file (its size known from the response only): after a restart,
    /// aria2's `tellStatus` and `tellStopped` and the native API still give its total.
    @Test func aFinishedFileKeepsItsTotalAcrossARestart() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let size = 3_000_000
            let url = origin.url("/bytes/\(size)/whole.bin").absoluteString
            let serve = try await ServeProcess.start(cli)
            let gid = try #require(try await serve.call("aria2.addUri", [[url]]) as? String)
            let done = await eventually(within: .seconds(60)) {
                ((try? await serve.call("aria2.tellStatus", [gid, ["status"]])) as? [String: Any])?["status"] as? String == "complete"
            }
            #expect(done)
            let before = try #require(try await serve.call("aria2.tellStatus", [gid]) as? [String: Any])
            #expect(before["totalLength"] as? String == String(size), "\(before)")
            #expect(await serve.stop() == 0)
            // `tessera list` reads it from the store too.
            let list = try await cli.run(["list", "--json", "--state-dir", cli.state])
            let listed = try #require((list.json?["tasks"] as? [[String: Any]])?.first, "\(list.output)")
            #expect(listed["bytesTotal"] as? Int == size, "\(listed)")

            let again = try await ServeProcess.start(cli)
            let status = try #require(try await again.call("aria2.tellStatus", [gid]) as? [String: Any])
            #expect(status["status"] as? String == "complete")
            #expect(status["totalLength"] as? String == String(size), "\(status)")
            #expect(status["completedLength"] as? String == String(size), "\(status)")
            let stopped = try #require(try await again.call("aria2.tellStopped", [0, 10]) as? [[String: Any]])
            #expect(stopped.first?["totalLength"] as? String == String(size), "\(stopped)")
            let task = try #require(try await again.tasks().first)
            #expect(task["bytesTotal"] as? Int == size, "\(task)")
            #expect(task["bytesDone"] as? Int == size, "\(task)")
            #expect(await again.stop() == 0)
        }
    }
}
