import Foundation
import Testing

@testable import Tessera

#if canImport(Glibc)
import Glibc
#endif

/// Hashing with ``ChecksumHasher`` and ``Checksum/compute(_:fileAt:range:)``: known-answer
/// vectors, coreutils as an independent oracle, streaming, byte ranges, errors, `verify`.
@Suite struct CryptoHashingTests {
    /// FIPS 180-4 / RFC 1321 test vectors: "", "abc", and one million "a".
    static let vectors: [Checksum.Algorithm: [String]] = [
        .md5: [
            "d41d8cd98f00b204e9800998ecf8427e",
            "900150983cd24fb0d6963f7d28e17f72",
            "7707d6ae4e027c70eea2a935c2296f21",
        ],
        .sha1: [
            "da39a3ee5e6b4b0d3255bfef95601890afd80709",
            "a9993e364706816aba3e25717850c26c9cd0d89d",
            "34aa973cd4c4daa4f61eeb2bdbad27316534016f",
        ],
        .sha256: [
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0",
        ],
        .sha384: [
            "38b060a751ac96384cd9327eb1b1e36a21fdb71114be07434c0cc7bf63f6e1da274edebfe76f65fbd51ad2f14898b95b",
            "cb00753f45a35e8bb5a03d699ac65007272c32ab0eded1631a8b605a43ff5bed8086072ba1e7cc2358baeca134c825a7",
            "9d0e1809716474cb086e834e310a4a1ced149e9c00f248527972cec5704c2a5b07b8b3dc38ecc4ebae97ddd87f3d8985",
        ],
        .sha512: [
            "cf83e1357eefb8bdf1542850d66d8007d620e4050b5715dc83f4a921d36ce9ce"
                + "47d0d13c5d85f2b0ff8318d2877eec2f63b931bd47417a81a538327af927da3e",
            "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a"
                + "2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f",
            "e718483d0ce769644e2e42c7bc15b4638e1f98b13b2044285632a803afa973eb"
                + "de0ff244877ea60a4cb0432ce577c31beb009c5c2c49aa2e4eadb217ad8cc09b",
        ],
    ]
    static let inputs: [[UInt8]] = [[], Array("abc".utf8), [UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000)]

    @Test(arguments: Checksum.Algorithm.allCases)
    func knownAnswerVectors(_ algorithm: Checksum.Algorithm) throws {
        let expected = try #require(Self.vectors[algorithm])
        for (input, hex) in zip(Self.inputs, expected) {
            #expect(Checksum.compute(algorithm, bytes: input).hexDigest == hex)
            #expect(input.withUnsafeBytes { Checksum.compute(algorithm, bytes: $0) }.hexDigest == hex)
        }
        // The million "a" fed one byte at a time through a hasher, then in uneven pieces.
        let hasher = ChecksumHasher(algorithm)
        let million = Self.inputs[2]
        for index in 0..<1000 { hasher.update([million[index]]) }
        var position = 1000
        var step = 1
        while position < million.count {
            let end = min(million.count, position + step)
            million[position..<end].withUnsafeBytes { hasher.update($0) }
            position = end
            step = step * 3 + 1
        }
        #expect(hasher.finalize().hexDigest == expected[2])
    }

    @Test(.enabled(if: CryptoFixtures.hasSumTools), arguments: Checksum.Algorithm.allCases)
    func filesAgreeWithCoreutils(_ algorithm: Checksum.Algorithm) throws {
        let directory = CryptoFixtures.Directory("sums")
        defer { directory.cleanUp() }
        let sizes = [
            0, 1, 55, 56, 63, 64, 65, 111, 112, 127, 128, 129, 1_000_000, (1 << 20) - 1, 1 << 20, (3 << 20) + 17,
        ]
        for size in sizes {
            let bytes =
                size == 1_000_000
                ? [UInt8](repeating: UInt8(ascii: "a"), count: size)
                : CryptoFixtures.bytes(size, seed: UInt64(size) + 7)
            let path = try directory.write(bytes, to: "file-\(size)")
            let oracle = try CryptoFixtures.sum(algorithm, of: path)
            #expect(try Checksum.compute(algorithm, fileAt: path).hexDigest == oracle, "\(algorithm), \(size) bytes")
            #expect(Checksum.compute(algorithm, bytes: bytes).hexDigest == oracle, "\(algorithm), \(size) bytes")
            if size == 1_000_000 { #expect(oracle == Self.vectors[algorithm]?[2]) }
        }
    }

    @Test func streamingEqualsOneShot() {
        let bytes = CryptoFixtures.bytes(300_001, seed: 42)
        for algorithm in Checksum.Algorithm.allCases {
            let oneShot = Checksum.compute(algorithm, bytes: bytes)
            let hasher = ChecksumHasher(algorithm)
            #expect(hasher.algorithm == algorithm)
            var start = 0
            for cut in [0, 0, 1, 63, 64, 65, 1000, 65_536, 200_000, 300_001] {
                hasher.update(Array(bytes[start..<cut]))
                start = cut
            }
            hasher.update(UnsafeRawBufferPointer(start: nil, count: 0))
            #expect(hasher.finalize() == oneShot)
        }
    }

    @Test func anyCollectionOfBytesHashes() throws {
        let count = 200_003  // over the 64 KiB staging buffer for non-contiguous collections
        let lazy = (0..<count).lazy.map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let array = Array(lazy)
        for algorithm in Checksum.Algorithm.allCases {
            let expected = Checksum.compute(algorithm, bytes: array)
            #expect(Checksum.compute(algorithm, bytes: lazy) == expected)
            #expect(Checksum.compute(algorithm, bytes: Data(array)) == expected)
            #expect(Checksum.compute(algorithm, bytes: array[...]) == expected)
            #expect(
                Checksum.compute(algorithm, bytes: array[5...])
                    == Checksum.compute(algorithm, bytes: Array(array[5...])))
        }
        #expect(Checksum.compute(.md5, bytes: EmptyCollection<UInt8>()).hexDigest == "d41d8cd98f00b204e9800998ecf8427e")
    }

