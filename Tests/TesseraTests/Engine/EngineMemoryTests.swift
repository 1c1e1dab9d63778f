import Foundation
import Testing

@Suite(.timeLimit(.minutes(3))) struct EngineMemoryTests {
    /// Measured in a process of its own: resident memory is per process, and other tests run
    /// in parallel in this one.
    @Test func a200MiBDownloadKeepsMemoryFlat() async throws {
        let figures = try await runTestHelper(["memory", "\(200 << 20)"])
        let baseline = try #require(figures["baseline"] as? Int64)
        let peak = try #require(figures["peak"] as? Int64)
        #expect(figures["bytes"] as? Int64 == 200 << 20)
        #expect(figures["verified"] as? Bool == true)
        #expect(peak - baseline < 16 << 20, "resident memory grew by \((peak - baseline) >> 10) KiB during a 200 MiB download")
    }
}
