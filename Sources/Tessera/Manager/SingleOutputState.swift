/// A single output's connections during a pass: which ranges are being fetched, which are on
/// disk, and what a connection that starts or ends means for them. A value: what it decides
/// (the range a new connection asks for, what a connection's end leaves) is tested without a
/// network or a clock (the time is passed in); the run's loop performs it. Its only live parts
/// are the ends of the transfers in flight (``TransferBound``), which it moves down when a
/// connection takes over the rest of another's range.
struct SingleOutputState {
    /// One connection's range.
    struct Piece {
        var start: Int64
        var bound: TransferBound
        /// The retry state the piece carries on, if it is a retry.
        var attemptKey: Int?
        /// The first request of a resource whose length is not known yet (no `Range`).
        var isFirst: Bool
        /// When it was started (monotonic nanoseconds): its speed is measured from then.
        var startedAt: UInt64
        /// When a connection first found its rest slow (``SplitPlan/Active/slowSince``), and the
        /// bytes it had taken then.
        var slowSince: UInt64?
        var takenWhenSlow: Int64 = 0

        /// Where it stands now; its speeds (since its start, and since it was found slow) once
        /// it has run long enough to tell.
        func active(id: Int, now: UInt64) -> SplitPlan.Active {
            let end = bound.end == .max ? Int64.max : start &+ bound.end
            let taken = bound.taken
            return SplitPlan.Active(
                id: id, start: start, position: start &+ taken, end: end,
                bytesPerSecond: Self.speed(bytes: taken, since: startedAt, now: now), slowSince: slowSince,
                bytesPerSecondSinceSlow: slowSince.flatMap { Self.speed(bytes: max(0, taken &- takenWhenSlow), since: $0, now: now) })
        }

        /// Marks the piece found slow at `now` (monotonic nanoseconds), once: its speed since then
        /// tells whether it still is.
        mutating func markSlow(now: UInt64) {
            guard slowSince == nil else { return }
            slowSince = now
            takenWhenSlow = bound.taken
        }

        /// `bytes` taken from `since` to `now` as bytes per second, once a quarter of a second
        /// has passed (a shorter time tells nothing).
        private static func speed(bytes: Int64, since: UInt64, now: UInt64) -> Double? {
            guard now > since else { return nil }
            let seconds = Double(now &- since) / 1e9
            return seconds >= 0.25 ? Double(bytes) / seconds : nil
        }
    }

    /// The resource as the run knows it when a connection starts or ends.
    struct Resource {
        /// Its length, once announced or learned.
        var length: Int64?
        /// Whether the manifest asks for a range of it (then it is never split or resumed by
        /// this state's rules: the range is the whole).
        var isRanged = false
    }

    /// What a connection's end means for the output.
    enum PieceEnd: Equatable {
        /// Not a connection of this pass (it was forgotten when the output started over).
        case unknown
        /// Every byte of the output is in.
        case completed
        /// It ended well; the output wants another connection if bytes are left.
        case free
        /// Under a rate limit, the first range was answered with the whole file: the server
        /// serves no ranges, and the file is asked for whole now (not a failure).
        case rangesRefused
        /// It failed; `progressed` when the bytes it brought are kept (they count as progress
        /// that forgives earlier failures only then).
        case failed(progressed: Bool)
    }

    /// The length a connection's end taught (a body whose length was not announced).
    struct Learned: Equatable {
        var length: Int64
        /// Whether the version's validator still holds (an open range of the same version);
        /// `false` for the first answer, which is the version.
        var keepsValidator: Bool
    }

    var pieces: [Int: Piece] = [:]
    var done = ByteRanges()
    var nextPieceID = 0
    /// Connections queued for this output that have not started yet: a gap is shared out
    /// equally among them.
    var sharers = 0
    /// The speed of the last connection that finished its range, bytes per second.
    var lastSpeed: Double?
    /// Whether ranges of this version may be asked for (the server serves ranges and the
    /// version has a strong validator).
    var rangesAllowed = false
    /// Under a rate limit, the largest range one request asks for (``SplitPolicy/chunk(rate:roundTrip:)``);
    /// `nil` without a limit, or once the server refused a range.
    var chunk: Int64?
    /// The bytes of ``done`` this pass's connections counted in the task's progress.
    var countedBytes: Int64 = 0
    /// Counted bytes the output forgot (it started over) that the task's progress still holds:
    /// the loop takes them out (``takeForgotten()``).
    private(set) var forgotten: Int64 = 0

