import Foundation

/// One output during a run: where each segment's bytes go, which segments are done, and how the
/// file is finished. Every byte is written once, into the output's partial file, at its place:
///
/// - **single**: one segment (a plain file, a part): written from offset 0; when the server
///   serves ranges of a large resource, the run splits it over more connections (``SplitPlan``).
/// - **ordered**: segments one after the other (DASH, HLS). A segment's place is the sum of the
///   sizes before it; sizes come from the manifest or from each response's `Content-Length`, so
///   almost every segment is written straight to its place as its body arrives. One whose place
///   is not known yet (a size before it is still unknown) goes to a stash file and is copied into
///   place once it is: the rare case, and the only second copy.
/// - **pieces**: segments at known offsets (Metalink pieces).
/// - **separate**: each segment a file of its own.
/// - **cacheOnly**: segments go to the segment cache, no output is written.
///
/// Safe to use from the run and from the engine thread's hooks.
final class OutputWriter: Sendable {
    enum Kind: Sendable, Equatable {
        case single, ordered, pieces, separate, cacheOnly
    }

    /// A finished segment waiting for its place (ordered outputs).
    enum Parked: Sendable {
        case memory([UInt8])
        /// A file; `owned` when it may be deleted once copied (a stash, not a cache entry).
        case file(path: String, owned: Bool)
    }

    /// Where a segment's bytes go, decided when its response is known.
    enum Placement: Sendable, Equatable {
        /// Into the output's partial file at this offset.
        case output(offset: Int64)
        /// Into its stash file (its place is not known yet).
        case stash
        /// The response contradicts what is known of the segment: the output starts over.
        case conflict(DownloadError)
    }

    private struct State {
        var finalPath: String
        var done: Bitfield
        /// Ordered outputs: each segment's size, -1 while unknown.
        var sizes: [Int64]
        /// Ordered outputs: the offsets of the segments whose predecessors' sizes are all known.
        var offsets: [Int64] = [0]
        var parked: [Int: Parked] = [:]
        /// Single outputs: the resource's length once known, and its version.
        var length: Int64?
        var validator: ResourceValidator?
        /// Whether the journal records this output's bytes.
        var journaled: Bool
        /// Single outputs named by the server: the name its first response proposed.
        var proposal: String?
        /// Single outputs: how the output was finished as its transfer ended, if it was.
        var earlyFinish: EarlyFinish?
    }

    /// How a single output was finished on the engine thread as its only transfer ended
    /// (``TaskRun/finishEarly(_:piece:_:)``), for the run's loop to take up when its plan
    /// finalizes the output.
    enum EarlyFinish: Sendable {
        /// Moved into place.
        case moved
        /// A file is at its place: it needs another name.
        case occupied
        /// It could not be finished.
        case failed(DownloadError)

        /// The event the blocking executor would have posted for the same end.
        func event(output: Int) -> RunEvent {
            switch self {
            case .moved: .finalized(output: output, nil)
            case .occupied: .needsAnotherName(output: output)
            case .failed(let error): .finalized(output: output, error)
            }
        }
    }

    let index: Int
    let output: DownloadOutput
    let kind: Kind
    /// The file the bytes are written to (``kind`` single, ordered, pieces).
    let partPath: String
    /// Whether the name comes from the server's answer (the partial file is in the work directory).
    let namedByResponse: Bool
    let journal: TaskJournal
    private let stashBase: @Sendable (Int) -> String
    private let state: Locked<State>

    init(
        index: Int, output: DownloadOutput, kind: Kind, finalPath: String, partPath: String, namedByResponse: Bool,
        journal: TaskJournal, stashPath: @escaping @Sendable (Int) -> String
    ) {
        self.index = index
        self.output = output
        self.kind = kind
        self.partPath = partPath
        self.namedByResponse = namedByResponse
        self.journal = journal
        self.stashBase = stashPath
        let count = output.segments.count
        var initial = State(
            finalPath: finalPath, done: Bitfield(count: count), sizes: [],
            journaled: kind == .ordered || kind == .pieces)
        if kind == .ordered {
            initial.sizes = Self.sizes(of: output.segments)
            Self.extendOffsets(&initial)
        }
        state = Locked(initial)
    }

    /// Each segment's size when it is known before its bytes come (-1: not).
    private static func sizes(of segments: SegmentList) -> [Int64] {
        segments.indices.map { segments.isEncrypted(at: $0) ? -1 : (segments.knownSize(at: $0) ?? -1) }
    }

    var finalPath: String { state.withLock { $0.finalPath } }

