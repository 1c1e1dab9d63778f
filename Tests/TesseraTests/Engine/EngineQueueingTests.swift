import Foundation
import Testing
import Tessera
import TesseraTesting

@Suite(.timeLimit(.minutes(2))) struct EngineQueueingTests {
    /// Transfers that wait inside libcurl for a free connection must not run out their connect
    /// timeout while they wait: the timeout is for connecting, not for queueing.
    @Test func waitingForAConnectionIsNotAConnectTimeout() async throws {
        var configuration = CurlEngine.Configuration.forTests()
        configuration.maxConnections = 1
        configuration.maxConnectionsPerHost = 1
        configuration.connectTimeout = .seconds(1)
        let engine = try CurlEngine(configuration: configuration)
        try await withLoopbackOrigin { origin in
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<3 {
                    let path = "/bytes/1500000/q\(index)"
                    origin.inject(.throttle(bytesPerSecond: 1_000_000), at: path)
                    group.addTask {
                        let result = try await engine.transfer(TransferRequest(url: origin.url(path), destination: .discard))
                        #expect(result.bytesReceived == 1_500_000)
                    }
                }
                try await group.waitForAll()
            }
            #expect(origin.maxConcurrentConnections == 1)
        }
    }
}
