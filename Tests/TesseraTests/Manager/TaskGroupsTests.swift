import Testing
@testable import Tessera

/// The manager's groups as a value: membership, tallies counted child by child, changes told once.
@Suite struct TaskGroupsTests {
    let one = TaskHandle(1)
    let two = TaskHandle(2)

    func part(_ state: DownloadTaskState, done: Int64, total: Int64) -> DownloadGroupTally.Entry {
        DownloadGroupTally.Entry(state: state, bytesDone: done, bytesTotal: total, bytesPerSecond: 0)
    }

    @Test func aGroupAppearsWithItsFirstChildAndGoesWithItsLast() {
        var groups = TaskGroups()
        var made = 0
        groups.join(one, key: "g") { made += 1; return DownloadTaskGroup(key: "g") }
        groups.join(two, key: "g") { made += 1; return DownloadTaskGroup(key: "g") }
        #expect(made == 1)
        #expect(groups.entries["g"]?.children == [one, two])
        groups.leave(one, key: "g")
        #expect(groups.keys == ["g"])
        groups.leave(two, key: "g")
        #expect(groups.keys.isEmpty)
        // (Its removal is still told.)
        #expect(groups.takeChanged { _ in nil } == ["g"])
    }

    @Test func onlyChangedChildrenAreCountedAgainAndChangesAreToldOnce() {
        var groups = TaskGroups()
        groups.join(one, key: "g") { DownloadTaskGroup(key: "g") }
        groups.join(two, key: "g") { DownloadTaskGroup(key: "g") }
        var parts = [one: part(.downloading, done: 10, total: 100), two: part(.waiting, done: 0, total: 50)]
        var asked: [TaskHandle] = []
        #expect(groups.takeChanged { asked.append($0); return parts[$0] } == ["g"])
        #expect(Set(asked) == [one, two])
        #expect(!groups.hasChanges)
        #expect(groups.takeChanged { _ in nil }.isEmpty)

        parts[one] = part(.completed, done: 100, total: 100)
        groups.markChanged(one, key: "g")
        asked = []
        #expect(groups.takeChanged { asked.append($0); return parts[$0] } == ["g"])
        #expect(asked == [one], "the sibling is not counted again")
        let update = groups.update("g") { [] }
        #expect(update?.rollUp.bytesDone == 100)
        #expect(update?.rollUp.bytesTotal == 150)
        #expect(update?.childCount == 2)
    }

    @Test func aChildThatLeftIsNoLongerInTheTally() {
        var groups = TaskGroups()
        groups.join(one, key: "g") { DownloadTaskGroup(key: "g") }
        groups.join(two, key: "g") { DownloadTaskGroup(key: "g") }
        let parts = [one: part(.downloading, done: 10, total: 100), two: part(.downloading, done: 5, total: 50)]
        _ = groups.takeChanged { parts[$0] }
        groups.leave(two, key: "g")
        #expect(groups.takeChanged { parts[$0] } == ["g"])
        #expect(groups.update("g") { [] }?.rollUp.bytesTotal == 100)
    }
}
