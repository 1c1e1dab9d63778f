import Foundation
import Testing
import Tessera
import TesseraTesting

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
        let path = executable.path
        let captured = try await onThread { try SpawnedProcess.capture(path, [target, corpus]) }
        let text = String(decoding: captured.output, as: UTF8.self)
        #expect(captured.termination == .exited(0), "\(target) crashed on its corpus: \(text)")
        #expect(text.contains("\(target): \(inputs.count) inputs"), "\(text)")
    }
}