    @Test func rangesOfAFileHashLikeTheSlice() throws {
        let directory = CryptoFixtures.Directory("ranges")
        defer { directory.cleanUp() }
        let size = (3 << 20) + 123
        let bytes = CryptoFixtures.bytes(size, seed: 3)
        let path = try directory.write(bytes, to: "file")
        let mib = 1 << 20
        let ranges: [(offset: Int, length: Int?)] = [
            (0, nil), (0, size), (0, 1), (5, 100), (mib - 7, mib + 20), (mib, mib), (2 * mib + 1, nil),
            (size - 1, 1), (size - 1, nil), (size, nil), (0, 3 * mib), (17, size - 17),
        ]
        for algorithm in [Checksum.Algorithm.sha256, .md5, .sha512] {
            for range in ranges {
                let end = range.length.map { range.offset + $0 } ?? size
                let expected = Checksum.compute(algorithm, bytes: bytes[range.offset..<end])
                let byteRange = ByteRange(offset: Int64(range.offset), length: range.length.map(Int64.init))
                #expect(try Checksum.compute(algorithm, fileAt: path, range: byteRange) == expected, "\(byteRange)")
                try expected.verify(fileAt: path, range: byteRange)
            }
            #expect(
                try Checksum.compute(algorithm, fileAt: path, range: nil) == Checksum.compute(algorithm, bytes: bytes))
        }
    }

    @Test func rangesPastTheEndAreASizeMismatch() throws {
        let directory = CryptoFixtures.Directory("short")
        defer { directory.cleanUp() }
        let path = try directory.write(CryptoFixtures.bytes(1000), to: "short.bin")
        for range in [
            ByteRange(offset: 990, length: 11), ByteRange(offset: 0, length: 1001), ByteRange(offset: 1001),
            ByteRange(offset: 5000, length: 1),
        ] {
            let error = #expect(throws: DownloadError.self) {
                try Checksum.compute(.sha256, fileAt: path, range: range)
            }
            #expect(error?.code == .sizeMismatch, "\(range)")
            #expect(error?.message.contains(path) == true)
            #expect(error?.message.contains("1000 bytes") == true)
        }
    }

    @Test func unreadableFilesAreLocalErrorsNamingThePath() throws {
        let directory = CryptoFixtures.Directory("missing")
        defer { directory.cleanUp() }
        let missing = directory.file("nothing-here.bin")
        let error = #expect(throws: DownloadError.self) { try Checksum.compute(.sha1, fileAt: missing) }
        #expect(error?.code == .writeFailed)
        #expect(error?.isLocal == true)
        #expect(error?.systemErrno == ENOENT)
        #expect(error?.message.contains(missing) == true)

        let verifyError = #expect(throws: DownloadError.self) {
            try Checksum.compute(.md5, bytes: [UInt8]()).verify(fileAt: missing)
        }
        #expect(verifyError?.code == .writeFailed)

        let folder = #expect(throws: DownloadError.self) { try Checksum.compute(.sha256, fileAt: directory.path) }
        #expect(folder?.code == .writeFailed)
        #expect(folder?.systemErrno == EISDIR)
    }

    @Test func verifyMismatchSaysWhatAndWhere() throws {
        let directory = CryptoFixtures.Directory("verify")
        defer { directory.cleanUp() }
        let path = try directory.write(Array("abc".utf8), to: "abc.txt")
        let right = try Checksum(.sha256, hex: "BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD")
        try right.verify(fileAt: path)

        let wrong = Checksum.compute(.sha256, bytes: Array("abd".utf8))
        let error = #expect(throws: DownloadError.self) { try wrong.verify(fileAt: path) }
        #expect(error?.code == .checksumMismatch)
        #expect(error?.message == "checksum mismatch: sha256 of \(path) is \(right.hexDigest), expected \(wrong.hexDigest)")
        #expect(error?.isTransient == false)

        let ranged = #expect(throws: DownloadError.self) {
            try right.verify(fileAt: path, range: ByteRange(offset: 1, length: 2))
        }
        let bc = Checksum.compute(.sha256, bytes: Array("bc".utf8))
        #expect(ranged?.message == "checksum mismatch: sha256 of \(path) (bytes 1-2) is \(bc.hexDigest), expected \(right.hexDigest)")

        let md5 = Checksum.compute(.md5, bytes: Array("abc".utf8))
        try md5.verify(fileAt: path)
        let md5Error = #expect(throws: DownloadError.self) {
            try md5.verify(fileAt: path, range: ByteRange(offset: 0, length: 2))
        }
        #expect(md5Error?.message.hasPrefix("checksum mismatch: md5 of \(path)") == true)
    }
}
