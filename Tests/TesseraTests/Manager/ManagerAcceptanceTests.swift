import Foundation
import Testing
@testable import Tessera
import TesseraTesting

@Suite(.timeLimit(.minutes(2))) struct ManagerAcceptanceTests {
    @Test func aUserEntityDownloadsThreeOutputsOfFiftySegments() async throws {
        try await withManager { harness in
            let fixture = harness.fixture("accept", outputs: 3, segments: 50, size: 20_000)
            try await harness.manager.start(fixture.entity)
            let done = try #require(await harness.waitForState(fixture.id, .completed))
            #expect(done.bytesDone == 3 * 50 * 20_000)
            #expect(done.bytesTotal == Int64(3 * 50 * 20_000))
            #expect(done.segmentsDone == 150)
            #expect(done.segmentsTotal == 150)
            #expect(done.outputs.count == 3)
            #expect(done.outputs.allSatisfy { $0.isComplete })
            #expect(harness.outputsMatch(fixture))
            // Every segment was fetched exactly once.
            for output in 0..<3 {
                for segment in 0..<50 {
                    #expect(harness.origin.requestCount(for: harness.segmentPath("accept", output, segment, size: 20_000)) == 1)
                }
            }
            // Nothing is left behind but the outputs.
            let leftovers = try FileManager.default.subpathsOfDirectory(atPath: harness.root.path)
                .filter { $0.hasSuffix(".part") || $0.hasSuffix(".seg") }
            #expect(leftovers.isEmpty)
        }
    }

    @Test func aGroupOfFourRollsUpBytesAndStateAtEveryEvent() async throws {
        try await withManager(configure: { $0.maxConcurrentTasks = 2 }) { harness in
            let fixtures = (0..<4).map { harness.fixture("album-\($0)", outputs: 2, segments: 10, size: 40_000, group: "album") }
            for fixture in fixtures {
                for output in 0..<2 {
                    for segment in 0..<10 {
                        harness.origin.inject(.throttle(bytesPerSecond: 400_000), at: harness.segmentPath(fixture.entity.entityKey, output, segment, size: 40_000))
                    }
                }
                try await harness.manager.start(fixture.entity)
            }
            for fixture in fixtures { await harness.waitForState(fixture.id, .completed) }
            #expect(await harness.sawEvent { if case .groupUpdated(let group) = $0 { return group.state == .completed } else { return false } })
            // Replay the log: each group event must agree with the children's own events before
            // it (the group's tally is kept child by child; the event carries no children).
            var children: [DownloadTaskID: DownloadTaskInfo] = [:]
            var groupEvents = 0
            var sawDownloading = false
            for event in harness.log.all {
                switch event {
                case .taskAdded(let info), .taskStateChanged(let info, _), .taskProgress(let info):
                    if info.groupKey == "album" { children[info.id] = info }
                case .groupUpdated(let group):
                    groupEvents += 1
                    #expect(group.key == "album")
                    #expect(group.children.isEmpty && group.childCount >= children.count && group.childCount <= 4)
                    let known = Array(children.values)
                    if known.count == 4 {
                        #expect(group.state == expectedGroupState(known.map(\.state)), "\(known.map(\.state))")
                    }
                    // The tally reads the bytes later than the last child event did, never earlier.
                    #expect(group.rollUp.bytesDone >= known.reduce(0) { $0 + $1.bytesDone })
                    if group.state == .downloading { sawDownloading = true }
                default:
                    break
                }
            }
            // Group updates are coalesced per progress tick: fewer than one per child change.
            #expect(groupEvents > 3)
            #expect(sawDownloading)
            let final = try #require(await harness.manager.checkGroup("album"))
            #expect(final.state == .completed)
            #expect(final.children.count == 4)
            #expect(final.rollUp.bytesDone == 4 * 2 * 10 * 40_000)
            #expect(final.rollUp.bytesTotal == Int64(4 * 2 * 10 * 40_000))
            #expect(await harness.manager.checkAllGroups().map(\.key) == ["album"])
            for fixture in fixtures { #expect(harness.outputsMatch(fixture)) }
        }
    }

    /// The roll-up rules of DESIGN.md, written again independently of the group class.
    func expectedGroupState(_ states: [DownloadTaskState]) -> DownloadGroupInfo.State {
        if states.contains(.downloading) || states.contains(.resolving) { return .downloading }
        if states.contains(.waiting) { return .waiting }
        if !states.isEmpty && states.allSatisfy({ $0 == .completed }) { return .completed }
        let finished: Set<DownloadTaskState> = [.completed, .failed, .invalid]
        if states.contains(where: { $0 == .failed || $0 == .invalid }) && states.allSatisfy(finished.contains) { return .failed }
        if states.contains(where: { if case .interrupted = $0 { return true } else { return false } }) { return .interrupted }
        return .paused
    }
}
