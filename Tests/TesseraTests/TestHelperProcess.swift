import Foundation
import Testing
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
func startTestHelper(_ arguments: [String], environment: [String: String] = [:]) throws -> Process {
    let process = Process()
    process.executableURL = try testHelperExecutable()
    process.arguments = arguments
    if !environment.isEmpty { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    try process.run()
    return process
}

/// Runs `tessera-test-helper` and decodes its JSON line; fails when it has not finished after
/// `timeout` (it is terminated then).
func runTestHelper(_ arguments: [String], timeout: Duration = .seconds(120)) async throws -> [String: Any] {
    let process = Process()
    process.executableURL = try testHelperExecutable()
    process.arguments = arguments
    let output = Pipe(), errors = Pipe()
    process.standardOutput = output
    process.standardError = errors
    try process.run()
    // Ends the process once it outlives `timeout` (which ends the read below); whether it did.
    let watchdog = Task { () -> Bool in
        guard await !process.exited(within: timeout), !Task.isCancelled else { return false }
        process.terminate()
        return true
    }
    let data = await withCheckedContinuation { continuation in
        Thread {
            let data = output.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            continuation.resume(returning: data)
        }.start()
    }
    watchdog.cancel()
    if await watchdog.value {
        throw HelperFailure("tessera-test-helper \(arguments.joined(separator: " ")) did not finish in \(timeout)")
    }
    guard process.terminationStatus == 0 else {
        let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        throw HelperFailure("tessera-test-helper \(arguments.joined(separator: " ")) failed: \(message)")
    }
    guard let object = try JSONSerialization.jsonObject(with: data) as? [String: Any] else {
        throw HelperFailure("tessera-test-helper printed no JSON object: \(String(decoding: data, as: UTF8.self))")
    }
    return object
}

struct HelperFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
