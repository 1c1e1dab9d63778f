import CTesseraSystem
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The durable record of what a task has on disk, like aria2's control file: for each output,
/// which byte ranges of its file hold downloaded bytes, the size and validator of the resource,
/// the sizes learned of segments whose sizes the manifest did not give, and the validators of
/// segments in flight. After a crash (SIGKILL, not a power loss) a run reads it back and fetches
/// only the bytes never written.
///
/// **Order of writes.** Body bytes reach the file before the record claims them: ranges are
/// recorded from ``TransferRequest/onFlush``, which the engine calls after its `pwrite`; a learned
/// segment size reaches the size log before a snapshot that places anything after it. So the
/// record may lag the file (the bytes since the last commit are fetched again) but never claims
/// a byte the file does not hold.
///
/// **Files** (in the manager's work directory, created at the first commit):
/// - `<name>.a` and `<name>.b`: snapshots, written alternately, each with a sequence number and a
///   checksum; the valid one with the higher sequence wins, so a write torn by a kill loses at
///   most that one commit.
/// - `<name>.sizes`: an append-only log of learned segment sizes (one checked 24-byte entry each),
///   so a manifest of 100,000 segments is not rewritten with every commit.
///
/// Commits are cheap (one `pwrite` of a few hundred bytes) and happen at most every
/// ``commitInterval`` from the engine thread, plus whenever the run asks; nothing here blocks the
/// cooperative pool (the manager's tick commits through its blocking executor).
final class TaskJournal: Sendable {
    /// What the journal knows of one output.
    struct Output: Sendable, Hashable {
        /// The size of the output file, when known (a manifest's size, a response's length).
        var size: Int64?
        /// The version of the resource the bytes belong to (outputs that are one resource).
        var validator: ResourceValidator?
        /// The bytes of the output file (or of its partial file) that are on disk.
        var ranges = ByteRanges()
        /// Segments in flight, with the validator of the version their bytes belong to.
        var partials: [Int: ResourceValidator] = [:]
        /// Segment sizes learned from responses (for outputs whose manifest gives none).
        var sizes: [Int: Int64] = [:]

        /// Whether a single file's bytes may be resumed with ranges: they belong to a version a
        /// range can name (a strong `ETag` or `Last-Modified`).
        var rangesAllowed: Bool {
            validator.map { $0.hasStrongETag || $0.lastModifiedIsStrong } ?? false
        }

        /// The bytes of a single file a run resumes from (and counts as done): its ranges within
        /// its size, or, of a body of unannounced length, the first bytes only (asked for with an
        /// open range); none when ranges may not be asked for.
        var resumableRanges: ByteRanges {
            guard rangesAllowed else { return ByteRanges() }
            if let size { return ranges.clamped(to: 0..<max(0, size)) }
            var prefix = ByteRanges()
            let count = ranges.contiguousCount(from: 0)
            if count > 0 { prefix.insert(0..<count) }
            return prefix
        }

        /// What of segment `segment` (at `offset` in the file, `size` bytes when known) an
        /// earlier run left on disk that a request may continue from: the bytes from its start
        /// (never all of them: the request for the rest asks for at least its last byte) and the
        /// version they belong to, which a range can name; `nil` when none.
        func resumablePrefix(ofSegment segment: Int, at offset: Int64, size: Int64?) -> TransferCheckpoint? {
            guard let validator = partials[segment], validator.ifRangeValue != nil else { return nil }
            var kept = ranges.contiguousCount(from: offset)
            if let size { kept = min(kept, size - 1) }
            guard kept > 0 else { return nil }
            return TransferCheckpoint(bytesWritten: kept, validator: validator)
        }
    }

    private struct State {
        var outputs: [Int: Output] = [:]
        var sequence: UInt64 = 0
        var dirty = false
        var pendingSizes: [(output: Int, segment: Int, size: Int64)] = []
        var lastCommit: UInt64 = 0
        var snapshotFiles: [Int32] = [-1, -1]
        /// Bytes allocated to each snapshot file (written in place, never shrunk).
        var snapshotReserved: [Int64] = [0, 0]
        /// Bytes allocated to the size log beyond what it holds.
        var sizeLogReserved: Int64 = 0
        var sizeLog: Int32 = -1
        var sizeLogLength: Int64 = 0
        var closed = false
        var failed: DownloadError?
        /// Whether files of the journal may exist (read back from disk, or written).
        var mayHaveFiles = false
    }

