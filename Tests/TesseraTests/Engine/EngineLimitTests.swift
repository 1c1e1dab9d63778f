import Foundation
import Testing
import Tessera
import TesseraTesting

@Suite(.timeLimit(.minutes(2))) struct EngineLimitTests {
    let directory = TemporaryDirectory("limits")

    @Test func twoHundredTransfersNeverExceedSixteenConnections() async throws {
        var configuration = CurlEngine.Configuration.forTests()
        configuration.threads = 1  // (one thread's limits and queue)
        configuration.maxConnections = 16
        configuration.maxConnectionsPerHost = 16
        configuration.maxActiveTransfers = 200
        let engine = try CurlEngine(configuration: configuration)
        try await withLoopbackOrigin { origin in
            defer { directory.cleanUp() }
            let paths = (0..<200).map { "/bytes/131072/file-\($0).bin" }
            for path in paths { origin.inject(.throttle(bytesPerSecond: 1_000_000), at: path) }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (index, path) in paths.enumerated() {
                    group.addTask {
                        let result = try await engine.transfer(.download(origin.url(path), to: directory.file("\(index).bin")))
                        #expect(result.bytesWritten == 131_072)
                    }
                }
                try await group.waitForAll()
            }
            #expect(origin.maxConcurrentConnections <= 16)
            #expect(origin.maxConcurrentConnections >= 12, "the transfers did run side by side")
            #expect(origin.connectionsAccepted <= 32, "connections are reused, not opened per transfer")
            for (index, path) in paths.enumerated().filter({ $0.offset % 37 == 0 }) {
                #expect(await origin.content(at: path).verifyFile(atPath: directory.file("\(index).bin"), size: 131_072))
            }
        }
    }

    @Test func thePerHostLimitHolds() async throws {
        var configuration = CurlEngine.Configuration.forTests()
        configuration.threads = 1  // (one thread's limits and queue)
        configuration.maxConnections = 16
        configuration.maxConnectionsPerHost = 3
        let engine = try CurlEngine(configuration: configuration)
        try await withLoopbackOrigin { origin in
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<20 {
                    let path = "/bytes/100000/h\(index)"
                    origin.inject(.throttle(bytesPerSecond: 1_000_000), at: path)
                    group.addTask { _ = try await engine.transfer(TransferRequest(url: origin.url(path), destination: .discard)) }
                }
                try await group.waitForAll()
            }
            #expect(origin.maxConcurrentConnections == 3)
        }
    }

    @Test func sequentialTransfersReuseOneConnection() async throws {
        let engine = try CurlEngine(configuration: .forTests())
        try await withLoopbackOrigin { origin in
            for index in 0..<20 {
                _ = try await engine.transfer(TransferRequest(url: origin.url("/bytes/1000/s\(index)"), destination: .discard))
            }
            #expect(origin.connectionsAccepted == 1)
        }
    }

    @Test func withoutReuseNoIdleConnectionStaysOpenAfterItsTransfer() async throws {
        var configuration = CurlEngine.Configuration.forTests()
        configuration.threads = 1  // (one thread's limits and queue)
        configuration.forbidsConnectionReuse = true
        let engine = try CurlEngine(configuration: configuration)
        try await withLoopbackOrigin { origin in
            for index in 0..<5 {
                _ = try await engine.transfer(TransferRequest(url: origin.url("/bytes/1000/f\(index)"), destination: .discard))
                #expect(await eventually { origin.openConnections == 0 }, "transfer \(index)'s connection closed")
            }
            #expect(origin.connectionsAccepted == 5)
        }
    }

    @Test func theEngineQueueHoldsWhatLibcurlShouldNotSeeYet() async throws {
        var configuration = CurlEngine.Configuration.forTests()
        configuration.threads = 1  // (one thread's limits and queue)
        configuration.maxActiveTransfers = 4
        let engine = try CurlEngine(configuration: configuration)
        try await withLoopbackOrigin { origin in
            let peak = Atomic(0)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<40 {
                    let path = "/bytes/50000/a\(index)"
                    origin.inject(.throttle(bytesPerSecond: 500_000), at: path)
                    group.addTask {
                        _ = try await engine.transfer(TransferRequest(url: origin.url(path), destination: .discard)) { _ in
                            let active = engine.statistics.activeTransfers
                            peak.update { $0 = max($0, active) }
                        }
                    }
                }
                try await group.waitForAll()
            }
            #expect(peak.value <= 4)
            #expect(origin.maxConcurrentConnections <= 4)
            #expect(engine.statistics.finishedTransfers == 40)
            #expect(engine.statistics.bytesReceived == 40 * 50_000)
        }
    }
}
