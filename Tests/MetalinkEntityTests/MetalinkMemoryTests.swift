import Foundation
import Testing
import TesseraTesting

/// A Metalink of 100,000 small files (18.5 MB, as Benchmarks/run.py's `ml` scenarios write it)
/// is read as a stream in far less memory than its tree takes. Measured in processes of their own
/// (`tessera-test-helper metalink`): resident memory is per process, and other tests run in
/// parallel in this one. Serialized, so the two measurements do not share the machine.
@Suite(.serialized, .timeLimit(.minutes(5))) struct MetalinkMemoryTests {
    /// The figures `tessera-test-helper ARGUMENTS` prints.
    func helper(_ arguments: [String], environment: [String: String] = [:]) async throws -> [String: Any] {
        let run = try await ExecutableRun.run(
            ExecutableRun.builtProduct("tessera-test-helper"), arguments, environment: environment, timeout: .seconds(240))
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

    /// A completed file of a Metalink keeps little of its manifest: its compact form (name,
    /// URLs as text, size, checksum), not the resolved outputs, segments and URL objects, and
    /// metadata shared with the other files. What the manager keeps per completed file, with
    /// the SQLite store `tessera get` uses, measured as the heap in use (one malloc arena, so
    /// glibc counts all of it). A debug build kept 6,167 bytes per file with the manifests kept
    /// whole, 5,254 compact (the rest: the task, its entity, its store row's share of SQLite's
    /// cache, the scheduler's, the group's and the claims' entries).
    @Test func aCompletedMetalinkFileKeepsLittleOfItsManifest() async throws {
        let figures = try await helper(["metalink-complete", "5000"], environment: ["MALLOC_ARENA_MAX": "1"])
        #expect(figures["completed"] as? Int == 5_000)
        let perTask = try #require(figures["bytesPerTask"] as? Int64)
        print("MetalinkMemoryTests: a completed Metalink file keeps \(perTask) bytes (\(figures["seconds"] ?? "?") s for 5,000)")
        #expect(perTask < 5_700, "\(perTask) bytes per completed file")
    }
}
