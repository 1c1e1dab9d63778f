import Foundation
import Synchronization
import Testing

@testable import Tessera

/// Large files go through the crypto helpers in constant memory. Serialized, so the two tests
/// do not count each other's buffers.
@Suite(.serialized) struct CryptoMemoryTests {
    /// Samples VmRSS on a thread of its own every millisecond and keeps the peak.
    final class PeakSampler: Sendable {
        private let peak: Synchronization.Atomic<Int64>
        private let running = Synchronization.Atomic<Bool>(true)
        private let finished = Synchronization.Atomic<Bool>(false)

        init() {
            peak = Synchronization.Atomic(CryptoFixtures.residentMemory())
            let thread = Thread { [self] in
                while running.load(ordering: .acquiring) {
                    let now = CryptoFixtures.residentMemory()
                    if now > peak.load(ordering: .relaxed) { peak.store(now, ordering: .relaxed) }
                    usleep(1000)
                }
                finished.store(true, ordering: .releasing)
            }
            thread.start()
        }

        /// Stops sampling and returns the highest VmRSS seen.
        func stop() -> Int64 {
            running.store(false, ordering: .releasing)
            while !finished.load(ordering: .acquiring) { usleep(1000) }
            return peak.load(ordering: .relaxed)
        }
    }

    /// Writes `size` bytes of varied content to `path`, 1 MiB at a time.
    static func writeLargeFile(_ path: String, size: Int) throws {
        guard FileManager.default.createFile(atPath: path, contents: nil),
            let handle = FileHandle(forWritingAtPath: path)
        else { throw CryptoFixtures.ToolFailure(description: "cannot create \(path)") }
        defer { try? handle.close() }
        var chunk = CryptoFixtures.bytes(1 << 20, seed: 99)
        var written = 0
        while written < size {
            let count = min(chunk.count, size - written)
            withUnsafeBytes(of: UInt64(written).bigEndian) { stamp in
                for index in 0..<8 { chunk[index] = stamp[index] }
            }
            try handle.write(contentsOf: chunk[..<count])
            written += count
        }
    }

    static func mebibytes(_ bytes: Int64) -> String {
        String(format: "%.1f MiB", Double(bytes) / Double(1 << 20))
    }

    /// The limit on VmRSS growth while streaming a large file.
    static let growthLimit: Int64 = 16 << 20

    /// Runs `work` with VmRSS sampled, up to three times until the growth over the baseline is
    /// under ``growthLimit``; returns the smallest growth. Other suites allocate in this process
    /// at the same time, so one noisy sample may be theirs; an implementation that holds the
    /// file in memory grows by far more than the limit every time.
    static func smallestGrowth<Result>(
        _ work: () throws -> Result
    ) rethrows -> (growth: Int64, growths: [Int64], result: Result) {
        var growths: [Int64] = []
        var best: (Int64, Result)?
        for _ in 0..<3 {
            let baseline = CryptoFixtures.residentMemory()
            let sampler = PeakSampler()
            let result: Result
            do { result = try work() } catch {
                _ = sampler.stop()
                throw error
            }
            let growth = sampler.stop() - baseline
            growths.append(growth)
            if best == nil || growth < best!.0 { best = (growth, result) }
            if growth < growthLimit { break }
        }
        return (best!.0, growths, best!.1)
    }

    @Test(.enabled(if: CryptoFixtures.hasSumTools))
    func hashing200MiBKeepsMemoryFlat() throws {
        let directory = CryptoFixtures.Directory("memory")
        defer { directory.cleanUp() }
        let size = 200 << 20
        let path = directory.file("big.bin")
        try Self.writeLargeFile(path, size: size)
        // Warm up, so one-time allocations (OpenSSL's provider tables) are in the baseline.
        let small = try directory.write(CryptoFixtures.bytes(3 << 20), to: "warm.bin")
        for algorithm in Checksum.Algorithm.allCases { _ = try Checksum.compute(algorithm, fileAt: small) }

        let measured = try Self.smallestGrowth {
            var results: [(Checksum, Duration)] = []
            for algorithm in [Checksum.Algorithm.sha256, .md5, .sha1, .sha512] {
                var checksum: Checksum?
                let elapsed = try ContinuousClock().measure { checksum = try Checksum.compute(algorithm, fileAt: path) }
                results.append((try #require(checksum), elapsed))
            }
            return results
        }
        #expect(
            measured.growth < Self.growthLimit,
            "resident memory grew by \(measured.growths.map(Self.mebibytes)) while hashing 200 MiB")

        var report =
            "CryptoMemoryTests: hashing 200 MiB from \(directory.path.hasPrefix("/dev/shm") ? "/dev/shm" : "disk"), "
            + "VmRSS growth \(Self.mebibytes(measured.growth)):"
        for (checksum, elapsed) in measured.result {
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            let rate = String(format: "%.0f", 200 / seconds), time = String(format: "%.3f", seconds)
            report += " \(checksum.algorithm) \(rate) MiB/s (\(time) s);"
            #expect(try CryptoFixtures.sum(checksum.algorithm, of: path) == checksum.hexDigest)
        }
        print(report)
    }

    @Test(.enabled(if: CryptoFixtures.hasOpenSSL))
    func decrypting64MiBKeepsMemoryFlat() throws {
        let directory = CryptoFixtures.Directory("aes-memory")
        defer { directory.cleanUp() }
        let plain = directory.file("plain.bin")
        let encrypted = directory.file("encrypted.bin")
        let decrypted = directory.file("decrypted.bin")
        try Self.writeLargeFile(plain, size: (64 << 20) + 5)
        let key = CryptoFixtures.bytes(16, seed: 1)
        let iv = CryptoFixtures.bytes(16, seed: 2)
        try CryptoFixtures.openssl(decrypt: false, key: key, iv: iv, from: plain, to: encrypted)
        _ = try AES128CBC.decrypt(AES128CBC.encrypt([1, 2, 3], key: key, iv: iv), key: key, iv: iv)  // warm up

        let measured = try Self.smallestGrowth {
            try ContinuousClock().measure { try AES128CBC.decryptFile(at: encrypted, to: decrypted, key: key, iv: iv) }
        }
        #expect(
            measured.growth < Self.growthLimit,
            "resident memory grew by \(measured.growths.map(Self.mebibytes)) while decrypting 64 MiB")
        #expect(try Checksum.compute(.sha256, fileAt: decrypted) == Checksum.compute(.sha256, fileAt: plain))
        let growth = Self.mebibytes(measured.growth)
        print("CryptoMemoryTests: decryptFile 64 MiB in \(measured.result), VmRSS growth \(growth)")
    }
}