    func rename(to path: String) { state.withLock { $0.finalPath = path } }

    func stashPath(_ segment: Int) -> String { stashBase(segment) }

    var segmentCount: Int { output.segments.count }

    func isDone(_ segment: Int) -> Bool { state.withLock { $0.done[segment] } }

    var isComplete: Bool { state.withLock { $0.done.isFull } }

    var doneCount: Int { state.withLock { $0.done.setCount } }

    /// The segments not done, in order.
    var pending: [Int] { state.withLock { $0.done.unset } }

    // MARK: - Restoring from the journal

    /// Takes what the journal recorded: learned sizes, and for every kind but separate files and
    /// the cache, the segments whose bytes are all on disk. Returns the bytes found done.
    func restore(from record: TaskJournal.Output) -> Int64 {
        state.withLock { state in
            var bytes: Int64 = 0
            switch kind {
            case .ordered:
                for (segment, size) in record.sizes where segment < state.sizes.count && state.sizes[segment] < 0 {
                    state.sizes[segment] = size
                }
                Self.extendOffsets(&state)
                for segment in 0..<(state.offsets.count - 1) {
                    let range = state.offsets[segment]..<state.offsets[segment + 1]
                    if record.ranges.contains(range) {
                        state.done[segment] = true
                        bytes += range.upperBound - range.lowerBound
                    }
                }
            case .pieces:
                for (segment, piece) in output.segments.enumerated() {
                    guard let offset = piece.pieceOffset, let size = piece.knownSize else { continue }
                    if record.ranges.contains(offset..<offset + size) {
                        state.done[segment] = true
                        bytes += size
                    }
                }
            case .single:
                state.length = record.size
                state.validator = record.validator
                // (A body of unannounced length is journaled too: with its version, its bytes
                // can be resumed with an open range, as `curl -C -` does.)
                state.journaled = record.size != nil || record.validator != nil
                if let length = record.size, record.ranges.contains(0..<length) {
                    state.done[0] = true
                    bytes = length
                } else if state.journaled {
                    // Stopped half-way: what is resumed counts as done from the start.
                    bytes = record.resumableRanges.count
                }
            case .separate, .cacheOnly:
                break
            }
            return bytes
        }
    }

    /// Marks `segment` done or not (restored, verified, reset).
    func setDone(_ segment: Int, _ done: Bool = true) {
        state.withLock { $0.done[segment] = done }
    }

    // MARK: - Ordered outputs

    /// The offset of `segment` when the sizes before it are known.
    func offset(of segment: Int) -> Int64? {
        state.withLock { state in segment < state.offsets.count ? state.offsets[segment] : nil }
    }

    /// The size of `segment`, when known.
    func size(of segment: Int) -> Int64? {
        state.withLock { state in
            guard segment < state.sizes.count, state.sizes[segment] >= 0 else { return nil }
            return state.sizes[segment]
        }
    }

    /// Called on the engine thread when `segment`'s response is known: records the length it
    /// announces and says where its body goes. `length` is `nil` when the response does not
    /// tell it (the size is then learned at the end).
    func placement(of segment: Int, length: Int64?, progress: TaskProgress) -> Placement {
        state.withLock { state in
            if let length, let conflict = learn(segment, length, progress: progress, in: &state) { return .conflict(conflict) }
            return segment < state.offsets.count ? .output(offset: state.offsets[segment]) : .stash
        }
    }

    /// A segment's size, learned when it is complete (a stashed or decrypted segment). Returns
    /// a conflict error when it contradicts a size known before.
    func learnSize(of segment: Int, _ size: Int64, progress: TaskProgress) -> DownloadError? {
        state.withLock { state in learn(segment, size, progress: progress, in: &state) }
    }

    /// Records a segment's size (the journal's size log first), or the error when it
    /// contradicts the one known: the resource changed under the output.
    private func learn(_ segment: Int, _ size: Int64, progress: TaskProgress, in state: inout State) -> DownloadError? {
        let known = state.sizes[segment]
        guard known < 0 else {
            return known == size ? nil : DownloadError(
                .contentChanged, "segment \(segment + 1) of \"\(output.name)\" now has \(size) bytes, it had \(known)")
        }
        state.sizes[segment] = size
        journal.recordSize(index, segment: segment, size: size)
        progress.learnedSize(size)
        Self.extendOffsets(&state)
        return nil
    }

    /// Whether finished segments wait for their places.
    var hasParked: Bool { state.withLock { !$0.parked.isEmpty } }

