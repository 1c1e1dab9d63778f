import Foundation
import Testing
@testable import Tessera
import TesseraTesting

/// Speed, total and ETA as the manager reports them (the CLI's board, the daemon's
/// `tellStatus` and dashboard all show these values).
@Suite(.timeLimit(.minutes(2))) struct ManagerProgressTests {
    /// A file of known size at a steady speed, paused and resumed (the dashboard's own
    /// scenario): the resumed run still reports its total, a speed without a spike from the
    /// bytes found on disk, and an ETA, soon after it starts again.
    @Test func aResumedDownloadOfKnownSizeHasATotalASpeedAndAnETA() async throws {
        try await withManager(configure: {
            $0.progressInterval = .milliseconds(100)
            $0.splitting.maxConnections = 1  // one connection: the origin's rate is the download's
        }) { harness in
            let size: Int64 = 40_000_000
            let path = "/bytes/\(size)/steady.bin"
            harness.origin.inject(.throttle(bytesPerSecond: 1_000_000), at: path)
            let entity = DirectEntity(url: harness.origin.url(path))
            try await harness.manager.start(entity)
            let first = await harness.manager.waitFor(entity.taskID, timeout: .seconds(20)) { $0.bytesDone >= 500_000 && $0.eta != nil }
            #expect(first?.bytesTotal == size)
            _ = await harness.manager.stop(entity.taskID)
            #expect(await harness.waitForState(entity.taskID, .paused)?.state == .paused)
            try await harness.manager.resume(entity.taskID)
            var peak = 0.0
            let reported = await eventually(within: .seconds(30)) {
                guard let info = await harness.manager.check(entity.taskID) else { return false }
                peak = max(peak, info.bytesPerSecond)
                return info.state == .downloading && info.bytesTotal == size && info.eta != nil && info.bytesPerSecond > 0
            }
            let now = await harness.manager.check(entity.taskID)
            #expect(reported, "\(String(describing: now))")
            // The bytes found on disk at the resume are not bytes that arrived: no speed far above
            // what the origin sends, while the next 1.5 MB arrive.
            let resumedBytes = await harness.manager.check(entity.taskID)?.bytesDone ?? 0
            #expect(await eventually(within: .seconds(20)) {
                guard let info = await harness.manager.check(entity.taskID) else { return false }
                peak = max(peak, info.bytesPerSecond)
                return info.bytesDone >= resumedBytes + 1_500_000
            })
            let info = try #require(await harness.manager.check(entity.taskID))
            #expect(peak < 5_000_000, "peak \(peak) B/s at 1 MB/s")
            let eta = try #require(info.eta)
            // The rest at the reported speed.
            let expected = Double(size - info.bytesDone) / info.bytesPerSecond
            #expect(abs(Double(eta.components.seconds) - expected) <= 1, "eta \(eta), expected about \(expected) s")
            _ = await harness.manager.stop(entity.taskID)
        }
    }

    /// A large file split over several connections, paused half-way and resumed: the bytes it
    /// kept count as done from the moment it resumes (they counted nothing once, and the file
    /// ended "completed" with 37.9 MB of 40 counted).
    @Test func aResumedSplitFileCountsTheBytesItKept() async throws {
        try await withManager(configure: {
            $0.progressInterval = .milliseconds(100)
            $0.splitting = SplitPolicy(minimumSize: 4_000_000, pieceSize: 1_000_000, maxConnections: 4)
        }) { harness in
            let size: Int64 = 16_000_000
            let path = "/bytes/\(size)/split-resumed.bin"
            harness.origin.inject(.throttle(bytesPerSecond: 1_000_000), at: path)
            let entity = DirectEntity(url: harness.origin.url(path))
            try await harness.manager.start(entity)
            // Split: more connections join once the first response shows the size (awaited: on
            // a loaded machine they may join after the first 3 MB).
            #expect(await eventually(within: .seconds(20)) { Set(harness.origin.requests(for: path).map(\.connection)).count > 1 }, "split")
            _ = await harness.manager.waitFor(entity.taskID, timeout: .seconds(30)) { $0.bytesDone >= 3_000_000 }
            _ = await harness.manager.stop(entity.taskID)
            let paused = try #require(await harness.waitForState(entity.taskID, .paused))
            #expect(paused.bytesDone >= 3_000_000)
            try await harness.manager.resume(entity.taskID)
            // From the resume to the end, the count never goes below what was kept (it did: the
            // run started counting from zero once it had looked at its journal).
            var lowest = Int64.max
            let finished = await eventually(within: .seconds(60)) {
                guard let info = await harness.manager.check(entity.taskID) else { return false }
                if info.state == .completed { return true }
                if info.state == .downloading || info.state == .resolving { lowest = min(lowest, info.bytesDone) }
                return false
            }
            #expect(finished)
            #expect(lowest >= paused.bytesDone, "lowest \(lowest) after the resume, paused at \(paused.bytesDone)")
            let done = try #require(await harness.manager.check(entity.taskID))
            #expect(done.bytesDone == size)
            #expect(await harness.origin.content(at: path).verifyFile(atPath: harness.root.file("split-resumed.bin"), size: size))
            // Nothing was asked for twice but what was in flight at the pause.
            #expect(harness.origin.bytesServed(for: path) <= size + 4 * 1_000_000)
        }
    }

    /// A group of two tasks of known size, both running: the group's roll-up has a speed and an
    /// ETA soon after they start, as each task has.
    @Test func aGroupOfRunningTasksHasASpeedAndAnETA() async throws {
        try await withManager(configure: { $0.progressInterval = .milliseconds(100) }) { harness in
            let first = harness.fixture("first", segments: 1, size: 4_000_000, group: "pair")
            let second = harness.fixture("second", segments: 1, size: 4_000_000, group: "pair")
            for key in ["first", "second"] {
                harness.origin.inject(.throttle(bytesPerSecond: 500_000), at: harness.segmentPath(key, 0, 0, size: 4_000_000))
            }
            try await harness.manager.start(first.entity)
            try await harness.manager.start(second.entity)
            let known = await eventually(within: .seconds(30)) {
                guard let group = await harness.manager.checkGroup("pair") else { return false }
                return group.state == .downloading && group.rollUp.bytesPerSecond > 0 && group.rollUp.eta != nil
                    && group.children.allSatisfy { $0.eta != nil }
            }
            let group = await harness.manager.checkGroup("pair")
            #expect(known, "\(String(describing: group?.rollUp))")
            _ = await harness.manager.stopAll()
        }
    }
}
