import Foundation
import Tessera
import TesseraTesting
import Testing

/// The built `dash-sample` executable.
@Suite(.timeLimit(.minutes(3))) struct DASHSampleTests {
    /// The sample next to the test bundle (`swift build --build-tests` builds it).
    static var sample: URL { ExecutableRun.builtProduct("dash-sample") }

    /// Runs the built sample; records an issue when it has to be killed after `timeout`.
    private func run(_ arguments: [String], timeout: Duration = .seconds(60)) async throws -> (status: Int32?, output: String) {
        let run = try await ExecutableRun.run(Self.sample, arguments, timeout: timeout)
        if run.status == nil { Issue.record("the sample did not finish within \(timeout):\n\(run.output)") }
        return (run.status, run.output)
    }

    @Test func theSampleDownloadsAndVerifiesTheFixture() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.sample.path), "build it with swift build --build-tests")
        let directory = TemporaryDirectory("dash-sample")
        defer { directory.cleanUp() }
        let (status, output) = try await run(["--output", directory.path])
        #expect(status == 0, "\(output)")
        #expect(output.contains("byte-identical"), "\(output)")
        #expect(output.contains("downloading -> completed"), "\(output)")
        // The fixture's bytes depend on its paths only, so a local copy says what the files must hold.
        try await withLoopbackOrigin { origin in
            let fixture = DASHFixture.install(on: origin)
            #expect(filesUnder(directory.path) == fixture.expectedFiles.sorted())
            #expect(await fixture.verify(downloadRoot: directory.path) == [])
        }
    }

    @Test func theSampleExitsOneWhenADownloadFails() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.sample.path))
        let directory = TemporaryDirectory("dash-sample-fail")
        defer { directory.cleanUp() }
        // A missing MPD on a live origin, then a port nothing listens on any more.
        let missing = try await withLoopbackOrigin { origin in
            try await run(["--output", directory.path, origin.url("/nothing/here.mpd").absoluteString])
        }
        #expect(missing.status == 1, "\(missing.output)")
        #expect(missing.output.contains("failed"), "\(missing.output)")
        let closed = try await LoopbackOrigin.start()
        let url = closed.url("/gone.mpd").absoluteString
        try await closed.shutdown()
        let unreachable = try await run(["--output", directory.path, "--network-wait", "0.3", url], timeout: .seconds(20))
        #expect(unreachable.status == 1, "\(unreachable.output)")
        #expect(unreachable.output.contains("gave up after waiting"), "\(unreachable.output)")
    }

    @Test func theSampleExplainsBadArguments() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.sample.path))
        let (status, output) = try await run(["--output"])
        #expect(status == 2)
        #expect(output.contains("--output needs a value"))
        let (unknown, text) = try await run(["--fast"])
        #expect(unknown == 2)
        #expect(text.contains("unknown option --fast"))
    }
}
