import Foundation
import Testing

/// Runs the built `metalink-sample` (built by `swift build --build-tests`) against its loopback fixture.
@Suite struct MetalinkSampleTests {
    static var sample: URL {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent("metalink-sample")
    }

    /// Runs the sample with `arguments`, killing it after `timeout`; its exit status and output.
    func run(_ arguments: [String], timeout: Duration = .seconds(120)) async throws -> (status: Int32?, output: String) {
        let directory = TemporaryDirectory("metalink-sample-log")
        defer { directory.cleanUp() }
        let log = directory.file("output.txt")
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        defer { try? handle.close() }
        let process = Process()
        process.executableURL = Self.sample
        process.arguments = arguments
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        let deadline = ContinuousClock.now + timeout
        while process.isRunning, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        if process.isRunning {
            process.terminate()
            try await Task.sleep(for: .milliseconds(200))
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            return (nil, (try? String(contentsOfFile: log, encoding: .utf8)) ?? "")
        }
        return (process.terminationStatus, (try? String(contentsOfFile: log, encoding: .utf8)) ?? "")
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

    private func fileSize(_ path: String) -> Int64? {
        (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.int64Value
    }
}
