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
