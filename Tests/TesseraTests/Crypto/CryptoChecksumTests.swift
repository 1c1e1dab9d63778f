import Foundation
import Testing

@testable import Tessera

/// The ``Checksum`` value: hex validation, algorithm names, ordering, `strongest`, coding.
@Suite struct CryptoChecksumTests {
    static let emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

    @Test func digestLengths() {
        let lengths = Checksum.Algorithm.allCases.map(\.digestLength)
        #expect(lengths == [16, 20, 32, 48, 64])
        #expect(Checksum.Algorithm.allCases == [.md5, .sha1, .sha256, .sha384, .sha512])
    }

    @Test func algorithmsOrderByStrength() {
        #expect(Checksum.Algorithm.md5 < .sha1)
        #expect(Checksum.Algorithm.sha1 < .sha256)
        #expect(Checksum.Algorithm.sha256 < .sha384)
        #expect(Checksum.Algorithm.sha384 < .sha512)
        #expect(!(Checksum.Algorithm.sha512 < .sha512))
        #expect([Checksum.Algorithm.sha512, .md5, .sha256, .sha1, .sha384].sorted() == Checksum.Algorithm.allCases)
        #expect(Checksum.Algorithm.allCases.max() == .sha512)
    }

    @Test(arguments: [
        ("md5", Checksum.Algorithm.md5), ("MD5", .md5),
        ("sha1", .sha1), ("sha-1", .sha1), ("SHA-1", .sha1), ("Sha1", .sha1),
        ("sha256", .sha256), ("sha-256", .sha256), ("SHA-256", .sha256), ("SHA256", .sha256),
        ("sha384", .sha384), ("sha-384", .sha384), ("SHA-384", .sha384),
        ("sha512", .sha512), ("sha-512", .sha512), ("Sha-512", .sha512),
        (" sha-256\n", .sha256),
    ])
    func parsesManifestNames(_ name: String, _ expected: Checksum.Algorithm) {
        #expect(Checksum.Algorithm(name: name) == expected)
    }

    @Test(arguments: [
        "", "sha", "sha-2", "sha-224", "sha224", "sha3-256", "sha-512/256", "crc32", "adler32", "md4",
        "sha 256", "sha_256", "sha--256", "sha-256x", "ｓha256", "sha２５６", "sha\u{0}256",
    ])
    func rejectsOtherNames(_ name: String) {
        #expect(Checksum.Algorithm(name: name) == nil)
    }

    @Test func textualNamesParseBack() {
        for algorithm in Checksum.Algorithm.allCases {
            #expect(Checksum.Algorithm(name: algorithm.textualName) == algorithm)
            #expect(Checksum.Algorithm(name: algorithm.rawValue) == algorithm)
        }
        #expect(Checksum.Algorithm.sha256.textualName == "sha-256")
    }

    @Test func hexIsStoredLowercase() throws {
        let upper = try Checksum(.sha256, hex: Self.emptySHA256.uppercased())
        let mixed = try Checksum(.sha256, hex: "E3b0C44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852B855")
        let lower = try Checksum(.sha256, hex: Self.emptySHA256)
        #expect(upper.hexDigest == Self.emptySHA256)
        #expect(upper == lower)
        #expect(mixed == lower)
        #expect(upper.hashValue == lower.hashValue)
        #expect(lower.algorithm == .sha256)
    }

    @Test func wrongLengthIsInvalid() {
        for hex in [
            "", String(Self.emptySHA256.dropLast()), Self.emptySHA256 + "0", Self.emptySHA256 + Self.emptySHA256,
        ] {
            let error = #expect(throws: DownloadError.self) { try Checksum(.sha256, hex: hex) }
            #expect(error?.code == .manifestInvalid)
            #expect(error?.message.contains("sha256") == true)
            #expect(error?.message.contains("64 hex digits") == true)
        }
        // A valid SHA-1 is not a valid SHA-256, and the other way round.
        #expect(throws: DownloadError.self) { try Checksum(.sha256, hex: "da39a3ee5e6b4b0d3255bfef95601890afd80709") }
        #expect(throws: DownloadError.self) { try Checksum(.sha1, hex: Self.emptySHA256) }
        #expect((try? Checksum(.sha1, hex: "da39a3ee5e6b4b0d3255bfef95601890afd80709")) != nil)
    }