    // MARK: - Starting

    /// How many connections the output starts a pass with: one, unless an earlier run left a
    /// large file whose length and version are known (then its rest is shared as the first
    /// response would have shared the whole).
    func connectionsToResume(_ resource: Resource, splitting: SplitPolicy, rateLimited: Bool) -> Int {
        guard rangesAllowed, let length = resource.length, !resource.isRanged else { return 1 }
        return splitting.connections(forRest: length - done.clamped(to: 0..<length).count, rateLimited: rateLimited)
    }

    /// A queued connection is a transfer already running (or ended) for `piece`: registered as a
    /// piece, its id and piece.
    mutating func adoptPiece(_ piece: Piece) -> (id: Int, piece: Piece) {
        sharers = max(0, sharers - 1)
        let id = nextPieceID
        nextPieceID += 1
        pieces[id] = piece
        return (id, piece)
    }

    /// A queued connection starts: the range it fetches, registered as a piece (its id and
    /// piece), or what it does instead. `now` is the monotonic clock in nanoseconds.
    mutating func startPiece(
        attemptKey: Int?, _ resource: Resource, splitting: SplitPolicy, now: UInt64
    ) -> ConnectionStart<(id: Int, piece: Piece)> {
        let sharing = sharers
        sharers = max(0, sharers - 1)
        return nextRange(resource, sharers: sharing, splitting: splitting, now: now).map { range in
            let id = nextPieceID
            nextPieceID += 1
            let piece = Piece(
                start: range.start, bound: TransferBound(end: range.length ?? .max), attemptKey: attemptKey,
                isFirst: range.isFirst, startedAt: now)
            pieces[id] = piece
            return (id, piece)
        }
    }

    /// A queued connection is not started (the output is done).
    mutating func dropQueued() {
        sharers = max(0, sharers - 1)
    }

    /// A range a new connection fetches: from `start`, `length` bytes (`nil`: to the end);
    /// `isFirst` for the first request of a resource whose length is not known yet.
    typealias NewRange = (start: Int64, length: Int64?, isFirst: Bool)

    /// The range a new connection fetches, or why none.
    private mutating func nextRange(
        _ resource: Resource, sharers: Int, splitting: SplitPolicy, now: UInt64
    ) -> ConnectionStart<NewRange> {
        if resource.length == nil, rangesAllowed, pieces.isEmpty, let first = done.ranges.first, first.lowerBound == 0 {
            // A body of unannounced length that an earlier run began: the rest of it, with an
            // open range of the same version (its end is where the answer ends).
            return .started((start: first.upperBound, length: nil, isFirst: false))
        }
        guard let length = resource.length, rangesAllowed else {
            // The length is not known (or ranges may not be asked for): one request for the
            // whole resource, once; under a rate limit, for its first range (the answer tells
            // the length, and whether ranges are served). Not again once a first answer showed
            // that ranges of this version may not be asked for: then it is the whole resource.
            guard pieces.isEmpty else { return .nothing }
            forgetDone()
            let first = !resource.isRanged && resource.length == nil ? chunk : nil
            return .started((start: 0, length: first, isFirst: true))
        }
        for _ in 0..<4 {
            var covered = done
            var active: [SplitPlan.Active] = []
            active.reserveCapacity(pieces.count)
            for (id, piece) in pieces {
                var range = piece.active(id: id, now: now)
                range.end = min(range.end, length)
                active.append(range)
                if range.start < range.end { covered.insert(range.start..<range.end) }
            }
            switch SplitPlan.next(
                unassigned: covered.gaps(in: 0..<length), active: active, minimumPiece: splitting.pieceSize, sharers: sharers,
                minimumSeconds: splitting.resplitMinimumSeconds, typicalSpeed: lastSpeed, now: now)
            {
            case .gap(let range):
                return .started((start: range.lowerBound, length: min(range.upperBound - range.lowerBound, chunk ?? .max), isFirst: false))
            case .split(let id, let at, let end):
                // (The piece may have taken bytes past `at` meanwhile: then look again.)
                guard let piece = pieces[id], piece.bound.shrink(to: at - piece.start) else { continue }
                return .started((start: at, length: min(end - at, chunk ?? .max), isFirst: false))
            case .later(let id, let delay):
                pieces[id]?.markSlow(now: now)
                return .later(after: delay)
            case .none:
                return .nothing
            }
        }
        return .nothing
    }

