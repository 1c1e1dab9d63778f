import Foundation
import Testing
import Tessera
import TesseraTesting

/// Every LoopbackOrigin test. Serialized: several tests measure time (stall, throttle) or
/// stream tens of MiB, and on two cores parallel tests would skew those measurements.
@Suite("LoopbackOrigin", .serialized, .timeLimit(.minutes(2)))
enum OriginTests {}

extension LoopbackOrigin {
    /// One GET on a fresh connection, closed afterwards.
    func rawRequest(_ target: String, headers: [(String, String)] = []) throws -> RawHTTPResponse {
        try rawRequest("GET", target, headers: headers)
    }

    /// One request on a fresh connection, closed afterwards.
    func rawRequest(_ method: String, _ target: String, headers: [(String, String)] = []) throws -> RawHTTPResponse {
        let connection = try RawHTTPConnection(port: port)
        defer { connection.close() }
        return try connection.request(method, target, headers: headers)
    }

    /// A fresh connection to this origin.
    func connect(timeout: Duration = .seconds(10)) throws -> RawHTTPConnection {
        try RawHTTPConnection(port: port, timeout: timeout)
    }
}

/// Seconds in a duration, as a Double (for messages and windows).
func seconds(_ duration: Duration) -> Double {
    let (whole, attoseconds) = duration.components
    return Double(whole) + Double(attoseconds) / 1e18
}

/// A fresh directory for test files, removed by `cleanUp()`.
struct TemporaryDirectory {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("tessera-origin-tests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    /// Writes `bytes` to a file named `name` and returns its path.
    func write(_ name: String, _ bytes: [UInt8]) throws -> String {
        let file = url.appendingPathComponent(name)
        try Data(bytes).write(to: file)
        return file.path
    }

    func cleanUp() { try? FileManager.default.removeItem(at: url) }
}

/// A value shared with escaping closures and tasks.
extension Locked {
    var value: Value {
        get { withLock { $0 } }
        nonmutating set { withLock { $0 = newValue } }
    }
}