    /// Keeps a finished segment until its place is known.
    func park(_ segment: Int, _ parked: Parked) {
        state.withLock { $0.parked[segment] = parked }
    }

    /// The parked segments whose places are now known, with their offsets; they are no longer
    /// parked (the caller writes them and marks them done).
    func takePlaceable() -> [(segment: Int, parked: Parked, offset: Int64)] {
        state.withLock { state in
            var ready: [(Int, Parked, Int64)] = []
            for (segment, parked) in state.parked where segment < state.offsets.count {
                ready.append((segment, parked, state.offsets[segment]))
            }
            for (segment, _, _) in ready { state.parked[segment] = nil }
            return ready.sorted { $0.0 < $1.0 }
        }
    }

    /// Parked segments that were never placed (the run ended): their stash files go.
    func dropParked() -> [Parked] {
        state.withLock { state in
            defer { state.parked.removeAll() }
            return Array(state.parked.values)
        }
    }

    /// The output's size once every segment's size is known.
    var orderedLength: Int64? {
        state.withLock { state in state.offsets.count == state.sizes.count + 1 ? state.offsets.last : nil }
    }

    private static func extendOffsets(_ state: inout State) {
        while state.offsets.count <= state.sizes.count, state.sizes[state.offsets.count - 1] >= 0 {
            let last = state.offsets[state.offsets.count - 1]
            let (next, overflow) = last.addingReportingOverflow(state.sizes[state.offsets.count - 1])
            guard !overflow else { return }
            state.offsets.append(next)
        }
    }

    // MARK: - Single outputs

    /// What a single output knows of its resource.
    var resource: (length: Int64?, validator: ResourceValidator?) {
        state.withLock { ($0.length, $0.validator) }
    }

    /// Records the resource's length and version (from the first response); the journal keeps
    /// them once the output is journaled.
    func learnResource(length: Int64?, validator: ResourceValidator?) {
        let journaled = state.withLock { state in
            state.length = length
            state.validator = validator
            return state.journaled
        }
        guard journaled else { return }
        journal.update(index) { record in
            record.size = length
            record.validator = validator
        }
    }

    /// Whether the journal records this output's bytes.
    var isJournaled: Bool { state.withLock { $0.journaled } }

    /// The name the server proposed for a single output named by its response, once its first
    /// response is in.
    var proposal: String? {
        get { state.withLock { $0.proposal } }
        set { state.withLock { $0.proposal = newValue } }
    }

    /// How the output was finished as its transfer ended, if it was (left for the loop).
    var earlyFinish: EarlyFinish? { state.withLock { $0.earlyFinish } }

    /// Records how the output was finished as its transfer ended.
    func setEarlyFinish(_ finish: EarlyFinish) { state.withLock { $0.earlyFinish = finish } }

    /// How the output was finished as its transfer ended, if it was (told once).
    func takeEarlyFinish() -> EarlyFinish? {
        state.withLock { state in
            defer { state.earlyFinish = nil }
            return state.earlyFinish
        }
    }

    /// From now on the journal records this output's bytes (a large single file, or any file
    /// whose download stops half-way), starting with its length and version.
    func startJournaling() {
        let (already, length, validator) = state.withLock { state in
            defer { state.journaled = true }
            return (state.journaled, state.length, state.validator)
        }
        guard !already else { return }
        journal.update(index) { record in
            record.size = length
            record.validator = validator
        }
    }

    /// Bytes of the output now on disk (from a transfer's flush hook).
    func written(_ range: Range<Int64>) {
        guard isJournaled else { return }
        journal.recordWritten(index, range)
    }

    /// Forgets everything of the output (it starts over).
    func reset() {
        state.withLock { state in
            state.done = Bitfield(count: output.segments.count)
            state.parked.removeAll()
            if kind == .ordered {
                state.sizes = Self.sizes(of: output.segments)
                state.offsets = [0]
                Self.extendOffsets(&state)
            }
            state.length = nil
            state.validator = nil
        }
        journal.update(index) { $0 = TaskJournal.Output() }
    }
}

extension FileOperations {
    /// Writes a parked segment at `offset` of the file at `path`; a stash it owns is deleted
    /// once copied. Returns the segment's size.
    static func write(_ parked: OutputWriter.Parked, to path: String, at offset: Int64) throws(DownloadError) -> Int64 {
        switch parked {
        case .memory(let bytes):
            try write(bytes, to: path, at: offset)
            return Int64(bytes.count)
        case .file(let source, let owned):
            let size = try copy(source, into: path, at: offset)
            if owned { remove(source) }
            return size
        }
    }
}