    /// The first response showed a large file that `connections` connections will share: the
    /// first connection, already flowing, is told to stop at the end of its equal share (the
    /// rest is one gap the others share out, each asking for exactly its range). Returns whether
    /// it was.
    @discardableResult
    func shareOut(length: Int64, among connections: Int, minimumPiece: Int64) -> Bool {
        guard let first = pieces.values.first(where: \.isFirst),
            let end = SplitPlan.firstEnd(
                length: length, connections: connections, position: first.start + first.bound.taken, minimumPiece: minimumPiece)
        else { return false }
        return first.bound.shrink(to: end - first.start)
    }

    // MARK: - Ending

    /// Connection `id` ended, having kept `kept` bytes from its start, with `failure` (`nil`
    /// when it ended well): its bytes are placed in the output's ranges. Returns what that
    /// means, and the length the answer taught when the resource's was not known (`resource`
    /// is what was known when it ended).
    mutating func pieceEnded(
        _ id: Int, failure: DownloadError.Code?, kept: Int64, _ resource: Resource, now: UInt64
    ) -> (end: PieceEnd, learned: Learned?) {
        guard let piece = pieces.removeValue(forKey: id) else { return (.unknown, nil) }
        if kept > 0 {
            done.insert(piece.start..<piece.start.saturatingAdding(kept))
            countedBytes = countedBytes.saturatingAdding(kept)
        }
        let elapsed = Double(now &- piece.startedAt) / 1e9
        if failure == nil, kept > 0, elapsed > 0 { lastSpeed = Double(kept) / elapsed }
        var learned: Learned?
        if failure == nil, resource.length == nil, piece.isFirst {
            // A body of unannounced length: it is complete as it came.
            learned = Learned(length: kept, keepsValidator: false)
        } else if failure == nil, resource.length == nil, piece.bound.end == .max {
            // The rest of such a body, resumed with an open range: it ends where the answer did.
            let (end, overflow) = piece.start.addingReportingOverflow(kept)
            if !overflow { learned = Learned(length: end, keepsValidator: true) }
        }
        if let length = resource.length ?? learned?.length, done.contains(0..<length) { return (.completed, learned) }
        guard let failure else { return (.free, learned) }
        if failure == .rangeNotSupported, chunk != nil {
            rangesAllowed = false
            forgetDone()
            chunk = nil
            return (.rangesRefused, learned)
        }
        if failure == .rangeNotSupported {
            // The server no longer serves ranges of it: one request for everything, again.
            rangesAllowed = false
            forgetDone()
        }
        if !rangesAllowed, pieces.isEmpty { forgetDone() }
        // Progress forgives earlier failures only when its bytes are kept: bytes that the next
        // request asks for again (no ranges of this version) are none, or a server that cuts
        // every answer short would be asked again forever.
        return (.failed(progressed: kept > 0 && rangesAllowed), learned)
    }

    /// Forgets the bytes the output had (it starts over): they no longer count as done.
    mutating func forgetDone() {
        forgotten = forgotten.saturatingAdding(countedBytes)
        countedBytes = 0
        done = ByteRanges()
    }

    /// The counted bytes forgotten since the last call, to take out of the task's progress.
    mutating func takeForgotten() -> Int64 {
        defer { forgotten = 0 }
        return forgotten
    }
}

/// What starting a connection's work came to: it started (on what), there was nothing worth
/// doing, or nothing now and the work looks again after a delay
/// (``SplitPlan/Choice/later(id:after:)``). One answer for the range a connection fetches,
/// the piece it registers and the slot's work in the run's loop.
enum ConnectionStart<Started> {
    /// It started on this.
    case started(Started)
    /// Nothing is worth doing.
    case nothing
    /// Nothing now; look again after the delay.
    case later(after: Duration)

    /// The same answer, with what it started on transformed.
    func map<Other>(_ transform: (Started) -> Other) -> ConnectionStart<Other> {
        switch self {
        case .started(let value): .started(transform(value))
        case .nothing: .nothing
        case .later(let delay): .later(after: delay)
        }
    }
}
