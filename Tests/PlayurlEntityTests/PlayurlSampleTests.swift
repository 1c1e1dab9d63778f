import Foundation
import Tessera
import TesseraTesting
import Testing

/// The built `playurl-sample` executable, run as a user would.
@Suite struct PlayurlSampleTests {
    static var binary: URL {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent("playurl-sample")
    }

    /// Runs the sample with `arguments`, its output in a file; kills it after `timeout`.
    static func run(_ arguments: [String], timeout: Duration = .seconds(120)) async throws -> (status: Int32?, output: String) {
        let scratch = ScratchDirectory("playurl-sample-log")
        defer { scratch.cleanUp() }
        let log = scratch.file("output.txt")
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        defer { try? handle.close() }
        let process = Process()
        process.executableURL = binary
        process.arguments = arguments
        process.standardOutput = handle
        process.standardError = handle
        var environment = ProcessInfo.processInfo.environment
        for name in ["http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"] { environment[name] = nil }
        process.environment = environment
        try process.run()
        let deadline = ContinuousClock.now + timeout
        while process.isRunning, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        var status: Int32?
        if process.isRunning {
            process.terminate()
            try await Task.sleep(for: .milliseconds(500))
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        } else {
            status = process.terminationStatus
        }
        let output = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        return (status, output)
    }

    @Test(.timeLimit(.minutes(3))) func theSampleDownloadsAndVerifiesTheFixture() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary.path), "build it: swift build --build-tests")
        let output = ScratchDirectory("playurl-sample-out")
        defer { output.cleanUp() }
        let (status, text) = try await Self.run(["--output", output.path])
        #expect(status == 0, "\(text)")
        #expect(text.contains("verified byte for byte"), "\(text)")
        // The files the fixture names (its names do not depend on the origin's port).
        let expected = try await withLoopbackOrigin { origin in PlayurlFixture.install(on: origin).expectedFiles }
        #expect(expected.count == 7)
        for name in expected {
            #expect(FileManager.default.fileExists(atPath: output.file(name)), "\(name) is missing")
        }
    }

    @Test(.timeLimit(.minutes(1))) func theSampleRefusesABadInputWithExitCodeOne() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary.path))
        let output = ScratchDirectory("playurl-sample-bad")
        defer { output.cleanUp() }
        let (status, text) = try await Self.run(["--output", output.path, "--api", "http://127.0.0.1:1/{cid}", "not-a-cid"])
        #expect(status == 1, "\(text)")
        #expect(text.contains("not a decimal number"), "\(text)")
    }
}
