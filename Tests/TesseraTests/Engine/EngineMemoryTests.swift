import Foundation
import Testing
import Tessera
import TesseraTesting

@Suite struct EngineMemoryTests {
    @Test func a200MiBDownloadKeepsMemoryFlat() async throws {
        let directory = TemporaryDirectory("memory")
        defer { directory.cleanUp() }
        let engine = try CurlEngine(configuration: .forTests())
        try await withLoopbackOrigin { origin in
            // Warm up both sides so their one-time allocations are in the baseline.
            _ = try await engine.transfer(.download(origin.url("/bytes/4194304/warm"), to: directory.file("warm")))
            let baseline = residentMemory()
            let peak = Atomic(baseline)
            let size: Int64 = 200 << 20
            let path = "/bytes/\(size)/big.bin", file = directory.file("big.bin")
            let result = try await engine.transfer(.download(origin.url(path), to: file)) { _ in
                let now = residentMemory()
                peak.update { $0 = max($0, now) }
            }
            #expect(result.bytesWritten == size)
            let growth = peak.value - baseline
            #expect(growth < 32 << 20, "resident memory grew by \(growth >> 20) MiB during a 200 MiB download")
            #expect(await origin.content(at: path).verifyFile(atPath: file, size: size))
        }
    }
}
