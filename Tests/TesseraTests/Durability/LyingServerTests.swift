import Foundation
import Testing
@testable import Tessera
import TesseraTesting

/// Servers whose answers end before their bodies do: every attempt is counted, the task ends in
/// a clear error after the retries a user allows, nothing is reported complete; and a body of
/// unannounced length with a version resumes with an open range, as `curl -C -` does.
@Suite(.timeLimit(.minutes(2))) struct LyingServerTests {
    static let retries = RetryPolicy(maxAttempts: 3, baseDelay: .milliseconds(5), maxDelay: .milliseconds(10))

    enum Lie: String, CaseIterable {
        /// A `Content-Length` the body never reaches, and no version to resume against.
        case shortBodyWithoutValidator
        /// A chunked body cut before its last chunk, no version.
        case chunkedCutWithoutValidator
    }

    @Test(arguments: Lie.allCases)
    func aBodyThatEndsEarlyEveryTimeFailsAfterTheRetries(lie: Lie) async throws {
        try await withManager(configure: { $0.retry = Self.retries }) { harness in
            let path = "/\(lie.rawValue).bin"
            let origin = harness.origin
            origin.serve(path, .init(
                .generated(size: 300_000), sendsETag: false, sendsLastModified: false, chunked: lie == .chunkedCutWithoutValidator))
            origin.inject(.dropConnection(afterBytes: 100_000), at: path)
            let entity = DirectEntity(url: origin.url(path))
            try await harness.manager.start(entity)
            let ended = try #require(await harness.waitFor(entity.taskID, timeout: .seconds(60)) { $0.state.isFinal })
            #expect(ended.state == .failed, "\(ended.state)")
            #expect(ended.error?.code == .connectionLost, "\(String(describing: ended.error))")
            // Each answer wrote bytes that the next request asks for again: they never counted as
            // progress, so the attempts ran out.
            #expect(origin.requests(for: path).count == Self.retries.maxAttempts, "\(origin.requests(for: path).count) requests")
            #expect(!FileManager.default.fileExists(atPath: harness.root.file("\(lie.rawValue).bin")), "nothing complete")
        }
    }

    @Test func aChunkedBodyWithAVersionResumesWithAnOpenRangeAfterAPause() async throws {
        try await withManager { harness in
            let size: Int64 = 2_000_000
            let path = "/chunked.bin"
            let origin = harness.origin
            origin.serve(path, .init(.generated(size: size), chunked: true))
            // Held in the middle until the pause has come, however loaded the machine (a throttle
            // let the whole body arrive first when the test's threads were starved for seconds).
            let gate = LoopbackOrigin.Gate()
            origin.inject(.hold(gate, afterBytes: 300_000), at: path, times: 1)
            let entity = DirectEntity(url: origin.url(path))
            try await harness.manager.start(entity)
            await harness.waitFor(entity.taskID) { $0.bytesDone > 200_000 }
            await harness.manager.stop(entity.taskID)
            try #require(await harness.waitForState(entity.taskID, .paused) != nil)
            // (The held answer stays held to the end: opened before its connection's close was
            // seen, it would send into the closed connection and count those bytes as served.)
            defer { gate.open() }
            try await harness.manager.resume(entity.taskID)
            let done = try #require(await harness.waitForState(entity.taskID, .completed, timeout: .seconds(30)))
            #expect(await origin.content(at: path).verifyFile(atPath: harness.root.file("chunked.bin"), size: size))
            #expect(done.bytesTotal == size)
            let requests = origin.requests(for: path)
            #expect(requests.count == 2, "\(requests.map { "\($0.connection): \($0.header("Range") ?? "-")" })")
            let resumed = try #require(requests.last)
            let range = try #require(resumed.header("Range"))
            let start = try #require(Int64(range.dropFirst("bytes=".count).prefix { $0 != "-" }))
            #expect(range.hasSuffix("-"), "an open range: \(range)")
            #expect(start >= 200_000, "from the bytes on disk: \(range)")
            #expect(resumed.header("If-Match") != nil, "of the same version")
            #expect(origin.bytesServed(for: path) <= size + 300_000, "the first bytes were not fetched again")
        }
    }

    @Test(arguments: ["bytes 0-9223372036854775806/*", "bytes 0-9/9223372036854775807", "bytes 1152921504606846976-1152921504606846977/*"])
    func aContentRangeBeyondAnyFileIsRefused(value: String) {
        #expect(ContentRange(value) == nil)
    }
}
