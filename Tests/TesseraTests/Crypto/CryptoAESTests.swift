import Foundation
import Testing

@testable import Tessera

/// ``AES128CBC`` against `openssl enc -aes-128-cbc` as an independent oracle, and its errors.
@Suite struct CryptoAESTests {
    static let key = CryptoFixtures.bytes(16, seed: 0xAE5)
    static let iv = CryptoFixtures.bytes(16, seed: 0x1F)

    @Test(
        .enabled(if: CryptoFixtures.hasOpenSSL),
        arguments: [0, 1, 15, 16, 17, 31, 32, 33, 1000, 4096, (1 << 20) + 3])
    func agreesWithOpenSSLCommandLine(_ size: Int) throws {
        let directory = CryptoFixtures.Directory("aes-\(size)")
        defer { directory.cleanUp() }
        let plain = CryptoFixtures.bytes(size, seed: UInt64(size) &+ 11)
        let plainPath = try directory.write(plain, to: "plain.bin")
        let oraclePath = directory.file("oracle.enc")
        try CryptoFixtures.openssl(decrypt: false, key: Self.key, iv: Self.iv, from: plainPath, to: oraclePath)
        let oracle = CryptoFixtures.fileBytes(oraclePath)
        #expect(oracle.count == (size / 16 + 1) * 16)

        // Encryption matches byte for byte; decryption of the oracle's output restores the input.
        let encrypted = try AES128CBC.encrypt(plain, key: Self.key, iv: Self.iv)
        #expect(encrypted == oracle)
        #expect(try AES128CBC.decrypt(oracle, key: Self.key, iv: Self.iv) == plain)

        // openssl decrypts ours too.
        let oursPath = try directory.write(encrypted, to: "ours.enc")
        let roundPath = directory.file("round.bin")
        try CryptoFixtures.openssl(decrypt: true, key: Self.key, iv: Self.iv, from: oursPath, to: roundPath)
        #expect(CryptoFixtures.fileBytes(roundPath) == plain)

        // The streaming file decryption gives the same bytes.
        let outputPath = directory.file("decrypted.bin")
        try AES128CBC.decryptFile(at: oraclePath, to: outputPath, key: Self.key, iv: Self.iv)
        #expect(CryptoFixtures.fileBytes(outputPath) == plain)
    }

    @Test(arguments: [16, (1 << 20) - 16, (1 << 20) - 1, 1 << 20, (1 << 20) + 1, (3 << 20) + 5])
    func decryptFileEqualsDecrypt(_ size: Int) throws {
        let directory = CryptoFixtures.Directory("aes-file")
        defer { directory.cleanUp() }
        let plain = CryptoFixtures.bytes(size, seed: UInt64(size))
        let encrypted = try AES128CBC.encrypt(plain, key: Self.key, iv: Self.iv)
        let input = try directory.write(encrypted, to: "segment.ts.enc")
        let output = directory.file("segment.ts")
        // An existing longer output is truncated.
        try directory.write([UInt8](repeating: 0xEE, count: size + 100_000), to: "segment.ts")
        try AES128CBC.decryptFile(at: input, to: output, key: Self.key, iv: Self.iv)
        let inMemory = try AES128CBC.decrypt(encrypted, key: Self.key, iv: Self.iv)
        #expect(inMemory == plain)
        #expect(CryptoFixtures.fileBytes(output) == inMemory)
    }