    /// The journal's files, without their suffixes.
    let basePath: String
    /// The least time between two commits made from the engine thread.
    let commitInterval: UInt64
    /// Whether the journal may be written now (a fleet's lease, see ``TaskWriteFence``): a
    /// refused commit stays pending for the next one.
    let permitsWrite: @Sendable () -> Bool
    private let state: Locked<State>

    /// A journal at `basePath` (nothing is created until the first commit), starting from
    /// `outputs` (what ``load(from:)`` read back, or nothing).
    init(
        basePath: String, outputs: [Int: Output] = [:], commitInterval: Duration = .milliseconds(5), mayExist: Bool = true,
        permitsWrite: @escaping @Sendable () -> Bool = { true }
    ) {
        self.basePath = basePath
        self.permitsWrite = permitsWrite
        self.commitInterval = UInt64(max(0, commitInterval.nanosecondsValue))
        var initial = State()
        initial.outputs = outputs
        initial.mayHaveFiles = mayExist
        state = Locked(initial)
    }

    deinit {
        state.withLock { Self.closeFiles(&$0) }
    }

    /// The journal's view of one output.
    func output(_ index: Int) -> Output {
        state.withLock { $0.outputs[index] ?? Output() }
    }

    /// Changes what is recorded of `index`; written at the next commit.
    func update(_ index: Int, _ body: (inout Output) -> Void) {
        state.withLock { state in
            body(&state.outputs[index, default: Output()])
            state.dirty = true
        }
    }

    /// Records bytes now on disk and commits when the interval has passed (engine thread).
    func recordWritten(_ index: Int, _ range: Range<Int64>) {
        state.withLock { state in
            state.outputs[index, default: Output()].ranges.insert(range)
            state.dirty = true
            let now = MonotonicClock.nanoseconds()
            if now &- state.lastCommit >= commitInterval { commitLocked(&state, now: now) }
        }
    }

    /// Records a segment size learned from a response; it reaches the size log before any
    /// snapshot that could depend on it.
    func recordSize(_ index: Int, segment: Int, size: Int64) {
        state.withLock { state in
            guard state.outputs[index, default: Output()].sizes[segment] != size else { return }
            state.outputs[index, default: Output()].sizes[segment] = size
            state.pendingSizes.append((index, segment, size))
            state.dirty = true
        }
    }

    /// Writes what changed since the last commit. Blocking file work: call it from the engine
    /// thread or a blocking executor.
    func commit() {
        state.withLock { state in
            guard state.dirty else { return }
            commitLocked(&state, now: MonotonicClock.nanoseconds())
        }
    }

    /// Whether anything waits to be committed.
    var isDirty: Bool { state.withLock { $0.dirty } }

    /// Whether ``close()`` has anything to do (a commit to write, files to close).
    var needsClosing: Bool {
        state.withLock { state in !state.closed && (state.dirty || state.sizeLog >= 0 || state.snapshotFiles.contains { $0 >= 0 }) }
    }

    /// Whether ``remove()`` has files to delete.
    var mayHaveFiles: Bool { state.withLock { $0.mayHaveFiles } }

    /// The first write failure, if a commit could not be written (the download goes on; only
    /// resuming after a crash loses what the record could not keep).
    var failure: DownloadError? { state.withLock { $0.failed } }

    /// Closes the files (the run ended); the record stays for the next run.
    func close() {
        state.withLock { state in
            if state.dirty { commitLocked(&state, now: MonotonicClock.nanoseconds()) }
            Self.closeFiles(&state)
            state.closed = true
        }
    }

    /// Deletes the record (the task completed, or starts over). Blocking file work.
    func remove() {
        let files = state.withLock { state -> Bool in
            defer {
                state.mayHaveFiles = false
            }
            Self.closeFiles(&state)
            state.outputs.removeAll()
            state.pendingSizes.removeAll()
            state.dirty = false
            state.closed = true
            return state.mayHaveFiles
        }
        if files, permitsWrite() { Self.remove(basePath: basePath) }
    }

    /// Deletes the record's files at `basePath`.
    static func remove(basePath: String) {
        for suffix in [".a", ".b", ".sizes"] { unlink(basePath + suffix) }
    }

