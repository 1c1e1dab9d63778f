import Testing
@testable import Tessera

/// The scheduler's tables: entries by handle, counts by host.
@Suite struct SchedulerTablesTests {
    @Test func aHandleTableKeepsValuesAtTheirHandlesAndCountsThem() {
        var table = HandleTable<String>()
        #expect(table[TaskHandle(3)] == nil && table.count == 0)
        table[TaskHandle(3)] = "c"
        table[TaskHandle(1)] = "a"
        #expect(table[TaskHandle(3)] == "c" && table[TaskHandle(1)] == "a" && table[TaskHandle(2)] == nil)
        #expect(table.count == 2)
        table[TaskHandle(3)]! += "!"
        #expect(table[TaskHandle(3)] == "c!" && table.count == 2, "a change in place is not a new value")
        table[TaskHandle(1)] = nil
        table[TaskHandle(9)] = nil
        #expect(table.count == 1)
        #expect(Array(table.values) == ["c!"])
        #expect(table.pairs.map(\.key) == [TaskHandle(3)])
        #expect(table[TaskHandle(-1)] == nil, "an unknown handle has nothing")
    }

    @Test func aHandleSetHoldsEachHandleOnceAndAnswersByIndex() {
        var set = HandleSet()
        #expect(set.isEmpty && !set.contains(TaskHandle(0)) && !set.contains(TaskHandle(-1)))
        let added = [5, 2, 9].map { set.insert(TaskHandle($0)) }
        #expect(added == [true, true, true])
        let again = set.insert(TaskHandle(2))
        #expect(!again, "a member is not added twice")
        #expect(set.count == 3 && Array(set) == [TaskHandle(5), TaskHandle(2), TaskHandle(9)], "in insertion order")
        let removed = [5, 5, 40].map { set.remove(TaskHandle($0)) }
        #expect(removed == [true, false, false])
        #expect(!set.contains(TaskHandle(5)) && set.contains(TaskHandle(2)) && set.contains(TaskHandle(9)))
        #expect(Set(set) == [TaskHandle(2), TaskHandle(9)], "the last member takes the removed one's place")
        var other = HandleSet()
        other.insert(TaskHandle(9))
        other.insert(TaskHandle(2))
        #expect(set == other, "equal in any order")
        other.insert(TaskHandle(1))
        #expect(set != other)
        set.removeAll()
        #expect(set.isEmpty && !set.contains(TaskHandle(2)) && !set.contains(TaskHandle(9)))
        let reused = set.insert(TaskHandle(9))
        #expect(reused && Array(set) == [TaskHandle(9)], "usable again after removeAll")
    }

    @Test func hostCountsDropAHostAtZeroAndCompareInAnyOrder() {
        var counts = HostCounts()
        counts["a", default: 0] += 2
        counts["b", default: 0] += 1
        #expect(counts.count == 2 && counts["a"] == 2 && counts["b"] == 1 && counts["c"] == nil)
        #expect(counts.first?.key == "a", "in the order counted")
        counts["a", default: 0] -= 2
        #expect(counts["a"] == nil && counts.count == 1, "no host is kept at 0")
        counts["c"] = 0
        #expect(counts.count == 1)
        counts["c"] = 4
        let other: HostCounts = ["c": 4, "b": 1]
        #expect(counts == other && counts.hashValue == other.hashValue)
        #expect(counts != ["c": 4, "b": 2] && counts != ["c": 4])
        counts.removeAll()
        #expect(counts.isEmpty && counts.keys.isEmpty)
    }
}
