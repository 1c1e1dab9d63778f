import Foundation
import Testing

@testable import Tessera

/// Large files go through the crypto helpers in constant memory. Serialized, so the two tests
/// do not count each other's buffers.
@Suite(.serialized, .timeLimit(.minutes(3))) struct CryptoMemoryTests {
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

    @Test(.enabled(if: CryptoFixtures.hasSumTools))
    func hashing200MiBKeepsMemoryFlat() async throws {
        let directory = CryptoFixtures.Directory("memory")
        defer { directory.cleanUp() }
        let size = 200 << 20
        let path = directory.file("big.bin")
        try Self.writeLargeFile(path, size: size)
        // Measured in a process of its own: resident memory is per process, and other suites
        // run in parallel in this one.
        let figures = try await runTestHelper(["hash", path])
        let growth = try #require(figures["growth"] as? Int64)
        #expect(growth < Self.growthLimit, "resident memory grew by \(Self.mebibytes(growth)) while hashing 200 MiB")
        var report = "CryptoMemoryTests: hashing 200 MiB, VmRSS growth \(Self.mebibytes(growth)):"
        for algorithm in [Checksum.Algorithm.sha256, .md5, .sha1, .sha512] {
            let digest = try #require(figures[algorithm.rawValue] as? String)
            let seconds = try #require(figures[algorithm.rawValue + "Seconds"] as? Double)
            report += " \(algorithm) \(String(format: "%.0f", 200 / seconds)) MiB/s;"
            #expect(try CryptoFixtures.sum(algorithm, of: path) == digest)
        }
        print(report)
    }

    @Test(.enabled(if: CryptoFixtures.hasOpenSSL))
    func decrypting64MiBKeepsMemoryFlat() async throws {
        let directory = CryptoFixtures.Directory("aes-memory")
        defer { directory.cleanUp() }
        let plain = directory.file("plain.bin")
        let encrypted = directory.file("encrypted.bin")
        let decrypted = directory.file("decrypted.bin")
        try Self.writeLargeFile(plain, size: (64 << 20) + 5)
        let key = CryptoFixtures.bytes(16, seed: 1)
        let iv = CryptoFixtures.bytes(16, seed: 2)
        try CryptoFixtures.openssl(decrypt: false, key: key, iv: iv, from: plain, to: encrypted)

        let hex = { (bytes: [UInt8]) in bytes.map { String(format: "%02x", $0) }.joined() }
        let figures = try await runTestHelper(["decrypt", encrypted, decrypted, hex(key), hex(iv)])
        let growth = try #require(figures["growth"] as? Int64)
        #expect(growth < Self.growthLimit, "resident memory grew by \(Self.mebibytes(growth)) while decrypting 64 MiB")
        #expect(try Checksum.compute(.sha256, fileAt: decrypted) == Checksum.compute(.sha256, fileAt: plain))
        print("CryptoMemoryTests: decryptFile 64 MiB, VmRSS growth \(Self.mebibytes(growth))")
    }
}
