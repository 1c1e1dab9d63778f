/// A set of byte positions as sorted, disjoint, non-adjacent half-open ranges: which bytes of a
/// file are on disk. A file written over a few connections is a handful of ranges however large
/// it is.
struct ByteRanges: Sendable, Hashable {
    /// The ranges, sorted, disjoint and not touching.
    private(set) var ranges: [Range<Int64>] = []

    init() {}

    init(_ ranges: [Range<Int64>]) {
        for range in ranges { insert(range) }
    }

    var isEmpty: Bool { ranges.isEmpty }

    /// The number of bytes in the set.
    var count: Int64 { ranges.reduce(0) { $0 + ($1.upperBound - $1.lowerBound) } }

    /// Adds `range`, merging it with the ranges it overlaps or touches.
    mutating func insert(_ range: Range<Int64>) {
        guard !range.isEmpty else { return }
        // The first range that ends at or after the new start may merge with it.
        var low = 0, high = ranges.count
        while low < high {
            let middle = (low + high) / 2
            if ranges[middle].upperBound < range.lowerBound { low = middle + 1 } else { high = middle }
        }
        var lower = range.lowerBound, upper = range.upperBound
        var end = low
        while end < ranges.count, ranges[end].lowerBound <= upper {
            lower = min(lower, ranges[end].lowerBound)
            upper = max(upper, ranges[end].upperBound)
            end += 1
        }
        ranges.replaceSubrange(low..<end, with: [lower..<upper])
    }

    /// Removes `range`.
    mutating func remove(_ range: Range<Int64>) {
        guard !range.isEmpty else { return }
        var result: [Range<Int64>] = []
        result.reserveCapacity(ranges.count + 1)
        for existing in ranges {
            if existing.upperBound <= range.lowerBound || existing.lowerBound >= range.upperBound {
                result.append(existing)
                continue
            }
            if existing.lowerBound < range.lowerBound { result.append(existing.lowerBound..<range.lowerBound) }
            if existing.upperBound > range.upperBound { result.append(range.upperBound..<existing.upperBound) }
        }
        ranges = result
    }

    /// Whether every byte of `range` is in the set.
    func contains(_ range: Range<Int64>) -> Bool {
        guard !range.isEmpty else { return true }
        guard let index = index(containing: range.lowerBound) else { return false }
        return ranges[index].upperBound >= range.upperBound
    }

    /// How many bytes from `position` on are in the set without a gap.
    func contiguousCount(from position: Int64) -> Int64 {
        guard let index = index(containing: position) else { return 0 }
        return ranges[index].upperBound - position
    }

    /// The ranges of `within` that are not in the set.
    func gaps(in within: Range<Int64>) -> [Range<Int64>] {
        var gaps: [Range<Int64>] = []
        var cursor = within.lowerBound
        for range in ranges where range.upperBound > within.lowerBound {
            if range.lowerBound >= within.upperBound { break }
            if range.lowerBound > cursor { gaps.append(cursor..<range.lowerBound) }
            cursor = max(cursor, range.upperBound)
        }
        if cursor < within.upperBound { gaps.append(cursor..<within.upperBound) }
        return gaps
    }

    /// The set limited to `within`.
    func clamped(to within: Range<Int64>) -> ByteRanges {
        var result = ByteRanges()
        for range in ranges {
            let lower = max(range.lowerBound, within.lowerBound), upper = min(range.upperBound, within.upperBound)
            if lower < upper { result.ranges.append(lower..<upper) }
        }
        return result
    }

    private func index(containing position: Int64) -> Int? {
        var low = 0, high = ranges.count
        while low < high {
            let middle = (low + high) / 2
            if ranges[middle].upperBound <= position { low = middle + 1 } else { high = middle }
        }
        guard low < ranges.count, ranges[low].lowerBound <= position else { return nil }
        return low
    }
}