    @Test func wrongKeyIsACryptoFailure() throws {
        let plain = Array("#EXTM3U segment payload, more than one block long".utf8)
        let encrypted = try AES128CBC.encrypt(plain, key: Self.key, iv: Self.iv)
        var wrongKey = Self.key
        wrongKey[0] ^= 0x01
        let error = #expect(throws: DownloadError.self) { try AES128CBC.decrypt(encrypted, key: wrongKey, iv: Self.iv) }
        #expect(error?.code == .cryptoFailure)
        #expect(error?.message.contains("the key or IV is wrong, or the segment is corrupt") == true)

        // A wrong key fails the padding check nearly always (a random last block ends in a valid
        // PKCS#7 pad about once in 256 tries); it never yields the plaintext.
        var failures = 0
        for seed in 1...64 {
            let key = CryptoFixtures.bytes(16, seed: UInt64(seed) &* 7919)
            do {
                let result = try AES128CBC.decrypt(encrypted, key: key, iv: Self.iv)
                #expect(result != plain)
            } catch {
                #expect(error.code == .cryptoFailure)
                failures += 1
            }
        }
        #expect(failures >= 60)

        // A wrong IV garbles the first block only; with a single block that is the padding.
        let single = try AES128CBC.encrypt([1, 2, 3], key: Self.key, iv: Self.iv)
        let ivError = #expect(throws: DownloadError.self) {
            try AES128CBC.decrypt(single, key: Self.key, iv: AES128CBC.sequenceIV(7))
        }
        #expect(ivError?.code == .cryptoFailure)
    }

    @Test func wrongSizesAreCryptoFailures() throws {
        let block = [UInt8](repeating: 0, count: 16)
        for (key, iv) in [
            ([UInt8](), Self.iv), (Array(Self.key.prefix(15)), Self.iv), (Self.key + [0], Self.iv),
            (Self.key + Self.key, Self.iv), (Self.key, []), (Self.key, Array(Self.iv.prefix(8))),
            (Self.key, Self.iv + [0]),
        ] {
            let decryptError = #expect(throws: DownloadError.self) { try AES128CBC.decrypt(block, key: key, iv: iv) }
            #expect(decryptError?.code == .cryptoFailure)
            #expect(decryptError?.message.contains("16 bytes") == true)
            let encryptError = #expect(throws: DownloadError.self) { try AES128CBC.encrypt(block, key: key, iv: iv) }
            #expect(encryptError?.code == .cryptoFailure)
        }
        // Ciphertext is a non-empty whole number of blocks.
        let encrypted = try AES128CBC.encrypt(Array(0..<40), key: Self.key, iv: Self.iv)
        for bad in [[], Array(encrypted.prefix(15)), Array(encrypted.prefix(47)), encrypted + [0]] {
            let error = #expect(throws: DownloadError.self) { try AES128CBC.decrypt(bad, key: Self.key, iv: Self.iv) }
            #expect(error?.code == .cryptoFailure)
            #expect(error?.message.contains("\(bad.count) bytes") == true)
        }
    }

    @Test func decryptFileFailuresLeaveNoOutput() throws {
        let directory = CryptoFixtures.Directory("aes-errors")
        defer { directory.cleanUp() }
        let plain = CryptoFixtures.bytes((1 << 20) + 100, seed: 5)
        let encrypted = try AES128CBC.encrypt(plain, key: Self.key, iv: Self.iv)
        let input = try directory.write(encrypted, to: "segment.enc")
        let output = directory.file("segment.out")

        var wrongKey = Self.key
        wrongKey[15] ^= 0x80
        let wrong = #expect(throws: DownloadError.self) {
            try AES128CBC.decryptFile(at: input, to: output, key: wrongKey, iv: Self.iv)
        }
        #expect(wrong?.code == .cryptoFailure)
        #expect(!FileManager.default.fileExists(atPath: output))

        let truncated = try directory.write(Array(encrypted.dropLast(5)), to: "truncated.enc")
        let short = #expect(throws: DownloadError.self) {
            try AES128CBC.decryptFile(at: truncated, to: output, key: Self.key, iv: Self.iv)
        }
        #expect(short?.code == .cryptoFailure)
        #expect(short?.message.contains(truncated) == true)
        #expect(!FileManager.default.fileExists(atPath: output))

        let missing = directory.file("missing.enc")
        let absent = #expect(throws: DownloadError.self) {
            try AES128CBC.decryptFile(at: missing, to: output, key: Self.key, iv: Self.iv)
        }
        #expect(absent?.code == .writeFailed)
        #expect(absent?.message.contains(missing) == true)

        let noFolder = directory.file("no/such/folder/out.bin")
        let unwritable = #expect(throws: DownloadError.self) {
            try AES128CBC.decryptFile(at: input, to: noFolder, key: Self.key, iv: Self.iv)
        }
        #expect(unwritable?.code == .writeFailed)
        #expect(unwritable?.message.contains(noFolder) == true)

        let itself = #expect(throws: DownloadError.self) {
            try AES128CBC.decryptFile(at: input, to: input, key: Self.key, iv: Self.iv)
        }
        #expect(itself?.code == .invalidRequest)
        #expect(CryptoFixtures.fileBytes(input) == encrypted)

        let badKey = #expect(throws: DownloadError.self) {
            try AES128CBC.decryptFile(at: input, to: output, key: [1, 2, 3], iv: Self.iv)
        }
        #expect(badKey?.code == .cryptoFailure)
        #expect(!FileManager.default.fileExists(atPath: output))
    }

    @Test func sequenceIVIsTheBigEndianSequenceNumber() {
        #expect(AES128CBC.sequenceIV(0) == [UInt8](repeating: 0, count: 16))
        #expect(AES128CBC.sequenceIV(1) == [UInt8](repeating: 0, count: 15) + [0x01])
        #expect(AES128CBC.sequenceIV(256) == [UInt8](repeating: 0, count: 14) + [0x01, 0x00])
        #expect(
            AES128CBC.sequenceIV(0x0102_0304_0506_0708)
                == [UInt8](repeating: 0, count: 8) + [0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08])
        #expect(
            AES128CBC.sequenceIV(UInt64.max) == [UInt8](repeating: 0, count: 8) + [UInt8](repeating: 0xFF, count: 8))
    }

    @Test(.enabled(if: CryptoFixtures.hasOpenSSL))
    func sequenceIVDecryptsAnHLSStyleSegment() throws {
        // As a packager would: key from the key URI, IV from the media sequence number.
        let directory = CryptoFixtures.Directory("aes-hls")
        defer { directory.cleanUp() }
        let plain = CryptoFixtures.bytes(188 * 100, seed: 188)  // whole MPEG-TS packets
        let iv = AES128CBC.sequenceIV(1_234_567)
        let plainPath = try directory.write(plain, to: "segment.ts")
        let encryptedPath = directory.file("segment.ts.enc")
        try CryptoFixtures.openssl(decrypt: false, key: Self.key, iv: iv, from: plainPath, to: encryptedPath)
        #expect(try AES128CBC.decrypt(CryptoFixtures.fileBytes(encryptedPath), key: Self.key, iv: iv) == plain)
    }
}
