import Foundation
import Tessera
import TesseraTesting

func fileBytes(_ path: String) -> [UInt8] {
    fileContents(path) ?? []
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
