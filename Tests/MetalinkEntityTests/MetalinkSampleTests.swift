import Foundation
import Testing
import TesseraTesting

/// Runs the built `metalink-sample` (built by `swift build --build-tests`) against its loopback fixture.
@Suite(.timeLimit(.minutes(3))) struct MetalinkSampleTests {
    static var sample: URL { ExecutableRun.builtProduct("metalink-sample") }

    /// Runs the built sample; records an issue when it has to be killed after `timeout`.
    func run(_ arguments: [String], timeout: Duration = .seconds(120)) async throws -> (status: Int32?, output: String) {
        let run = try await ExecutableRun.run(Self.sample, arguments, timeout: timeout)
        if run.status == nil { Issue.record("the sample did not finish within \(timeout):\n\(run.output)") }
        return (run.status, run.output)
    }

    @Test func theSampleDownloadsTheFixtureIntoOutput() async throws {
        #expect(FileManager.default.isExecutableFile(atPath: Self.sample.path), "build with `swift build --build-tests` first")
        let output = TemporaryDirectory("metalink-sample-output")
        defer { output.cleanUp() }
        let (status, text) = try await run(["--output", output.path])
        #expect(status == 0, "\(text)")
        #expect(text.contains("verified"))
        for name in ["metalink-release.tar", "metalink-extras/archive.bin", "metalink-notes.txt"] {
            #expect(FileManager.default.fileExists(atPath: output.file(name)), "\(name)")
        }
        #expect(fileSize(output.file("metalink-extras/archive.bin")) == 600_000)
    }

    @Test func theSampleRunsWithoutArguments() async throws {
        let (status, text) = try await run([])
        #expect(status == 0, "\(text)")
        #expect(text.contains("completed"))
    }
}
