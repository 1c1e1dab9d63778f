/// How the bytes of one large resource are shared out over connections as they come and go,
/// as aria2 does: when the first response shows a large file, the first connection keeps an
/// equal share from the start and the rest waits in one gap that the connections coming next
/// share equally, each asking for exactly its range; a connection that finishes later takes what
/// is left of the gap, or else the end of a slow connection's rest (that transfer is told to stop
/// where the new one starts): the share that makes both end together at the speeds measured, or
/// half when they are not known.
///
/// Every transfer that is told to stop early costs the bytes the server had already sent past
/// that point, and its connection: so the first connection is the only one cut by the plan, and
/// a rest is split again only when it would take a while at its connection's speed. A rest that
/// is slow at its connection's speed but would be a moment's work at the speed the connections
/// of the file have shown is looked at once more a little later (``Choice/later(id:after:)``):
/// on one link shared by several connections (a LAN, loopback) the one the others crowd out
/// speeds up as they end, and its rest is then not worth a request; a connection that is slow on
/// its own is still slow then, and its rest is split.
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
        /// When a connection first found its rest slow at its speed and short at the typical one
        /// (monotonic nanoseconds; ``Choice/later(id:after:)``): it is split once
        /// ``lookAgainDelay(minimumSeconds:)`` has passed since, if it is still slow.
        var slowSince: UInt64?
        /// Its speed since ``slowSince``, once measured: what "still slow" is judged by (its speed
        /// since its start counts the time it was crowded out).
        var bytesPerSecondSinceSlow: Double?

        init(
            id: Int, start: Int64, position: Int64, end: Int64, bytesPerSecond: Double? = nil, slowSince: UInt64? = nil,
            bytesPerSecondSinceSlow: Double? = nil
        ) {
            self.id = id
            self.start = start
            self.position = position
            self.end = end
            self.bytesPerSecond = bytesPerSecond
            self.slowSince = slowSince
            self.bytesPerSecondSinceSlow = bytesPerSecondSinceSlow
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
        /// Piece `id`'s rest is slow at its speed but short at the typical one: look again after
        /// `after` (the piece is marked slow from now, if it was not, and split at a look once
        /// the delay has passed, if still worth it).
        case later(id: Int, after: Duration)
        /// Nothing is worth another connection.
        case none
    }

    /// How long a connection waits before it looks again at a rest it found slow at its
    /// connection's speed and short at the typical one: a quarter of the time a rest must take
    /// to be split.
    static func lookAgainDelay(minimumSeconds: Double) -> Duration {
        .milliseconds(Int64(min(max(0, minimumSeconds), 3600) * 250))
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
    /// - Without gaps, the busiest connection's rest is split when both parts hold at least
    ///   `minimumPiece` bytes and the rest would take at least `minimumSeconds` at its speed (a
    ///   connection about to finish is left alone: cutting it costs what is in flight past the
    ///   cut). A connection not measured yet is taken to go at `typicalSpeed` (what one that
    ///   finished went at); with neither, only the sizes count. It keeps the part of its rest
    ///   that it would fetch while the new connection, going at `typicalSpeed`, fetches the
    ///   other (half of it when a speed is not known), so both end together.
    /// - A measured rest that takes that long at its speed but less at `typicalSpeed` is split
    ///   only once ``lookAgainDelay(minimumSeconds:)`` has passed since a connection first found
    ///   it so (``Choice/later(id:after:)``; `now`, monotonic nanoseconds), and only if it would
    ///   still take that long at its speed since then: it may belong to a connection that its
    ///   siblings crowd out of a shared link, which speeds up as they end.
    static func next(
        unassigned: [Range<Int64>], active: [Active], minimumPiece: Int64, sharers: Int = 1, minimumSeconds: Double = 0,
        typicalSpeed: Double? = nil, now: UInt64 = 0
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
        let rest = Double(busiest.remaining)
        if let speed = busiest.bytesPerSecond ?? typicalSpeed, speed > 0, rest / speed < minimumSeconds {
            return .none
        }
        var cut = busiest.position + keptShare(of: busiest, typicalSpeed: typicalSpeed)
        if cut % alignment != 0, busiest.end - aligned(up: cut) >= minimum {
            cut = aligned(up: cut)
        }
        cut = max(cut, min(busiest.end - minimum, busiest.position + minimum))
        guard cut - busiest.position >= minimum, busiest.end - cut >= minimum else { return .none }
        if busiest.bytesPerSecond != nil, let typicalSpeed, typicalSpeed > 0, rest / typicalSpeed < minimumSeconds {
            let delay = lookAgainDelay(minimumSeconds: minimumSeconds)
            guard let since = busiest.slowSince else { return .later(id: busiest.id, after: delay) }
            let left = delay.nanosecondsValue - (now >= since ? Int64(clamping: now - since) : 0)
            if left > 0 { return .later(id: busiest.id, after: .nanoseconds(left)) }
            // Sped up since it was found slow: left alone.
            if let recent = busiest.bytesPerSecondSinceSlow, recent > 0, rest / recent < minimumSeconds { return .none }
        }
        return .split(id: busiest.id, at: cut, end: busiest.end)
    }

    /// The bytes of `busiest`'s rest it keeps when a connection takes the end of it: half, or,
    /// when both speeds are known (its own, since it was found slow if measured then, and
    /// `typicalSpeed` for the taker), the share that makes both end together.
    private static func keptShare(of busiest: Active, typicalSpeed: Double?) -> Int64 {
        let rest = busiest.remaining
        guard let own = busiest.bytesPerSecondSinceSlow ?? busiest.bytesPerSecond, let taker = typicalSpeed,
            own > 0, taker > 0, own.isFinite, taker.isFinite
        else { return rest / 2 }
        let share = Double(rest) * own / (own + taker)
        return share.isFinite ? Int64(min(max(0, share), Double(rest))) : rest / 2
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