    // MARK: - Writing

    private func commitLocked(_ state: inout State, now: UInt64) {
        guard !state.closed else { return }
        state.lastCommit = now
        // Refused (the lease may be lost): kept dirty, written once permitted again.
        guard permitsWrite() else { return }
        state.mayHaveFiles = true
        do throws(DownloadError) {
            if !state.pendingSizes.isEmpty {
                try appendSizes(&state)
            }
            state.sequence += 1
            let slot = Int(state.sequence % 2)
            let bytes = Self.encode(state.outputs, sequence: state.sequence)
            // Both snapshot files exist, with room, from the first commit on: a disk that fills
            // up later (the downloads' own bytes) still takes every commit, written in place.
            // (Bytes after a snapshot are ignored when it is read, so files are never cut.)
            for other in [1 - slot, slot] where state.snapshotFiles[other] < 0 {
                _ = try descriptorFor(slot: other, &state)
            }
            let descriptor = try descriptorFor(slot: slot, &state)
            reserve(Int64(bytes.count) * 2, in: descriptor, reserved: &state.snapshotReserved[slot])
            try Self.writeAll(bytes, to: descriptor, at: 0, path: path(slot: slot))
            state.dirty = false
            state.failed = nil
        } catch {
            // Kept dirty: the next commit tries again (a full disk may have room by then).
            state.failed = error
        }
    }

