import Foundation
import Tessera
import TesseraTesting
import Testing

/// The built `playurl-sample` executable, run as a user would.
@Suite struct PlayurlSampleTests {
    static var binary: URL { ExecutableRun.builtProduct("playurl-sample") }

    /// Runs the built sample; records an issue when it has to be killed after `timeout`.
    static func run(_ arguments: [String], timeout: Duration = .seconds(120)) async throws -> (status: Int32?, output: String) {
        let run = try await ExecutableRun.run(Self.binary, arguments, timeout: timeout)
        if run.status == nil { Issue.record("the sample did not finish within \(timeout):\n\(run.output)") }
        return (run.status, run.output)
    }

    @Test(.timeLimit(.minutes(3))) func theSampleDownloadsAndVerifiesTheFixture() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary.path), "build it: swift build --build-tests")
        let output = TemporaryDirectory("playurl-sample-out")
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
        let output = TemporaryDirectory("playurl-sample-bad")
        defer { output.cleanUp() }
        let (status, text) = try await Self.run(["--output", output.path, "--api", "http://127.0.0.1:1/{cid}", "not-a-cid"])
        #expect(status == 1, "\(text)")
        #expect(text.contains("not a decimal number"), "\(text)")
    }
}
