import Testing
@testable import Tessera

/// Batches that grow from one item: the first items of a long list go at once.
@Suite struct GrowingBatchesTests {
    /// The counts at which batches end, over `items` items.
    func ends(largest: Int, items: Int) -> [Int] {
        var batches = GrowingBatches(largest: largest)
        return (1...items).filter { _ in batches.add() }
    }

    @Test func batchesDoubleFromOneUpToTheLargestThenStayThere() {
        #expect(ends(largest: 8, items: 40) == [1, 3, 7, 15, 23, 31, 39])
        #expect(ends(largest: 256, items: 1_000) == [1, 3, 7, 15, 31, 63, 127, 255, 511, 767])
    }

    @Test func aLargestOfOneOrLessIsABatchPerItem() {
        #expect(ends(largest: 1, items: 4) == [1, 2, 3, 4])
        #expect(ends(largest: 0, items: 3) == [1, 2, 3])
    }
}
