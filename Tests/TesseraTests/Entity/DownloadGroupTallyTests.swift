import Testing

@testable import Tessera

/// `DownloadGroupTally`: a tally kept child by child gives the roll-up a tally of every child
/// gives, with the default rules, at any size.
@Suite struct DownloadGroupTallyTests {
    let states: [DownloadTaskState] = [
        .idle, .waiting, .resolving, .downloading, .paused, .interrupted(.network), .interrupted(.diskSpace), .completed, .failed,
        .invalid,
    ]

    func entry(_ random: inout SplitMixRandom) -> DownloadGroupTally.Entry {
        let state = states[Int(random.next() % UInt64(states.count))]
        let total: Int64? = random.next() % 5 == 0 ? nil : Int64(random.next() % 1_000_000)
        let done = Int64(random.next() % 1_000_000)
        return DownloadGroupTally.Entry(state: state, bytesDone: done, bytesTotal: total, bytesPerSecond: Double(random.next() % 10_000))
    }

    @Test func aTallyKeptChildByChildEqualsOneOfAllChildren() {
        var random = SplitMixRandom(seed: 42)
        let group = DownloadTaskGroup(key: "g")
        var children = (0..<200).map { _ in entry(&random) }
        var kept = DownloadGroupTally(entries: children)
        for step in 0..<5_000 {
            let index = Int(random.next() % UInt64(children.count))
            let new = entry(&random)
            kept.remove(children[index])
            kept.add(new)
            children[index] = new
            if step % 97 == 0 {
                let fresh = DownloadGroupTally(entries: children)
                #expect(kept.count == fresh.count && kept.bytesDone == fresh.bytesDone && kept.bytesTotal == fresh.bytesTotal)
                #expect(group.rollUp(tally: kept).state == group.rollUp(tally: fresh).state)
                #expect(abs(kept.bytesPerSecond - fresh.bytesPerSecond) < 1e-3)
            }
        }
    }

    @Test func theDefaultRules() {
        let group = DownloadTaskGroup(key: "g")
        func state(_ states: [DownloadTaskState]) -> DownloadGroupInfo.State {
            group.rollUp(tally: DownloadGroupTally(entries: states.map {
                DownloadGroupTally.Entry(state: $0, bytesDone: 0, bytesTotal: 0, bytesPerSecond: 0)
            })).state
        }
        #expect(state([.completed, .downloading, .paused]) == .downloading)
        #expect(state([.completed, .resolving]) == .downloading)
        #expect(state([.completed, .waiting, .paused]) == .waiting)
        #expect(state([.completed, .completed]) == .completed)
        #expect(state([.completed, .failed]) == .failed)
        #expect(state([.invalid, .completed, .paused]) == .paused)
        #expect(state([.interrupted(.network), .paused]) == .interrupted)
        #expect(state([.idle]) == .paused)
        #expect(state([]) == .paused)
    }

    @Test func sumsNeverOverflowAndUnknownTotalsStayUnknown() {
        var tally = DownloadGroupTally()
        let huge = DownloadGroupTally.Entry(state: .downloading, bytesDone: .max, bytesTotal: .max, bytesPerSecond: 1)
        for _ in 0..<4 { tally.add(huge) }
        #expect(tally.bytesDone == .max && tally.bytesTotal == .max)
        for _ in 0..<3 { tally.remove(huge) }
        #expect(tally.bytesDone == .max && tally.bytesTotal == .max && tally.count == 1)
        tally.add(DownloadGroupTally.Entry(state: .waiting, bytesDone: 0, bytesTotal: nil, bytesPerSecond: 5))
        #expect(tally.bytesTotal == nil && tally.bytesPerSecond == 1)
        tally.remove(huge)
        #expect(tally.bytesPerSecond == 0 && tally.bytesDone == 0 && tally.count == 1)
    }

    @Test func onlyTheBaseGroupSkipsTheChildren() {
        #expect(!DownloadTaskGroup.needsChildren)
        #expect(RegistryTestPlayurlGroup.needsChildren)
    }
}
