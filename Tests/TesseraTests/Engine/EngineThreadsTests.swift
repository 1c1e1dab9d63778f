import Foundation
import Testing
@testable import Tessera
import TesseraTesting

/// An engine of more than one thread: lanes, the least busy thread, the sums, the shutdown.
@Suite(.timeLimit(.minutes(2))) struct EngineThreadsTests {
    private static func engine(threads: Int) throws -> CurlEngine {
        var configuration = CurlEngine.Configuration.forTests()
        configuration.threads = threads
        return try CurlEngine(configuration: configuration)
    }

    /// The system's name of the calling thread.
    private static func threadName() -> String {
        ((try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "?")
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test func theThreadCountFollowsTheConnectionLimits() throws {
        var configuration = CurlEngine.Configuration.forTests()
        #expect(configuration.resolvedThreads == (ProcessInfo.processInfo.environment["TESSERA_TEST_ENGINE_THREADS"] == "2" ? 2 : 1))
        configuration.threads = 2
        #expect(configuration.resolvedThreads == 2)
        configuration.threads = 40
        #expect(configuration.resolvedThreads == 8, "at most 8")
        configuration.threads = 0
        #expect(configuration.resolvedThreads == 1)
        configuration.threads = 2
        configuration.maxConnectionsPerHost = 4
        #expect(configuration.resolvedThreads == 1, "a small per-host limit holds exactly on one thread")
        configuration.maxConnectionsPerHost = 16
        configuration.maxConnections = 7
        #expect(configuration.resolvedThreads == 1, "as a small total does")
        #expect(CurlEngine.Configuration.automaticThreads == min(2, ProcessInfo.processInfo.activeProcessorCount))
    }

    /// Every transfer of a lane ends on the same thread (a run's hooks never run on two at once),
    /// two lanes on two threads; the statistics add both threads up.
    @Test func aLaneKeepsItsTransfersOnOneThread() async throws {
        let engine = try Self.engine(threads: 2)
        #expect(engine.threadCount == 2)
        try await withLoopbackOrigin { origin in
            let threads = Locked<[Int: Set<String>]>([:])
            await withTaskGroup(of: Void.self) { group in
                for index in 0..<12 {
                    let lane = index % 2
                    group.addTask {
                        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                            _ = engine.start(
                                TransferRequest(url: origin.url("/bytes/20000/lane\(index)"), destination: .discard), lane: lane
                            ) { result in
                                #expect((try? result.get())?.bytesReceived == 20_000)
                                let name = Self.threadName()
                                threads.withLock { _ = $0[lane, default: []].insert(name) }
                                continuation.resume()
                            }
                        }
                    }
                }
            }
            let seen = threads.withLock { $0 }
            #expect(seen[0]?.count == 1 && seen[1]?.count == 1, "\(seen)")
            #expect(seen[0] != seen[1], "\(seen)")
            #expect(Set(seen.values.flatMap { $0 }) == ["tessera-curl-0", "tessera-curl-1"])
            #expect(engine.statistics.finishedTransfers == 12)
            #expect(engine.statistics.bytesReceived == 12 * 20_000)
        }
        await engine.shutdown()
    }

    /// A thread that carries one run's many transfers keeps every connection it opened for the
    /// next (its cache is as large as one thread's would be): 96 transfers, 16 at a time, over 16
    /// connections, not one new connection per transfer.
    @Test func aLaneReusesItsConnections() async throws {
        var configuration = CurlEngine.Configuration.forTests()
        configuration.threads = 2
        configuration.maxConnections = 16
        configuration.maxConnectionsPerHost = 16
        let engine = try CurlEngine(configuration: configuration)
        try await withLoopbackOrigin { origin in
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<96 {
                    if index >= 16 { try await group.next() }
                    group.addTask {
                        let result = try await engine.transfer(
                            TransferRequest(url: origin.url("/bytes/30000/reuse\(index)"), destination: .discard), lane: 1)
                        #expect(result.bytesReceived == 30_000)
                    }
                }
                try await group.waitForAll()
            }
            #expect(origin.connectionsAccepted <= 16, "\(origin.connectionsAccepted) connections for 96 transfers")
        }
        await engine.shutdown()
    }

    /// A new run takes the thread with fewer transfers; transfers without a lane go there too.
    @Test func theLeastBusyThreadTakesTheNextRun() async throws {
        let engine = try Self.engine(threads: 2)
        try await withLoopbackOrigin { origin in
            let path = "/bytes/400000/stalled.bin"
            origin.inject(.stall(.seconds(30), afterBytes: 1000), at: path)
            let first = engine.leastBusyLane()
            let stalled = engine.start(TransferRequest(url: origin.url(path), destination: .discard), lane: first) { _ in }
            #expect(await eventually { engine.statistics.activeTransfers == 1 })
            let next = engine.leastBusyLane()
            #expect(next != first, "the idle thread")
            let result = try await engine.transfer(TransferRequest(url: origin.url("/bytes/1000/other.bin"), destination: .discard))
            #expect(result.bytesReceived == 1000)
            engine.cancel(stalled)
            #expect(await eventually { engine.statistics.activeTransfers == 0 })
        }
        await engine.shutdown()
    }

    /// The shutdown stops every thread: a transfer on any lane then fails at once.
    @Test func aShutdownStopsEveryThread() async throws {
        let engine = try Self.engine(threads: 2)
        await engine.shutdown()
        for lane in 0..<2 {
            let ended = Locked<DownloadError?>(nil)
            _ = engine.start(TransferRequest(url: URL(string: "http://127.0.0.1:9/x")!, destination: .discard), lane: lane) { result in
                if case .failure(let error) = result { ended.withLock { $0 = error } }
            }
            #expect(ended.withLock { $0 }?.code == .engineShutDown, "lane \(lane)")
        }
    }
}
