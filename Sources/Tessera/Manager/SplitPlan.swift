/// How the bytes of one large resource are shared out over connections as they come and go,
/// as aria2 does: a new connection takes the first range nobody fetches, or else half of what
/// the busiest connection has left (its transfer is told to stop where the new one starts).
///
/// A plain function of the situation, so it is tested without a network.
enum SplitPlan {
    /// A range a connection is fetching: from `start`, it has taken bytes up to `position`
    /// (absolute) and stops at `end` (absolute, exclusive).
    struct Active: Sendable, Hashable {
        var id: Int
        var start: Int64
        var position: Int64
        var end: Int64

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

    /// The choice for one more connection, given the ranges nobody fetches (`unassigned`) and the
    /// ones being fetched. A range is split only when both halves hold at least `minimumPiece`
    /// bytes; split points are aligned to 64 KiB.
    static func next(unassigned: [Range<Int64>], active: [Active], minimumPiece: Int64) -> Choice {
        if let gap = unassigned.first(where: { !$0.isEmpty }) { return .gap(gap) }
        let minimum = max(1, minimumPiece)
        guard let busiest = active.max(by: { ($0.remaining, $1.id) < ($1.remaining, $0.id) }),
            busiest.remaining >= 2 * minimum
        else { return .none }
        let alignment: Int64 = 64 * 1024
        var middle = busiest.position + busiest.remaining / 2
        if middle % alignment != 0, busiest.end - (middle / alignment + 1) * alignment >= minimum {
            middle = (middle / alignment + 1) * alignment
        }
        guard middle - busiest.position >= minimum, busiest.end - middle >= minimum else { return .none }
        return .split(id: busiest.id, at: middle, end: busiest.end)
    }
}
