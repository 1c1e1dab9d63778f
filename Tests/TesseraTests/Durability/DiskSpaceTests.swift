import Foundation
import Testing
@testable import Tessera
import TesseraTesting

/// Free space set by the test.
final class FakeFreeSpace: FreeSpaceSource {
    private let bytes = Locked<Int64>(10_000_000_000)
    func set(_ value: Int64) { bytes.withLock { $0 = value } }
    func availableBytes(at path: String) -> Int64? { bytes.withLock { $0 } }
}

@Suite(.timeLimit(.minutes(2))) struct DiskSpaceTests {
    @Test func freeSpaceIsLookedAtEarlyWhenTheWritesComeWithinHalfOfWhatIsLeftAboveTheStop() {
        let policy = DiskSpacePolicy(warningBytes: 200, stopBytes: 100, checkInterval: .seconds(5), source: FakeFreeSpace())
        // 1,100 free at the last check: 1,000 above the stop; early once 500 are written.
        #expect(!policy.checksEarly(written: 499, lastFree: 1_100))
        #expect(policy.checksEarly(written: 500, lastFree: 1_100))
        // Already under the stop: every tick looks.
        #expect(policy.checksEarly(written: 0, lastFree: 50))
        // No overflow on huge counts.
        #expect(policy.checksEarly(written: .max, lastFree: .max))
        #expect(!policy.checksEarly(written: 0, lastFree: .max))
    }

    @Test func tasksStopBelowTheLimitAndResumeAboveTheWarning() async throws {
        let space = FakeFreeSpace()
        try await withManager(configure: {
            $0.diskSpace = DiskSpacePolicy(checkInterval: .seconds(3600), source: space)
            $0.maxConcurrentSegments = 2
        }) { harness in
            let fixture = harness.fixture("disk", segments: 6, size: 300_000)
            for segment in 0..<6 {
                // Slow enough that the task cannot finish while the test changes the free space,
                // however loaded the machine.
                harness.origin.inject(.throttle(bytesPerSecond: 300_000), at: harness.segmentPath("disk", 0, segment, size: 300_000))
            }
            try await harness.manager.start(fixture.entity)
            await harness.waitFor(fixture.id) { $0.state == .downloading && $0.bytesDone > 100_000 }

            space.set(150_000_000)
            await harness.manager.checkDiskSpace()
            #expect(await harness.sawEvent { if case .notice(let notice) = $0 { return notice.kind == .diskSpaceLow } else { return false } })
            #expect(await harness.manager.check(fixture.id)?.state == .downloading, "low space only warns")

            space.set(40_000_000)
            await harness.manager.checkDiskSpace()
            let interrupted = try #require(await harness.manager.check(fixture.id))
            #expect(interrupted.state == .interrupted(.diskSpace))
            #expect(await harness.sawEvent { if case .notice(let notice) = $0 { return notice.kind == .diskSpaceCritical } else { return false } })
            #expect(!FileManager.default.fileExists(atPath: harness.outputPath(fixture.entity, 0)), "no output with missing bytes")
            // A request already on its way when the stop came may still arrive: wait until the
            // engine has let go of every transfer. After that, silence, which only watching the
            // origin for a while can show.
            #expect(await eventually {
                harness.engine.statistics.activeTransfers == 0 && harness.engine.statistics.queuedTransfers == 0
            }, "the interrupted task's transfers end")
            let requests = harness.origin.totalRequests
            #expect(await consistently(for: .milliseconds(400)) { harness.origin.totalRequests == requests },
                "nothing is fetched while the disk is full")

            // Above the stop limit but below the warning: still waiting (hysteresis).
            space.set(100_000_000)
            await harness.manager.checkDiskSpace()
            #expect(await harness.manager.check(fixture.id)?.state == .interrupted(.diskSpace))

            space.set(300_000_000)
            await harness.manager.checkDiskSpace()
            #expect(await harness.sawEvent { if case .notice(let notice) = $0 { return notice.kind == .diskSpaceRecovered } else { return false } })
            await harness.waitForState(fixture.id, .completed)
            #expect(harness.outputsMatch(fixture))
            for segment in 0..<6 {
                #expect(harness.origin.bytesServed(for: harness.segmentPath("disk", 0, segment, size: 300_000)) <= 300_000 + 150_000)
            }
        }
    }

    @Test func aTaskDoesNotStartWhileTheDiskIsFull() async throws {
        let space = FakeFreeSpace()
        space.set(10_000_000)
        try await withManager(configure: { $0.diskSpace = DiskSpacePolicy(checkInterval: .seconds(3600), source: space) }) { harness in
            let fixture = harness.fixture("full-at-start", segments: 2)
            try await harness.manager.start(fixture.entity)
            // The runner's check before its first segment stops it.
            await harness.waitForState(fixture.id, .interrupted(.diskSpace))
            #expect(harness.origin.requests.allSatisfy { $0.path.hasPrefix("/manifests/") }, "no segment was requested")
            space.set(1_000_000_000)
            await harness.manager.checkDiskSpace()
            await harness.waitForState(fixture.id, .completed)
            #expect(harness.outputsMatch(fixture))
        }
    }

    @Test func theTimerNoticesWithoutBeingAsked() async throws {
        let space = FakeFreeSpace()
        try await withManager(configure: { $0.diskSpace = DiskSpacePolicy(checkInterval: .milliseconds(50), source: space) }) { harness in
            let fixture = harness.fixture("timer", segments: 4, size: 500_000)
            for segment in 0..<4 {
                harness.origin.inject(.throttle(bytesPerSecond: 500_000), at: harness.segmentPath("timer", 0, segment, size: 500_000))
            }
            try await harness.manager.start(fixture.entity)
            await harness.waitFor(fixture.id) { $0.state == .downloading }
            space.set(1_000)
            await harness.waitForState(fixture.id, .interrupted(.diskSpace))
            space.set(10_000_000_000)
            await harness.waitForState(fixture.id, .completed)
            #expect(harness.outputsMatch(fixture))
        }
    }

    @Test func statvfsReadsTheRealFileSystem() throws {
        let free = try #require(FileSystemFreeSpace().availableBytes(at: NSTemporaryDirectory()))
        #expect(free > 0)
        // A path that does not exist yet is measured on its nearest existing ancestor.
        let ancestor = try #require(FileSystemFreeSpace().availableBytes(at: NSTemporaryDirectory() + "/not/yet/there"))
        #expect(abs(ancestor - free) < 100_000_000)
    }
}
