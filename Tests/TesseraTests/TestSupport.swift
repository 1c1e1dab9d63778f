import Foundation
import Tessera
import TesseraTesting

/// A fresh directory under the system's temporary directory, removed by `cleanUp()`.
struct TemporaryDirectory: Sendable {
    let path: String

    init(_ name: String = "tessera-test") {
        let base = ProcessInfo.processInfo.environment["TESSERA_TEST_TMPDIR"] ?? NSTemporaryDirectory()
        path = (base as NSString).appendingPathComponent("\(name)-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    func file(_ name: String) -> String { (path as NSString).appendingPathComponent(name) }

    func cleanUp() { try? FileManager.default.removeItem(atPath: path) }
}

extension CurlEngine.Configuration {
    /// Loopback only: no proxy from the environment, short timeouts.
    static func forTests() -> CurlEngine.Configuration {
        var configuration = CurlEngine.Configuration()
        configuration.proxy = .none
        configuration.connectTimeout = .seconds(5)
        configuration.lowSpeedTime = .seconds(10)
        return configuration
    }
}

func fileSize(_ path: String) -> Int64? {
    (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.int64Value
}

func fileBytes(_ path: String) -> [UInt8] {
    (FileManager.default.contents(atPath: path)).map { [UInt8]($0) } ?? []
}

/// Resident memory of this process, in bytes (VmRSS).
func residentMemory() -> Int64 {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
        let digits = line.split(separator: " ").dropFirst().first.flatMap { Int64($0) } ?? 0
        return digits * 1024
    }
    return 0
}
