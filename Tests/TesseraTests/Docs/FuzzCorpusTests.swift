import Foundation
import Testing

/// The fuzzing corpus (`Tests/Fuzz/Corpus`: the seeds and every input a fuzzer found that once
/// crashed or hung), replayed through each harness by the `tessera-fuzz` replay build: none may
/// crash. `make fuzz` runs the same harnesses under libFuzzer.
@Suite(.timeLimit(.minutes(2))) struct FuzzCorpusTests {
    static let targets = ["mpd", "m3u8", "metalink", "playurl", "json", "naming", "names"]
    /// Tests/Fuzz/Corpus, from this file's place.
    static let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fuzz/Corpus").path

    @Test(arguments: targets) func theCorpusReplaysWithoutACrash(_ target: String) async throws {
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent("tessera-fuzz")
        try #require(FileManager.default.isExecutableFile(atPath: executable.path), "tessera-fuzz is not built; run `swift build --build-tests`")
        let corpus = Self.corpus + "/" + target
        let inputs = (try? FileManager.default.contentsOfDirectory(atPath: corpus)) ?? []
        #expect(!inputs.isEmpty, "no seeds for \(target)")
        let process = Process()
        process.executableURL = executable
        process.arguments = [target, corpus]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let text = await withCheckedContinuation { continuation in
            Thread {
                let data = output.fileHandleForReading.readDataToEndOfFile()
                process.waitUntilExit()
                continuation.resume(returning: String(decoding: data, as: UTF8.self))
            }.start()
        }
        #expect(process.terminationReason == .exit && process.terminationStatus == 0, "\(target) crashed on its corpus: \(text)")
        #expect(text.contains("\(target): \(inputs.count) inputs"), "\(text)")
    }
}
