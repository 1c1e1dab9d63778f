import Foundation
import Testing
import Tessera
import TesseraTesting

/// `tessera-test-helper`, built next to the test bundle.
func testHelperExecutable() throws -> URL {
    let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        .deletingLastPathComponent().appendingPathComponent("tessera-test-helper")
    guard FileManager.default.isExecutableFile(atPath: executable.path) else {
        throw HelperFailure("tessera-test-helper is not built at \(executable.path); run `swift build --build-tests`")
    }
    return executable
}

/// Starts `tessera-test-helper` and returns at once (its output is dropped); `environment` is
/// added to this process's.
func startTestHelper(_ arguments: [String], environment: [String: String] = [:]) throws -> SpawnedProcess {
    try SpawnedProcess(
        try testHelperExecutable().path, arguments,
        environment: childEnvironment(adding: environment),
        input: .null, output: .null, error: .null)
}

/// Runs `tessera-test-helper` and decodes its JSON line; fails when it has not finished after
/// `timeout` (it is terminated then).
func runTestHelper(_ arguments: [String], timeout: Duration = .seconds(120)) async throws -> [String: Any] {
    let executable = try testHelperExecutable().path
    let captured = try await onThread {
        try SpawnedProcess.capture(executable, arguments, environment: childEnvironment(), timeout: timeout)
    }
    guard let termination = captured.termination else {
        throw HelperFailure("tessera-test-helper \(arguments.joined(separator: " ")) did not finish in \(timeout)")
    }
    guard termination == .exited(0) else {
        let message = String(decoding: captured.errors, as: UTF8.self)
        throw HelperFailure("tessera-test-helper \(arguments.joined(separator: " ")) failed (\(termination)): \(message)")
    }
    let data = Data(captured.output)
    guard let object = try JSONSerialization.jsonObject(with: data) as? [String: Any] else {
        throw HelperFailure("tessera-test-helper printed no JSON object: \(String(decoding: data, as: UTF8.self))")
    }
    return object
}

struct HelperFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
