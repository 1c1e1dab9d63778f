import Foundation
import Tessera

/// Comparisons whose time does not depend on where two secrets differ.
public enum ConstantTime {
    /// Whether `a` and `b` are equal, looking at every byte of both (the time depends only on
    /// the lengths).
    public static func equal(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        var difference = UInt8(truncatingIfNeeded: x.count ^ y.count)
        if x.count != y.count { difference |= 1 }
        let count = max(x.count, y.count)
        for index in 0..<count {
            let left = index < x.count ? x[index] : 0
            let right = index < y.count ? y[index] : 0
            difference |= left ^ right
        }
        return difference == 0
    }
}

/// The lowercase hex SHA-256 of some bytes (names of the documents the daemon keeps).
enum SHA256Hex {
    static func of(_ data: Data) -> String {
        Checksum.compute(.sha256, bytes: data).hexDigest
    }
}
