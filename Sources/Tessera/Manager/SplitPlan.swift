/// How the bytes of one large resource are shared out over connections as they come and go,
/// as aria2 does: when the first response shows a large file, the first connection keeps an
/// equal share from the start and the rest waits in one gap that the connections coming next
/// share equally, each asking for exactly its range; a connection that finishes later takes what
/// is left of the gap, or else half of a slow connection's rest (that transfer is told to stop
/// where the new one starts).
///
/// Every transfer that is told to stop early costs the bytes the server had already sent past
/// that point, and its connection: so the first connection is the only one cut by the plan, and
/// a rest is split again only when it would take a while at its connection's speed.
///
/// A plain function of the situation, so it is tested without a network or a clock.
enum SplitPlan {
    /// A range a connection is fetching: from `start`, it has taken bytes up to `position`
    /// (absolute) and stops at `end` (absolute, exclusive).
    struct Active: Sendable, Hashable {
        var id: Int
        var start: Int64
        var position: Int64
        var end: Int64
        /// Its speed, bytes per second, once measured.
        var bytesPerSecond: Double?

        init(id: Int, start: Int64, position: Int64, end: Int64, bytesPerSecond: Double? = nil) {
            self.id = id
            self.start = start
            self.position = position
            self.end = end
            self.bytesPerSecond = bytesPerSecond
        }

        var remaining: Int64 { max(0, end - position) }
    }

    /// What a new connection should fetch.
    enum Choice: Sendable, Equatable {
        /// A range nobody fetches.
        case gap(Range<Int64>)
        /// Take over the end of piece `id` from `at`: shrink that piece's end to `at` first; the
        /// new range is `at..<end`.
        case split(id: Int, at: Int64, end: Int64)
        /// Nothing is worth another connection.
        case none
    }

    /// Split points and shares are multiples of this.
    static let alignment: Int64 = 64 * 1024

    /// Where the first connection of a resource of `length` bytes stops when `connections`
    /// connections in all will share it: the end of its equal share, or `nil` when the file is
    /// not worth splitting that way (a share would be under `minimumPiece`, or the first has
    /// already taken its share's worth).
    static func firstEnd(length: Int64, connections: Int, position: Int64, minimumPiece: Int64) -> Int64? {
        guard connections > 1, length > 0 else { return nil }
        let share = max(max(1, minimumPiece), aligned(up: ceilDivide(length, Int64(connections))))
        guard share < length, length - share >= minimumPiece, position < share else { return nil }
        return share
    }

    /// The choice for one more connection, given the ranges nobody fetches (`unassigned`), the
    /// ones being fetched, and how many connections (this one included) are about to take a
    /// share of the gaps (`sharers`).
    ///
    /// - A gap goes in equal shares to the sharers (aligned; a rest under `minimumPiece` goes
    ///   with the last share).
    /// - Without gaps, the busiest connection's rest is halved when both halves hold at least
    ///   `minimumPiece` bytes and the rest would take at least `minimumSeconds` at its speed (a
    ///   connection about to finish is left alone: cutting it costs what is in flight past the
    ///   cut). A connection not measured yet is taken to go at `typicalSpeed` (what one that
    ///   finished went at); with neither, only the sizes count.
    static func next(
        unassigned: [Range<Int64>], active: [Active], minimumPiece: Int64, sharers: Int = 1, minimumSeconds: Double = 0,
        typicalSpeed: Double? = nil
    ) -> Choice {
        let minimum = max(1, minimumPiece)
        if let gap = unassigned.first(where: { !$0.isEmpty }) {
            let length = Int64(gap.count)
            let share = max(minimum, aligned(up: ceilDivide(length, Int64(max(1, sharers)))))
            guard share < length, length - share >= minimum else { return .gap(gap) }
            return .gap(gap.lowerBound..<gap.lowerBound + share)
        }
        guard let busiest = active.max(by: { ($0.remaining, $1.id) < ($1.remaining, $0.id) }),
            busiest.remaining >= 2 * minimum
        else { return .none }
        if let speed = busiest.bytesPerSecond ?? typicalSpeed, speed > 0, Double(busiest.remaining) / speed < minimumSeconds {
            return .none
        }
        var middle = busiest.position + busiest.remaining / 2
        if middle % alignment != 0, busiest.end - aligned(up: middle) >= minimum {
            middle = aligned(up: middle)
        }
        guard middle - busiest.position >= minimum, busiest.end - middle >= minimum else { return .none }
        return .split(id: busiest.id, at: middle, end: busiest.end)
    }

    private static func ceilDivide(_ value: Int64, _ divisor: Int64) -> Int64 {
        value / divisor + (value % divisor == 0 ? 0 : 1)
    }

    /// `value` rounded up to the alignment (values near `Int64.max` are left as they are).
    private static func aligned(up value: Int64) -> Int64 {
        let (sum, overflow) = value.addingReportingOverflow(alignment - 1)
        return overflow ? value : sum / alignment * alignment
    }
}