    @Test func nonHexIsInvalid() {
        let valid = Self.emptySHA256
        let tail = String(valid.dropFirst())
        let head = String(valid.dropLast())
        let bad: [String] = [
            "g" + tail,  // a letter past f
            " " + tail,  // white space is not trimmed
            head + "\n",
            "0x" + String(valid.dropFirst(2)),  // no prefix
            "ａ" + tail,  // fullwidth a, which Character.isHexDigit accepts
            "٣" + tail,  // an Arabic-Indic digit
            head + "\u{0}",
            "-" + tail,
        ]
        for hex in bad {
            let error = #expect(throws: DownloadError.self) { try Checksum(.sha256, hex: hex) }
            #expect(error?.code == .manifestInvalid, "\(hex.debugDescription)")
        }
    }

    @Test func longGarbageIsCutInTheMessage() {
        let garbage = String(repeating: "z", count: 10_000)
        let error = #expect(throws: DownloadError.self) { try Checksum(.md5, hex: garbage) }
        #expect(error?.code == .manifestInvalid)
        #expect((error?.message.count ?? .max) < 200)
    }

    @Test func rawDigestRoundTrips() throws {
        for algorithm in Checksum.Algorithm.allCases {
            let bytes = CryptoFixtures.bytes(algorithm.digestLength, seed: UInt64(algorithm.digestLength))
            let checksum = Checksum(algorithm, digest: bytes)
            #expect(checksum.hexDigest.count == 2 * algorithm.digestLength)
            #expect(checksum.digest == bytes)
            #expect(try Checksum(algorithm, hex: checksum.hexDigest) == checksum)
        }
        #expect(
            Checksum(.md5, digest: [0x00, 0x01, 0x0A, 0xFF] + [UInt8](repeating: 0xAB, count: 12)).hexDigest
                == "00010aff" + String(repeating: "ab", count: 12))
    }

    @Test func descriptionIsAlgorithmColonHex() throws {
        let checksum = try Checksum(.sha256, hex: Self.emptySHA256.uppercased())
        #expect(checksum.description == "sha256:\(Self.emptySHA256)")
        #expect(
            "\(Checksum(.sha1, digest: [UInt8](repeating: 0, count: 20)))" == "sha1:"
                + String(repeating: "0", count: 40))
    }

    @Test func strongestPicksTheBestAlgorithm() {
        let md5 = Checksum(.md5, digest: [UInt8](repeating: 1, count: 16))
        let sha1 = Checksum(.sha1, digest: [UInt8](repeating: 2, count: 20))
        let sha256 = Checksum(.sha256, digest: [UInt8](repeating: 3, count: 32))
        let otherSHA256 = Checksum(.sha256, digest: [UInt8](repeating: 4, count: 32))
        let sha384 = Checksum(.sha384, digest: [UInt8](repeating: 5, count: 48))
        let sha512 = Checksum(.sha512, digest: [UInt8](repeating: 6, count: 64))
        #expect(Checksum.strongest([]) == nil)
        #expect(Checksum.strongest([md5]) == md5)
        #expect(Checksum.strongest([md5, sha256, sha1]) == sha256)
        #expect(Checksum.strongest([sha512, md5, sha384]) == sha512)
        #expect(Checksum.strongest([sha1, sha384, sha256]) == sha384)
        // On a tie, the first listed wins.
        #expect(Checksum.strongest([md5, sha256, otherSHA256]) == sha256)
        #expect(Checksum.strongest([otherSHA256, sha256]) == otherSHA256)
    }

    @Test func codableRoundTripAndValidation() throws {
        let checksum = try Checksum(.sha512, hex: String(repeating: "Ab", count: 64))
        let data = try JSONEncoder().encode(checksum)
        let json = String(decoding: data, as: UTF8.self)
        #expect(json.contains("\"sha512\""))
        #expect(json.contains(String(repeating: "ab", count: 64)))
        #expect(try JSONDecoder().decode(Checksum.self, from: data) == checksum)

        let upper = #"{"algorithm":"md5","hexDigest":"D41D8CD98F00B204E9800998ECF8427E"}"#
        #expect(
            try JSONDecoder().decode(Checksum.self, from: Data(upper.utf8)).hexDigest
                == "d41d8cd98f00b204e9800998ecf8427e")
        for invalid in [
            #"{"algorithm":"md5","hexDigest":"d41d8cd98f00b204e9800998ecf8427"}"#,
            #"{"algorithm":"md5","hexDigest":"x41d8cd98f00b204e9800998ecf8427e"}"#,
            #"{"algorithm":"crc32","hexDigest":"d41d8cd9"}"#,
            #"{"algorithm":"md5"}"#,
        ] {
            #expect(throws: DecodingError.self) { try JSONDecoder().decode(Checksum.self, from: Data(invalid.utf8)) }
        }
    }
}