    private func appendSizes(_ state: inout State) throws(DownloadError) {
        if state.sizeLog < 0 {
            var descriptor = open(basePath + ".sizes", O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
            if descriptor < 0, errno == ENOENT {
                try FileOperations.createParent(of: basePath)
                descriptor = open(basePath + ".sizes", O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
            }
            guard descriptor >= 0 else { throw FileOperations.systemError(errno, "could not open \(basePath).sizes") }
            state.sizeLog = descriptor
            var info = stat()
            fstat(descriptor, &info)
            // A torn last entry (a kill mid-append) is overwritten.
            state.sizeLogLength = Int64(info.st_size) / Int64(Self.sizeEntryLength) * Int64(Self.sizeEntryLength)
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(state.pendingSizes.count * Self.sizeEntryLength)
        for entry in state.pendingSizes {
            var writer = ByteWriter()
            writer.append(UInt32(truncatingIfNeeded: entry.output))
            writer.append(UInt64(truncatingIfNeeded: entry.segment))
            writer.append(UInt64(bitPattern: entry.size))
            writer.append(UInt32(truncatingIfNeeded: FNV.hash(writer.bytes)))
            bytes += writer.bytes
        }
        if state.sizeLogLength + Int64(bytes.count) > state.sizeLogReserved {
            // Room ahead of the log (the file's length stays what it holds), while there is room.
            let wanted = max(state.sizeLogLength + Int64(bytes.count) * 2, state.sizeLogLength + Self.reserveStep)
            if tessera_fallocate_keep_size(state.sizeLog, state.sizeLogLength, wanted - state.sizeLogLength) == 0 {
                state.sizeLogReserved = wanted
            }
        }
        try Self.writeAll(bytes, to: state.sizeLog, at: state.sizeLogLength, path: basePath + ".sizes")
        state.sizeLogLength += Int64(bytes.count)
        state.pendingSizes.removeAll(keepingCapacity: true)
    }

    private func path(slot: Int) -> String { basePath + (slot == 0 ? ".a" : ".b") }

    private func descriptorFor(slot: Int, _ state: inout State) throws(DownloadError) -> Int32 {
        if state.snapshotFiles[slot] >= 0 { return state.snapshotFiles[slot] }
        let descriptor = open(path(slot: slot), O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
        if descriptor < 0, errno == ENOENT {
            try FileOperations.createParent(of: path(slot: slot))
            return try descriptorFor(slot: slot, &state)
        }
        guard descriptor >= 0 else { throw FileOperations.systemError(errno, "could not open \(path(slot: slot))") }
        state.snapshotFiles[slot] = descriptor
        var info = stat()
        state.snapshotReserved[slot] = fstat(descriptor, &info) == 0 ? Int64(info.st_size) : 0
        reserve(Self.reserveStep, in: descriptor, reserved: &state.snapshotReserved[slot])
        return descriptor
    }

    /// Space allocated ahead in a journal file: what the journal writes later needs no new
    /// blocks (a full disk cannot refuse it).
    static let reserveStep: Int64 = 16 << 10

    /// Makes `descriptor`'s file at least `bytes` long, allocated (best effort: a disk that is
    /// full, or a file system that cannot, leaves it as it is).
    private func reserve(_ bytes: Int64, in descriptor: Int32, reserved: inout Int64) {
        guard bytes > reserved else { return }
        let wanted = max(bytes, reserved + Self.reserveStep)
        if tessera_fallocate(descriptor, 0, wanted) == 0 { reserved = wanted }
    }

    private static func closeFiles(_ state: inout State) {
        for descriptor in state.snapshotFiles + [state.sizeLog] where descriptor >= 0 { Glibc.close(descriptor) }
        state.snapshotFiles = [-1, -1]
        state.sizeLog = -1
    }

    private static func writeAll(_ bytes: [UInt8], to descriptor: Int32, at offset: Int64, path: String) throws(DownloadError) {
        var done = 0
        while done < bytes.count {
            let result = bytes.withUnsafeBytes { pwrite(descriptor, $0.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done)) }
            if result < 0, errno == EINTR { continue }
            guard result > 0 else { throw FileOperations.systemError(errno, "could not write \(path)") }
            done += result
        }
    }

    // MARK: - Reading

    /// What the record at `basePath` holds, or nothing when there is no valid record. Blocking
    /// file work.
    static func load(from basePath: String) -> [Int: Output] {
        var best: (sequence: UInt64, outputs: [Int: Output])?
        for suffix in [".a", ".b"] {
            guard let bytes = FileOperations.contents(basePath + suffix), let decoded = decode(bytes) else { continue }
            if best == nil || decoded.sequence > best!.sequence { best = decoded }
        }
        guard var outputs = best?.outputs else { return [:] }
        if let log = FileOperations.contents(basePath + ".sizes") {
            var offset = 0
            while offset + sizeEntryLength <= log.count {
                let entry = Array(log[offset..<offset + sizeEntryLength])
                offset += sizeEntryLength
                var reader = ByteReader(entry)
                guard let output = reader.uint32(), let segment = reader.uint64(), let size = reader.uint64(),
                    let check = reader.uint32(), check == UInt32(truncatingIfNeeded: FNV.hash(entry[0..<20])),
                    let index = Int(exactly: output), let segmentIndex = Int(exactly: segment), Int64(bitPattern: size) >= 0
                else { break }
                outputs[index, default: Output()].sizes[segmentIndex] = Int64(bitPattern: size)
            }
        }
        return outputs
    }

    static let sizeEntryLength = 24
    private static let magic: [UInt8] = Array("TSJ1".utf8)

    static func encode(_ outputs: [Int: Output], sequence: UInt64) -> [UInt8] {
        var writer = ByteWriter()
        writer.bytes += magic
        writer.append(sequence)
        writer.append(UInt32(outputs.count))
        for (index, output) in outputs.sorted(by: { $0.key < $1.key }) {
            writer.append(UInt32(truncatingIfNeeded: index))
            writer.append(UInt64(bitPattern: output.size ?? -1))
            writer.append(output.validator)
            writer.append(UInt32(output.ranges.ranges.count))
            for range in output.ranges.ranges {
                writer.append(UInt64(bitPattern: range.lowerBound))
                writer.append(UInt64(bitPattern: range.upperBound))
            }
            writer.append(UInt32(output.partials.count))
            for (segment, validator) in output.partials.sorted(by: { $0.key < $1.key }) {
                writer.append(UInt64(truncatingIfNeeded: segment))
                writer.append(validator)
            }
        }
        writer.append(FNV.hash(writer.bytes))
        return writer.bytes
    }

    static func decode(_ bytes: [UInt8]) -> (sequence: UInt64, outputs: [Int: Output])? {
        guard bytes.count >= 24, Array(bytes[0..<4]) == magic else { return nil }
        var reader = ByteReader(bytes)
        reader.skip(4)
        guard let sequence = reader.uint64(), let count = reader.uint32() else { return nil }
        var outputs: [Int: Output] = [:]
        for _ in 0..<count {
            guard let index = reader.uint32(), let size = reader.uint64(), let validator = reader.validator(),
                let rangeCount = reader.uint32()
            else { return nil }
            var output = Output()
            output.size = Int64(bitPattern: size) >= 0 ? Int64(bitPattern: size) : nil
            output.validator = validator
            for _ in 0..<rangeCount {
                guard let lower = reader.uint64(), let upper = reader.uint64() else { return nil }
                let low = Int64(bitPattern: lower), high = Int64(bitPattern: upper)
                guard low >= 0, high >= low else { return nil }
                output.ranges.insert(low..<high)
            }
            guard let partialCount = reader.uint32() else { return nil }
            for _ in 0..<partialCount {
                guard let segment = reader.uint64(), let validator = reader.validator(), let known = validator,
                    let segmentIndex = Int(exactly: segment)
                else { return nil }
                output.partials[segmentIndex] = known
            }
            outputs[Int(index)] = output
        }
        let payloadEnd = reader.offset
        guard let check = reader.uint64(), check == FNV.hash(bytes[0..<payloadEnd]) else { return nil }
        return (sequence, outputs)
    }
}

/// FNV-1a, 64 bits: a checksum against torn writes, not against tampering.
enum FNV {
    /// The hash of `bytes`, or of what was hashed into `continuing` followed by `bytes`.
    static func hash(_ bytes: some Sequence<UInt8>, continuing: UInt64 = 0xcbf2_9ce4_8422_2325) -> UInt64 {
        // (Bytes in one block, as a native string's are, are read as a buffer: a few
        // instructions a byte, not an iterator's step each.)
        bytes.withContiguousStorageIfAvailable { fold($0, into: continuing) } ?? fold(bytes, into: continuing)
    }

    private static func fold(_ bytes: some Sequence<UInt8>, into hash: UInt64) -> UInt64 {
        bytes.reduce(hash) { ($0 ^ UInt64($1)) &* 0x100_0000_01b3 }
    }
}

/// Little-endian encoding of the journal's fields.
struct ByteWriter {
    var bytes: [UInt8] = []

    mutating func append(_ value: UInt32) { withUnsafeBytes(of: value.littleEndian) { bytes += $0 } }
    mutating func append(_ value: UInt64) { withUnsafeBytes(of: value.littleEndian) { bytes += $0 } }

    mutating func append(_ text: String?) {
        guard let text else {
            append(UInt32.max)
            return
        }
        let utf8 = Array(text.utf8.prefix(4096))
        append(UInt32(utf8.count))
        bytes += utf8
    }

    mutating func append(_ validator: ResourceValidator?) {
        guard let validator else {
            bytes.append(0)
            return
        }
        bytes.append(validator.lastModifiedIsStrong ? 2 : 1)
        append(validator.etag)
        append(validator.lastModified)
    }
}

/// Reads what ``ByteWriter`` wrote; every read checks the length left.
struct ByteReader {
    let bytes: [UInt8]
    private(set) var offset = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    mutating func skip(_ count: Int) { offset += count }

    mutating func uint32() -> UInt32? {
        guard offset + 4 <= bytes.count else { return nil }
        var value: UInt32 = 0
        for index in 0..<4 { value |= UInt32(bytes[offset + index]) << (8 * index) }
        offset += 4
        return value
    }

    mutating func uint64() -> UInt64? {
        guard offset + 8 <= bytes.count else { return nil }
        var value: UInt64 = 0
        for index in 0..<8 { value |= UInt64(bytes[offset + index]) << (8 * index) }
        offset += 8
        return value
    }

    mutating func string() -> String?? {
        guard let length = uint32() else { return nil }
        if length == UInt32.max { return .some(nil) }
        guard length <= 4096, offset + Int(length) <= bytes.count else { return nil }
        defer { offset += Int(length) }
        return .some(String(decoding: bytes[offset..<offset + Int(length)], as: UTF8.self))
    }

    /// `.some(nil)` for no validator, `nil` for a damaged record.
    mutating func validator() -> ResourceValidator?? {
        guard offset < bytes.count else { return nil }
        let kind = bytes[offset]
        offset += 1
        if kind == 0 { return .some(nil) }
        guard kind <= 2, let etag = string(), let lastModified = string() else { return nil }
        return .some(ResourceValidator(etag: etag, lastModified: lastModified, lastModifiedIsStrong: kind == 2))
    }
}
