import Foundation
import Testing
import Tessera
import TesseraTesting

@Suite(.timeLimit(.minutes(2))) struct EngineCancellationTests {
    let directory = TemporaryDirectory("cancel")

    @Test func cancellingTheTaskFreesTheHandleAtOnce() async throws {
        let engine = try CurlEngine(configuration: .forTests())
        try await withLoopbackOrigin { origin in
            defer { directory.cleanUp() }
            let path = "/bytes/50000000/slow.bin", file = directory.file("slow.bin")
            origin.inject(.throttle(bytesPerSecond: 1_000_000), at: path)
            let started = Atomic(false)
            let task = Task {
                try await engine.transfer(.download(origin.url(path), to: file)) { progress in
                    if progress.bytesWritten > 100_000 { started.set(true) }
                }
            }
            #expect(await eventually { started.value })
            #expect(engine.statistics.activeTransfers == 1)
            // Cancel and watch the engine from a thread of its own: the cooperative pool is
            // shared with the tests running in parallel, the engine's thread is not.
            let freedAfter = await withCheckedContinuation { (continuation: CheckedContinuation<Duration, Never>) in
                Thread {
                    let start = ContinuousClock.now
                    task.cancel()
                    while engine.statistics.activeTransfers > 0, ContinuousClock.now - start < .seconds(5) { usleep(100) }
                    continuation.resume(returning: ContinuousClock.now - start)
                }.start()
            }
            #expect(freedAfter < .milliseconds(100), "the engine freed the handle after \(freedAfter)")
            let error = await #expect(throws: DownloadError.self) { try await task.value }
            #expect(error?.code == .cancelled)
            #expect(engine.statistics.activeTransfers == 0)
            // The connection is closed, so the origin stops sending.
            #expect(await eventually { origin.openConnections == 0 })
            // What arrived is on disk and described by the checkpoint.
            let checkpoint = try #require(error?.checkpoint)
            #expect(checkpoint.bytesWritten > 100_000)
            #expect(fileSize(file) == checkpoint.bytesWritten)
            #expect(await origin.content(at: path).verifyFile(atPath: file, size: checkpoint.bytesWritten))
        }
    }

    @Test func anAlreadyCancelledTaskSendsNoRequest() async throws {
        let engine = try CurlEngine(configuration: .forTests())
        try await withLoopbackOrigin { origin in
            let task = Task {
                withUnsafeCurrentTask { $0?.cancel() }
                return try await engine.transfer(TransferRequest(url: origin.url("/bytes/10/x"), destination: .discard))
            }
            let error = await #expect(throws: DownloadError.self) { try await task.value }
            #expect(error?.code == .cancelled)
            // Nothing is sent later either: only watching the origin for a while can show that.
            #expect(await consistently(for: .milliseconds(100)) { origin.totalRequests == 0 })
        }
    }

    @Test func cancellingQueuedTransfersRemovesThemFromTheQueue() async throws {
        var configuration = CurlEngine.Configuration.forTests()
        configuration.threads = 1  // (one thread's limits and queue)
        configuration.maxActiveTransfers = 1
        let engine = try CurlEngine(configuration: configuration)
        try await withLoopbackOrigin { origin in
            origin.inject(.throttle(bytesPerSecond: 200_000), at: "/bytes/2000000/first")
            let first = Task { try await engine.transfer(TransferRequest(url: origin.url("/bytes/2000000/first"), destination: .discard)) }
            #expect(await eventually { engine.statistics.activeTransfers == 1 })
            let queued = (0..<10).map { index in
                Task { try await engine.transfer(TransferRequest(url: origin.url("/bytes/10/q\(index)"), destination: .discard)) }
            }
            #expect(await eventually { engine.statistics.queuedTransfers == 10 })
            for task in queued { task.cancel() }
            for task in queued {
                let error = await #expect(throws: DownloadError.self) { try await task.value }
                #expect(error?.code == .cancelled)
            }
            #expect(engine.statistics.queuedTransfers == 0)
            first.cancel()
            _ = try? await first.value
            #expect(origin.requests.allSatisfy { !$0.path.contains("/q") }, "no queued transfer reached the origin")
        }
    }

    @Test func shutdownFailsWhatIsRunningAndWhatComesLater() async throws {
        let engine = try CurlEngine(configuration: .forTests())
        try await withLoopbackOrigin { origin in
            origin.inject(.throttle(bytesPerSecond: 100_000), at: "/bytes/10000000/long")
            let running = Task { try await engine.transfer(TransferRequest(url: origin.url("/bytes/10000000/long"), destination: .discard)) }
            #expect(await eventually { engine.statistics.activeTransfers == 1 })
            await engine.shutdown()
            let error = await #expect(throws: DownloadError.self) { try await running.value }
            #expect(error?.code == .engineShutDown)
            let late = await #expect(throws: DownloadError.self) {
                try await engine.transfer(TransferRequest(url: origin.url("/bytes/10/x"), destination: .discard))
            }
            #expect(late?.code == .engineShutDown)
        }
    }
}

/// A tiny lock-protected box for values set from progress callbacks.
final class Atomic<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Value

    init(_ value: Value) { stored = value }

    var value: Value { lock.withLock { stored } }

    func set(_ value: Value) { lock.withLock { stored = value } }

    func update(_ body: (inout Value) -> Void) { lock.withLock { body(&stored) } }
}
