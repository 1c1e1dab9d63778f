import Synchronization

/// A task's progress, in one place: the bytes and segments done, the bytes of transfers in
/// flight, and what is known of the total. The run writes it (the engine thread's progress
/// callbacks included); the manager reads it for snapshots and the store.
final class TaskProgress: Sendable {
    /// A moment's reading.
    struct Snapshot: Sendable, Hashable {
        /// Bytes done, counting those of transfers in flight.
        var bytes: Int64
        var doneSegments: Int
        var segmentCount: Int
        /// The sum of the segment sizes the manifest (or a response) gives.
        var knownBytes: Int64
        /// Segments whose size is not known yet.
        var unknownSizes: Int
        /// Changes whenever ``bytes`` changes for another reason than bytes arriving (a run
        /// starting from what it found on disk, bad bytes dropped): a speed is measured within
        /// one epoch.
        var epoch = 0
        /// A live recording's state (no total: the stream is still growing).
        var live: LiveRecordingInfo? = nil

        /// The total, estimated from the finished segments when sizes are missing; `nil` until
        /// a tenth of the segments (and at least three) are done, and before the run has said
        /// what it found (a reading taken as the run starts is not a total of zero).
        var totalBytes: Int64? {
            guard segmentCount > 0 else { return nil }
            if unknownSizes == 0 { return knownBytes }
            guard doneSegments >= 3, doneSegments * 10 >= segmentCount else { return nil }
            let perSegment = bytes / Int64(doneSegments)
            let (estimate, overflow) = perSegment.multipliedReportingOverflow(by: Int64(unknownSizes))
            guard !overflow else { return nil }
            return max(bytes, knownBytes.addingReportingOverflow(estimate).overflow ? .max : knownBytes + estimate)
        }

        var totalIsEstimate: Bool { unknownSizes > 0 }
    }

    private struct State {
        var doneBytes: Int64 = 0
        var doneSegments = 0
        var segmentCount = 0
        var knownBytes: Int64 = 0
        var unknownSizes = 0
        var inFlight: [Int: Int64] = [:]
        var epoch = TaskProgress.newEpoch()
        var live: LiveRecordingInfo?
    }

    private let state: Locked<State>

    /// A run's progress, reading `last` (the task's last reading) until the run says what it
    /// found on disk (``reset(doneBytes:doneSegments:segmentCount:knownBytes:unknownSizes:)``):
    /// a task resuming does not show zero bytes while it starts.
    init(startingAt last: Snapshot? = nil) {
        var initial = State()
        if let last {
            initial.doneBytes = max(0, last.bytes)
            initial.doneSegments = max(0, last.doneSegments)
            initial.segmentCount = max(0, last.segmentCount)
            initial.knownBytes = max(0, last.knownBytes)
            initial.unknownSizes = max(0, last.unknownSizes)
            initial.live = last.live
        }
        state = Locked(initial)
    }

    /// Epochs are unique over every task's progress (a new run's count is a new epoch too).
    private static let epochs = Atomic(0)

    private static func newEpoch() -> Int {
        epochs.add(1, ordering: .relaxed).newValue
    }

    var snapshot: Snapshot {
        state.withLock { state in
            var bytes = state.doneBytes
            for value in state.inFlight.values { bytes = bytes.saturatingAdding(value) }
            return Snapshot(
                bytes: bytes, doneSegments: state.doneSegments, segmentCount: state.segmentCount,
                knownBytes: state.knownBytes, unknownSizes: state.unknownSizes, epoch: state.epoch, live: state.live)
        }
    }

    /// Starts over from what a run found done.
    func reset(doneBytes: Int64, doneSegments: Int, segmentCount: Int, knownBytes: Int64, unknownSizes: Int) {
        state.withLock {
            $0 = State(
                doneBytes: doneBytes, doneSegments: doneSegments, segmentCount: segmentCount, knownBytes: knownBytes,
                unknownSizes: unknownSizes, epoch: Self.newEpoch())
        }
    }

    /// A live recording's state now.
    func setLive(_ live: LiveRecordingInfo) {
        state.withLock { $0.live = live }
    }

    /// A transfer (`job`) has `bytes` of its span on disk or arriving.
    func update(job: Int, bytes: Int64) {
        state.withLock { $0.inFlight[job] = bytes }
    }

    /// A transfer ended without finishing its segment (its bytes count again when it resumes).
    func abandon(job: Int) {
        _ = state.withLock { $0.inFlight.removeValue(forKey: job) }
    }

    /// Bytes of a segment (or of a piece of a split file) are done; `completesSegment` when
    /// the segment is.
    func finish(job: Int?, bytes: Int64, completesSegment: Bool) {
        state.withLock { state in
            if let job { state.inFlight[job] = nil }
            state.doneBytes = state.doneBytes.saturatingAdding(bytes)
            if completesSegment { state.doneSegments += 1 }
        }
    }

    /// A response told the size of a segment whose size was unknown.
    func learnedSize(_ size: Int64) {
        state.withLock { state in
            guard state.unknownSizes > 0 else { return }
            state.unknownSizes -= 1
            state.knownBytes = state.knownBytes.saturatingAdding(size)
        }
    }

    /// Forgets bytes that turned out bad (an output starting over).
    func discard(bytes: Int64, segments: Int) {
        state.withLock { state in
            state.doneBytes = max(0, state.doneBytes - bytes)
            state.doneSegments = max(0, state.doneSegments - segments)
            state.epoch = Self.newEpoch()
        }
    }
}

/// Which segments of an output are done: one bit each.
struct Bitfield: Sendable, Hashable {
    private(set) var words: [UInt64]
    let count: Int
    private(set) var setCount = 0

    init(count: Int) {
        self.count = max(0, count)
        words = Array(repeating: 0, count: (self.count + 63) / 64)
    }

    subscript(index: Int) -> Bool {
        get { words[index >> 6] & (1 << UInt64(index & 63)) != 0 }
        set {
            let mask: UInt64 = 1 << UInt64(index & 63)
            let was = words[index >> 6] & mask != 0
            guard was != newValue else { return }
            if newValue { words[index >> 6] |= mask } else { words[index >> 6] &= ~mask }
            setCount += newValue ? 1 : -1
        }
    }

    var isFull: Bool { setCount == count }

    /// The indices not set, in order.
    var unset: [Int] { (0..<count).filter { !self[$0] } }
}
