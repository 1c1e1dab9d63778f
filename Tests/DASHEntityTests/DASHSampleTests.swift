import Foundation
import Tessera
import TesseraTesting
import Testing

/// The built `dash-sample` executable.
@Suite struct DASHSampleTests {
    /// The sample next to the test bundle (`swift build --build-tests` builds it).
    static var sample: URL {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent("dash-sample")
    }

    /// Runs the sample; kills it after `timeout`.
    private func run(_ arguments: [String], timeout: Duration = .seconds(60)) async throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = Self.sample
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        environment["NO_PROXY"] = "127.0.0.1"
        process.environment = environment
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        let output = Output()
        pipe.fileHandleForReading.readabilityHandler = { handle in output.append(handle.availableData) }
        try process.run()
        let deadline = ContinuousClock.now + timeout
        while process.isRunning, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        if process.isRunning {
            process.terminate()
            Issue.record("the sample did not finish within \(timeout):\n\(output.text)")
        }
        process.waitUntilExit()
        pipe.fileHandleForReading.readabilityHandler = nil
        output.append(pipe.fileHandleForReading.readDataToEndOfFile())
        return (process.terminationStatus, output.text)
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

/// Collects a child process's output from the pipe's handler thread.
private final class Output: @unchecked Sendable {
    private let lock = NSLock()
    private var data = Data()

    func append(_ chunk: Data) {
        lock.lock()
        data.append(chunk)
        lock.unlock()
    }

    var text: String {
        lock.lock()
        defer { lock.unlock() }
        return String(decoding: data, as: UTF8.self)
    }
}
