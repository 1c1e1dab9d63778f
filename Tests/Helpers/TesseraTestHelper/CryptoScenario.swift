import Foundation
import Tessera

/// Samples resident memory on a thread of its own every millisecond while `work` runs.
func peakGrowth<Result>(_ work: () throws -> Result) rethrows -> (growth: Int64, result: Result) {
    let sampler = MemorySampler()
    defer { _ = sampler.stop() }
    let result = try work()
    return (sampler.stop(), result)
}

/// Samples resident memory on a thread of its own every millisecond from its creation to
/// ``stop()``, which gives the peak growth over the resident memory at its creation.
final class MemorySampler: @unchecked Sendable {
    private let baseline = residentMemory()
    private let peak: Peak
    private let running = Peak(1)

    init() {
        peak = Peak(baseline)
        let (peak, running) = (peak, running)
        Thread {
            while running.value == 1 {
                peak.note(residentMemory())
                usleep(1000)
            }
            running.set(2)
        }.start()
    }

    /// Stops sampling (once; later calls only read) and returns the peak growth.
    func stop() -> Int64 {
        if running.value == 1 {
            running.set(0)
            while running.value != 2 { usleep(1000) }
        }
        return peak.value - baseline
    }
}

/// `hash FILE`: the four common checksums of a large file, and the memory growth meanwhile.
func hashScenario(path: String) throws {
    // Warm up, so one-time allocations (OpenSSL's provider tables) are in the baseline.
    let warm = path + ".warm"
    _ = FileManager.default.createFile(atPath: warm, contents: Data(repeating: 7, count: 3 << 20))
    defer { try? FileManager.default.removeItem(atPath: warm) }
    for algorithm in Checksum.Algorithm.allCases { _ = try Checksum.compute(algorithm, fileAt: warm) }
    var figures: [String: Any] = [:]
    let (growth, _) = try peakGrowth {
        for algorithm in [Checksum.Algorithm.sha256, .md5, .sha1, .sha512] {
            let start = ContinuousClock.now
            figures[algorithm.rawValue] = try Checksum.compute(algorithm, fileAt: path).hexDigest
            figures[algorithm.rawValue + "Seconds"] = seconds(ContinuousClock.now - start)
        }
    }
    figures["growth"] = growth
    emit(figures)
}

/// `decrypt IN OUT KEY IV`: AES-128-CBC of a large file, and the memory growth meanwhile.
func decryptScenario(input: String, output: String, key: String, iv: String) throws {
    func bytes(_ hex: String) -> [UInt8] {
        stride(from: 0, to: hex.count, by: 2).map { UInt8(hex.dropFirst($0).prefix(2), radix: 16)! }
    }
    _ = try AES128CBC.decrypt(AES128CBC.encrypt([1, 2, 3], key: bytes(key), iv: bytes(iv)), key: bytes(key), iv: bytes(iv))
    let start = ContinuousClock.now
    let (growth, _) = try peakGrowth { try AES128CBC.decryptFile(at: input, to: output, key: bytes(key), iv: bytes(iv)) }
    emit(["growth": growth, "seconds": seconds(ContinuousClock.now - start)])
}
