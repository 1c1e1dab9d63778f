import Foundation
import Testing
import Tessera

@testable import Tessera
import TesseraTesting

/// SIGKILL in each phase of a download, at the exact moment (`TESSERA_CRASH_AT`, see
/// `CrashPoint`): the process that restarts on the same store and directory finishes the
/// download byte for byte, leaves no partial or temporary file behind, and fetches no finished
/// segment again.
@Suite(.timeLimit(.minutes(3))) struct CrashMatrixTests {
    /// A crash point and how many times it is passed before the crash.
    struct Case: Sendable, CustomTestStringConvertible {
        var point: CrashPoint
        var count: Int = 1
        /// Whether every segment was finished before the crash (then none is fetched again).
        var afterTransfer: Bool
        var testDescription: String { "\(point.rawValue):\(count)" }
    }

    static let cases: [Case] = [
        Case(point: .resolved, afterTransfer: false),
        Case(point: .storeWrite, count: 1, afterTransfer: false),
        Case(point: .segmentDone, count: 6, afterTransfer: false),
        Case(point: .storeWrite, count: 2, afterTransfer: false),
        Case(point: .cacheData, count: 3, afterTransfer: true),
        Case(point: .assembled, afterTransfer: true),
        Case(point: .moved, afterTransfer: true),
    ]

    static let segmentSize: Int64 = 64 << 10
    static let count = 16

    @Test(arguments: cases)
    func aKillInThisPhaseLosesNothing(_ crash: Case) async throws {
        let base = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory()
        let directory = base + "/tessera-crash-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await withLoopbackOrigin { origin in
            let paths = (0..<Self.count).map { "/bytes/\(Self.segmentSize)/crash/\($0).bin" }
            // Slow enough that a few segments are in flight at once, fast enough to take a second.
            for path in paths { origin.inject(.throttle(bytesPerSecond: 2_000_000), at: path) }
            let hashes = paths.map { Checksum.compute(.sha256, bytes: origin.content(at: $0).bytes(0..<Self.segmentSize)).hexDigest }
            let document = #"{"name": "whole.bin", "size": \#(Self.segmentSize), "segments": [\#(paths.map { "\"\($0)\"" }.joined(separator: ","))], "sha256": [\#(hashes.map { "\"\($0)\"" }.joined(separator: ","))]}"#
            origin.serve("/manifests/crash.json", .text(document, contentType: "application/json"))
            let arguments = ["durable", directory + "/state.sqlite", directory + "/downloads", origin.url("/manifests/crash.json").absoluteString]

            let crashing = try startTestHelper(arguments, environment: ["TESSERA_CRASH_AT": "\(crash.point.rawValue):\(crash.count)"])
            #expect(await crashing.exited(within: .seconds(60)), "the crash point was never reached")
            #expect(await crashing.ended() == .signalled(SIGKILL), "the process was not killed at \(crash.testDescription)")
            // Requests the killed process had sent are counted once their connections are gone.
            #expect(await eventually(within: .seconds(10)) { origin.openConnections == 0 })
            let fetchedBefore = paths.map { origin.requestCount(for: $0) }

            let result = try await runTestHelper(arguments, timeout: .seconds(60))
            #expect(result["state"] as? String == "completed", "\(result)")
            let output = directory + "/downloads/whole.bin"
            #expect(fileSize(output) == Self.segmentSize * Int64(Self.count))
            var identical = true
            for (index, path) in paths.enumerated() where identical {
                identical = await origin.content(at: path).verifyFile(
                    atPath: output, size: Self.segmentSize, offset: 0, fileOffset: Self.segmentSize * Int64(index))
            }
            #expect(identical)
            // Nothing partial is left: the output alone, and no file in the work directory.
            let leftovers = (try? FileManager.default.contentsOfDirectory(atPath: directory + "/downloads")) ?? []
            #expect(Set(leftovers) == ["whole.bin", ".tessera"], "\(leftovers)")
            let work = FileManager.default.enumerator(atPath: directory + "/downloads/.tessera")?.compactMap { $0 as? String } ?? []
            let files = work.filter { relative in
                var isDirectory: ObjCBool = false
                return FileManager.default.fileExists(atPath: directory + "/downloads/.tessera/" + relative, isDirectory: &isDirectory) && !isDirectory.boolValue
            }
            #expect(files.isEmpty, "left in the work directory: \(files)")

            let fetched = paths.map { origin.requestCount(for: $0) }
            if crash.afterTransfer {
                #expect(fetched == Array(repeating: 1, count: Self.count), "finished segments were fetched again: \(fetched)")
            } else {
                // What was in flight at the kill, or had finished since the journal's last commit,
                // is fetched once more; nothing twice by the run after the kill.
                for (before, after) in zip(fetchedBefore, fetched) { #expect(after <= before + 1 && after >= 1, "\(fetchedBefore) → \(fetched)") }
            }
        }
    }
}
