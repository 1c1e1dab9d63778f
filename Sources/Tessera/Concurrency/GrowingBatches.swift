/// How a long list is fed in batches that grow: 1, 2, 4, … up to `largest` items, then
/// `largest` each. The first items of a list of thousands go at once (their downloads start
/// while the rest is read), and the rest goes in batches whose cost per item is small. The one
/// rule for the command line's input batches and ``DownloadTaskManager/startAll()``'s launches.
package struct GrowingBatches: Sendable {
    /// The largest batch.
    package let largest: Int
    /// The size of the batch being filled.
    package private(set) var size = 1
    private var filled = 0

    /// Batches growing from one item to `largest` (at least 1).
    package init(largest: Int) {
        self.largest = max(1, largest)
    }

    /// Counts one more item; `true` when it completes a batch (the next batch is then twice as
    /// large, up to ``largest``).
    package mutating func add() -> Bool {
        filled += 1
        guard filled >= size else { return false }
        filled = 0
        size = min(size * 2, largest)
        return true
    }
}
