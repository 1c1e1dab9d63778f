import Foundation
import Testing
import TesseraTesting

/// A Metalink of 100,000 small files (18.5 MB, as Benchmarks/run.py's `ml` scenarios write it)
/// is read as a stream in far less memory than its tree takes. Measured in processes of their own
/// (`tessera-test-helper metalink`): resident memory is per process, and other tests run in
/// parallel in this one. Serialized, so the two measurements do not share the machine.
@Suite(.serialized, .timeLimit(.minutes(5))) struct MetalinkMemoryTests {
    /// The figures `tessera-test-helper ARGUMENTS` prints.
    func helper(_ arguments: [String]) async throws -> [String: Any] {
        let run = try await ExecutableRun.run(ExecutableRun.builtProduct("tessera-test-helper"), arguments, timeout: .seconds(240))
        #expect(run.status == 0, "\(run.output)")
        let line = run.output.split(separator: "\n").last.map(String.init) ?? ""
        return try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(run.output)")
    }

    @Test func aMetalinkOf100000FilesIsReadAndExpandedFarBelowTheTreesFootprint() async throws {
        let stream = try await helper(["metalink", "100000", "stream"])
        let tree = try await helper(["metalink", "100000", "tree"])
        for figures in [stream, tree] {
            #expect(figures["files"] as? Int == 100_000)
            #expect(figures["lastName"] as? String == "f99999.bin")
            #expect(figures["lastMirror"] as? String == "http://127.0.0.1:9/ml/f/f99999.bin")
        }
        let streamGrowth = try #require(stream["growth"] as? Int64)
        let treeGrowth = try #require(tree["growth"] as? Int64)
        let document = try #require(stream["documentBytes"] as? Int64)
        print(
            "MetalinkMemoryTests: 100,000 files (\(document >> 20) MiB): VmRSS growth \(streamGrowth >> 20) MiB as a stream "
                + "(\(stream["seconds"] ?? "?") s), \(treeGrowth >> 20) MiB as a tree (\(tree["seconds"] ?? "?") s)")
        // The stream reader's copy of the document, and little else; the tree is several times
        // the document.
        #expect(streamGrowth < document + (16 << 20), "grew by \(streamGrowth >> 20) MiB")
        #expect(streamGrowth * 5 < treeGrowth, "stream \(streamGrowth >> 20) MiB, tree \(treeGrowth >> 20) MiB")

        // The expansion (fetched from a loopback origin, one entity per file, each keeping its
        // file) builds no tree: it grows by less than the tree alone takes, plus its own (the
        // entities and their files, the fetched document; with the tree it grew by 328 MiB in a
        // debug build, 172 MiB without).
        let expansion = try await helper(["metalink-expand", "100000"])
        #expect(expansion["entities"] as? Int == 100_000)
        let expansionGrowth = try #require(expansion["growth"] as? Int64)
        print("MetalinkMemoryTests: the expansion of 100,000 files grew by \(expansionGrowth >> 20) MiB (\(expansion["seconds"] ?? "?") s)")
        #expect(expansionGrowth < treeGrowth + (64 << 20), "expansion \(expansionGrowth >> 20) MiB, tree \(treeGrowth >> 20) MiB")
    }
}
