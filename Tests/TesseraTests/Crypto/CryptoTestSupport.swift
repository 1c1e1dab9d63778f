import Foundation
import TesseraTesting

@testable import Tessera

/// Helpers for the checksum and AES tests: deterministic test bytes, scratch files and the
/// command-line tools used as independent oracles (coreutils' `*sum`, `openssl enc`).
enum CryptoFixtures {
    /// `count` pseudo-random bytes, the same for the same `seed` (xorshift64*; test data only).
    static func bytes(_ count: Int, seed: UInt64 = 0x9E37_79B9_7F4A_7C15) -> [UInt8] {
        var state = seed | 1
        var result = [UInt8](repeating: 0, count: count)
        result.withUnsafeMutableBytes { buffer in
            var index = 0
            while index < count {
                state ^= state >> 12
                state ^= state << 25
                state ^= state >> 27
                var word = state &* 0x2545_F491_4F6C_DD1D
                for _ in 0..<8 where index < count {
                    buffer[index] = UInt8(truncatingIfNeeded: word)
                    word >>= 8
                    index += 1
                }
            }
        }
        return result
    }

    /// A fresh directory for scratch files: under `/dev/shm` when it exists (memory, fast),
    /// else the temporary directory. Remove it with `cleanUp()`.
    struct Directory: Sendable {
        let path: String

        init(_ name: String) {
            let base = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory()
            path = (base as NSString).appendingPathComponent("tessera-crypto-\(name)-\(UUID().uuidString)")
            try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        }

        func file(_ name: String) -> String { (path as NSString).appendingPathComponent(name) }

        @discardableResult
        func write(_ bytes: [UInt8], to name: String) throws -> String {
            let target = file(name)
            try Data(bytes).write(to: URL(fileURLWithPath: target))
            return target
        }

        func cleanUp() { try? FileManager.default.removeItem(atPath: path) }
    }

    struct ToolFailure: Error, CustomStringConvertible {
        var description: String
    }

    /// Runs `tool` with `arguments`; returns its standard output, throws when it fails.
    static func run(_ tool: String, _ arguments: [String]) throws -> String {
        let captured = try SpawnedProcess.capture(tool, arguments)
        let text = String(decoding: captured.output, as: UTF8.self)
        guard captured.termination == .exited(0) else {
            let message = String(decoding: captured.errors, as: UTF8.self)
            throw ToolFailure(description: "\(tool) \(arguments.joined(separator: " ")) failed: \(message)")
        }
        return text
    }

    /// The coreutils program for `algorithm`, e.g. `/usr/bin/sha256sum`.
    static func sumTool(_ algorithm: Checksum.Algorithm) -> String {
        let name = algorithm == .md5 ? "md5sum" : "\(algorithm.rawValue)sum"
        return "/usr/bin/\(name)"
    }

    /// The hex digest of the file at `path` as coreutils computes it.
    static func sum(_ algorithm: Checksum.Algorithm, of path: String) throws -> String {
        let line = try run(sumTool(algorithm), ["--binary", path])
        return String(line.prefix { $0 != " " })
    }

    static let opensslPath = "/usr/bin/openssl"
    static var hasOpenSSL: Bool { FileManager.default.isExecutableFile(atPath: opensslPath) }
    static var hasSumTools: Bool {
        Checksum.Algorithm.allCases.allSatisfy { FileManager.default.isExecutableFile(atPath: sumTool($0)) }
    }

    /// `openssl enc -aes-128-cbc` (PKCS#7 padding) from one file to another.
    static func openssl(decrypt: Bool, key: [UInt8], iv: [UInt8], from input: String, to output: String) throws {
        var arguments = [
            "enc", "-aes-128-cbc", "-K", Checksum.hex(key), "-iv", Checksum.hex(iv), "-in", input, "-out", output,
        ]
        if decrypt { arguments.insert("-d", at: 1) }
        _ = try run(opensslPath, arguments)
    }

    /// The contents of the file at `path`, empty when it cannot be read.
    static func fileBytes(_ path: String) -> [UInt8] {
        fileContents(path) ?? []
    }

    /// Resident memory of this process in bytes (VmRSS of /proc/self/status).
    static func residentMemory() -> Int64 {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return (line.split(separator: " ").dropFirst().first.flatMap { Int64($0) } ?? 0) * 1024
        }
        return 0
    }
}
