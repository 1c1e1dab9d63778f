import Foundation
import Testing
@testable import Tessera
import TesseraTesting

/// Network waits and probes, with their wall-clock bounds: measured in the timing phase of
/// `make test` (one suite at a time), where a busy machine cannot stretch them.
@Suite(.timeLimit(.minutes(2))) struct NetworkInterruptionTimingTests {
    func manager(_ monitor: (any NetworkMonitor)?, root: TemporaryDirectory, sleeper: RecordingSleeper) throws -> (DownloadTaskManager, CurlEngine) {
        let engine = try CurlEngine(configuration: .forTests())
        var configuration = DownloadTaskManager.Configuration(downloadRoot: root.path)
        configuration.networkMonitor = monitor
        configuration.sleeper = sleeper
        configuration.networkProbeBackoff = (.milliseconds(100), .milliseconds(400))
        return (DownloadTaskManager(configuration: configuration, engine: engine), engine)
    }

    @Test func refusedConnectionsInterruptWithoutSpendingRetriesAndResumeWhenTheMonitorSaysOnline() async throws {
        let root = TemporaryDirectory("network")
        defer { root.cleanUp() }
        let monitor = ManualNetworkMonitor(.offline)
        let sleeper = RecordingSleeper()
        let down = try DownPort(), port = down.port
        let (manager, engine) = try manager(monitor, root: root, sleeper: sleeper)
        let events = EventLog(manager.events())
        let url = URL(string: "http://127.0.0.1:\(port)/bytes/300000/net.bin")!
        let entity = DirectEntity(url: url)
        try await manager.start(entity)
        #expect(await manager.waitForState(entity.taskID, .interrupted(.network))?.state == .interrupted(.network))
        #expect(sleeper.delays.isEmpty, "no retry was spent")
        #expect(await manager.check(entity.taskID)?.error?.code == .connectionRefused)

        // The server comes back, but the monitor still says offline: nothing is probed.
        let origin = try await LoopbackOrigin.start(replacing: down)
        // Only watching for a while (several probe intervals) can show that nothing happens.
        #expect(await consistently(for: .milliseconds(600)) {
            let state = await manager.check(entity.taskID)?.state
            return origin.totalRequests == 0 && state == .interrupted(.network)
        }, "requests: \(origin.totalRequests)")

        monitor.set(.online)
        #expect(await manager.waitForState(entity.taskID, .completed)?.state == .completed)
        #expect(await origin.content(at: url.path).verifyFile(atPath: root.file("net.bin"), size: 300_000))
        let notices = events.all.compactMap { event -> DownloadNotice.Kind? in
            if case .notice(let notice) = event { return notice.kind }
            return nil
        }
        #expect(notices.contains(.networkRestored))
        events.stop()
        await engine.shutdown()
        try await origin.shutdown()
    }

    @Test func aBoundedWaitFailsTheTaskWithTheErrorThatStartedIt() async throws {
        let root = TemporaryDirectory("network-bounded")
        defer { root.cleanUp() }
        let down = try DownPort(), port = down.port
        let engine = try CurlEngine(configuration: .forTests())
        var configuration = DownloadTaskManager.Configuration(downloadRoot: root.path)
        configuration.networkProbeBackoff = (.milliseconds(100), .milliseconds(400))
        configuration.maxNetworkWait = .milliseconds(600)
        let manager = DownloadTaskManager(configuration: configuration, engine: engine)
        let entity = DirectEntity(url: URL(string: "http://127.0.0.1:\(port)/bytes/1000/gone.bin")!)
        let started = ContinuousClock.now
        try await manager.start(entity)
        #expect(await manager.waitForState(entity.taskID, .interrupted(.network))?.state == .interrupted(.network))
        #expect(await manager.waitForState(entity.taskID, .failed)?.state == .failed)
        let waited = ContinuousClock.now - started
        #expect(waited >= .milliseconds(600) && waited < .seconds(5), "\(waited)")
        let error = await manager.check(entity.taskID)?.error
        #expect(error?.code == .connectionRefused)
        #expect(error?.message.contains("gave up after waiting") == true)

        // A failed task may be started again; when the server is back it completes.
        let origin = try await LoopbackOrigin.start(replacing: down)
        try await manager.start(entity)
        #expect(await manager.waitForState(entity.taskID, .completed)?.state == .completed)
        await engine.shutdown()
        try await origin.shutdown()
    }

    @Test func aProbeWithBackoffResumesWhenTheServerIsBack() async throws {
        let root = TemporaryDirectory("network-probe")
        defer { root.cleanUp() }
        let sleeper = RecordingSleeper()
        let down = try DownPort(), port = down.port
        // No monitor: only probes can tell.
        let (manager, engine) = try manager(nil, root: root, sleeper: sleeper)
        let url = URL(string: "http://127.0.0.1:\(port)/bytes/200000/probe.bin")!
        let entity = DirectEntity(url: url)
        try await manager.start(entity)
        #expect(await manager.waitForState(entity.taskID, .interrupted(.network))?.state == .interrupted(.network))
        // Probes (HEAD, through the engine) fail against the down server, with backoff: let two
        // of them fail before the server comes back.
        let failedBefore = engine.statistics.finishedTransfers
        #expect(await eventually { engine.statistics.finishedTransfers >= failedBefore + 2 }, "probes while the server is down")
        let origin = try await LoopbackOrigin.start(replacing: down)
        #expect(await manager.waitForState(entity.taskID, .completed)?.state == .completed)
        #expect(origin.requests.first?.method == "HEAD", "a probe found the server first")
        #expect(sleeper.delays.isEmpty)
        await engine.shutdown()
        try await origin.shutdown()
    }

    @Test func onlyTheTasksThatLostTheNetworkResume() async throws {
        let root = TemporaryDirectory("network-only")
        defer { root.cleanUp() }
        let monitor = ManualNetworkMonitor(.offline)
        try await withLoopbackOrigin { origin in
            let down = try DownPort(), port = down.port
            let (manager, engine) = try manager(monitor, root: root, sleeper: RecordingSleeper())
            let lost = DirectEntity(url: URL(string: "http://127.0.0.1:\(port)/bytes/1000/lost.bin")!)
            let paused = DirectEntity(url: origin.url("/bytes/1000/paused.bin"))
            try await manager.add(paused)
            await manager.stop(paused.taskID)
            try await manager.start(lost)
            #expect(await manager.waitForState(lost.taskID, .interrupted(.network))?.state == .interrupted(.network))
            monitor.set(.online)
            // The lost task hears of it (it runs again, and is refused again)…
            let failedBefore = engine.statistics.finishedTransfers
            #expect(await eventually { engine.statistics.finishedTransfers > failedBefore }, "the lost task tried again")
            // …the paused one must not: only watching it for a while can show that.
            #expect(await consistently(for: .milliseconds(300)) { await manager.check(paused.taskID)?.state == .paused },
                "a paused task stays paused")
            await engine.shutdown()
            down.release()  // (held until here: the lost task is refused to the end)
        }
    }

    @Test func aMeteredNetworkIsToldAndCanHoldTasksBack() async throws {
        let root = TemporaryDirectory("metered")
        defer { root.cleanUp() }
        try await withLoopbackOrigin { origin in
            let monitor = ManualNetworkMonitor(NetworkStatus(isOnline: true, isMetered: true, interfaces: ["wwan0"]))
            let engine = try CurlEngine(configuration: .forTests())
            var configuration = DownloadTaskManager.Configuration(downloadRoot: root.path)
            configuration.networkMonitor = monitor
            configuration.allowsMeteredNetwork = false
            let manager = DownloadTaskManager(configuration: configuration, engine: engine)
            let events = EventLog(manager.events())
            let entity = DirectEntity(url: origin.url("/bytes/5000/metered.bin"))
            try await manager.start(entity)
            #expect(await manager.waitForState(entity.taskID, .interrupted(.meteredNetwork))?.state == .interrupted(.meteredNetwork))
            #expect(origin.totalRequests == 0)
            monitor.set(NetworkStatus(isOnline: true, isMetered: false, interfaces: ["eth0"]))
            #expect(await manager.waitForState(entity.taskID, .completed)?.state == .completed)
            #expect(events.all.contains { if case .notice(let notice) = $0 { return notice.kind == .meteredNetwork && notice.taskID == entity.taskID } else { return false } })

            // Allowed: the task runs, and the notice says it started on a metered network.
            monitor.set(NetworkStatus(isOnline: true, isMetered: true, interfaces: ["wwan0"]))
            var allowing = configuration
            allowing.allowsMeteredNetwork = true
            let second = DownloadTaskManager(configuration: allowing, engine: engine)
            let secondEvents = EventLog(second.events())
            let other = DirectEntity(url: origin.url("/bytes/5000/metered-ok.bin"))
            try await second.start(other)
            #expect(await second.waitForState(other.taskID, .completed)?.state == .completed)
            #expect(secondEvents.all.contains { if case .notice(let notice) = $0 { return notice.kind == .meteredNetwork && notice.message.contains("started") } else { return false } })
            events.stop()
            secondEvents.stop()
            await engine.shutdown()
        }
    }
}
