import Foundation
import Testing
import Tessera
import TesseraTesting

/// The acceptance test of durability: a process downloading a 256 MiB entity of 256 segments
/// is killed with SIGKILL at ten random moments and started again each time on the same store.
@Suite(.timeLimit(.minutes(4))) struct KillTests {
    @Test func tenKillsLoseNothingAndRefetchAlmostNothing() async throws {
        let base = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory()
        let directory = base + "/tessera-kill-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let segmentSize: Int64 = 1 << 20, count = 256
        try await withLoopbackOrigin(threads: 2) { origin in
            let paths = (0..<count).map { "/bytes/\(segmentSize)/kill/\($0).bin" }
            // About 1 MB/s per connection, 16 at a time: the whole download takes some 17 s, so
            // ten runs of under a second each are all cut short.
            for path in paths { origin.inject(.throttle(bytesPerSecond: 1_000_000), at: path) }
            let document = #"{"name": "whole.bin", "size": \#(segmentSize), "segments": [\#(paths.map { "\"\($0)\"" }.joined(separator: ","))]}"#
            origin.serve("/manifests/kill.json", .text(document, contentType: "application/json"))
            let arguments = ["durable", directory + "/state.sqlite", directory + "/downloads", origin.url("/manifests/kill.json").absoluteString]

            let testStart = ContinuousClock.now
            var generator = SystemRandomNumberGenerator()
            var kills = 0
            for _ in 0..<(ProcessInfo.processInfo.environment["KILLS"].flatMap(Int.init) ?? 10) {
                let process = try startTestHelper(arguments)
                let delay = Double.random(in: 0.3...1.2, using: &generator)
                try await Task.sleep(for: .seconds(delay))
                guard process.termination == nil else { break }
                process.send(SIGKILL)
                _ = await process.ended()
                kills += 1
            }
            let finalStart = ContinuousClock.now
            print("KILL phase kills done after \(ContinuousClock.now - testStart), served so far \(origin.totalBytesServed)")
            let result = try await runTestHelper(arguments, timeout: .seconds(150))  // inside the suite's time limit
            print("KILL final run took \(ContinuousClock.now - finalStart)")
            #expect(result["state"] as? String == "completed", "\(result)")
            #expect(kills == 10, "the download outlived only \(kills) kills")

            // The output is the 256 segments, byte for byte.
            let output = directory + "/downloads/whole.bin"
            #expect(fileSize(output) == segmentSize * Int64(count))
            var identical = true
            for (index, path) in paths.enumerated() where identical {
                identical = await origin.content(at: path).verifyFile(atPath: output, size: segmentSize, offset: 0, fileOffset: segmentSize * Int64(index))
            }
            #expect(identical)
            print("KILL verified after \(ContinuousClock.now - testStart)")
            let served = origin.totalBytesServed - origin.bytesServed(for: "/manifests/kill.json")
            let ratio = Double(served) / Double(segmentSize * Int64(count))
            print("KILL kills=\(kills) served=\(served) ratio=\(ratio) maxConnections=\(origin.maxConcurrentConnections) accepted=\(origin.connectionsAccepted)")
            #expect(ratio <= 1.05, "the origin served \(ratio)× the bytes")
        }
    }
}
