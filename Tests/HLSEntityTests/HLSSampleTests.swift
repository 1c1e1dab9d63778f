import Foundation
import Tessera
import TesseraTesting
import Testing

@Suite(.timeLimit(.minutes(3))) struct HLSSampleTests {
    /// The sample next to the test bundle (`swift build --build-tests` builds it).
    static var sample: URL { ExecutableRun.builtProduct("hls-sample") }

    /// Runs the built sample; records an issue when it has to be killed after `timeout`.
    private func run(_ arguments: [String], timeout: Duration = .seconds(90)) async throws -> (status: Int32?, output: String) {
        let run = try await ExecutableRun.run(Self.sample, arguments, timeout: timeout)
        if run.status == nil { Issue.record("the sample did not finish within \(timeout):\n\(run.output)") }
        return (run.status, run.output)
    }

    @Test func theSampleDownloadsAndVerifiesTheFixture() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.sample.path), "build it with swift build --build-tests")
        let directory = TemporaryDirectory("hls-sample")
        defer { directory.cleanUp() }
        let (status, output) = try await run(["--output", directory.path])
        #expect(status == 0, "\(output)")
        #expect(output.contains("byte-identical"), "\(output)")
        #expect(output.contains("downloading -> completed"), "\(output)")
        // The fixture's bytes depend on its paths only, so a local copy says what the files must hold.
        try await withLoopbackOrigin { origin in
            let fixture = HLSFixture.install(on: origin)
            #expect(filesUnder(directory.path) == fixture.expectedFiles)
            #expect(await fixture.verify(downloadRoot: directory.path) == [])
        }
    }

    @Test func theSampleExplainsBadArguments() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.sample.path))
        let (status, output) = try await run(["--output"])
        #expect(status == 2)
        #expect(output.contains("--output needs a value"))
    }
}
