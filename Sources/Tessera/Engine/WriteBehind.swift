import CTesseraSystem
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The engine's writer thread: a large body's blocks are written to its file here while the
/// engine thread receives the next ones, so receiving and writing one file use two cores at
/// once (curl, and an engine thread writing its own bytes, do one and then the other).
///
/// A transfer hands over a full write buffer (``submit(_:buffer:count:offset:end:)``) and goes
/// on receiving into another; the blocks of one transfer are written in order, so what is on
/// disk is always a prefix of what was handed over, and ``Stream/writtenEnd`` says how far.
/// A transfer's bytes count as written (its checkpoint, its `onFlush`) only once they are in the
/// file. Memory is bounded: at most ``blocksInFlightPerStream`` blocks of one transfer and
/// ``blockLimit`` blocks in all wait or are being written, and a transfer that would go beyond
/// waits for the writer (as it would have waited for its own `pwrite`); the buffer each transfer
/// is filling is its own, as its write buffer is without the writer. Everything a transfer
/// does with its stream happens on its engine thread; the writer thread only writes.
///
/// Whether a transfer writes behind is decided once, when its file is opened
/// (``takes(remaining:rateLimited:fenced:)``).
final class WriteBehind: @unchecked Sendable {
    /// One transfer's writes. Its fields are read and changed under the writer's lock.
    final class Stream: @unchecked Sendable {
        let descriptor: Int32
        /// Blocks handed over and not yet written (or skipped after a failure).
        fileprivate var inFlight = 0
        /// The span position up to which the blocks are in the file.
        fileprivate(set) var writtenEnd: Int64
        /// `errno` of the first write that failed; no later block of the stream is written.
        fileprivate(set) var failure: Int32 = 0
        /// The most blocks that were ever in flight at once (for the tests).
        fileprivate(set) var mostInFlight = 0

        init(descriptor: Int32, writtenEnd: Int64) {
            self.descriptor = descriptor
            self.writtenEnd = writtenEnd
        }
    }

    private struct Block {
        let stream: Stream
        let buffer: UnsafeMutableRawPointer
        let count: Int
        let offset: Int64
        let end: Int64
    }

    /// The size of each block (the engine's write buffers).
    let blockSize: Int
    /// Blocks that may wait or be written at once, over all transfers.
    let blockLimit: Int
    /// Blocks of one transfer that may wait or be written at once: what a kill can cost beyond
    /// the block being filled (with 256 KiB blocks, the 1 MiB a connection may lose in all).
    let blocksInFlightPerStream: Int

    private let condition = NSCondition()
    // Under `condition`.
    private var queue = FIFO<Block>()
    private var free: [UnsafeMutableRawPointer] = []
    /// Blocks handed over and not yet written, over all streams.
    private var inFlight = 0
    /// Whether the thread runs (it ends when ``stop()`` asked it to and nothing waits).
    private var running = false
    private var stopping = false
    private var blocksWritten = 0
    /// Whether the writer thread waits for a block, and how many engine threads wait for the
    /// writer: a signal is sent only to a waiting side (at full speed neither waits, and each
    /// block would otherwise cost a wake-up system call on both sides).
    private var writerWaits = false
    private var engineWaiters = 0

    /// Waits on the condition as an engine thread (under the lock).
    private func waitForWriter() {
        engineWaiters += 1
        condition.wait()
        engineWaiters -= 1
    }

    /// Transfers write behind only when at least this much of their span is still to come: a
    /// smaller body is written in a block or two, where the hand-over would cost more than it
    /// saves.
    static let minimumRemaining: Int64 = 4 * 1024 * 1024

    init(blockSize: Int = CurlTransfer.writeBlockSize, blockLimit: Int = 16, blocksInFlightPerStream: Int = 3) {
        self.blockSize = blockSize
        self.blockLimit = max(2, blockLimit)
        self.blocksInFlightPerStream = max(1, blocksInFlightPerStream)
    }

    deinit {
        for buffer in free { buffer.deallocate() }
    }

    /// Whether a transfer writes behind, decided when its file is opened: only a body of which
    /// `remaining` bytes are still to come, known and at least ``minimumRemaining``, and neither
    /// under a rate limit (its bytes come slowly; small blocks keep its crash record close) nor
    /// `fenced` (each write asks whether this process still holds the download, right before
    /// the write, on the engine thread).
    static func takes(remaining: Int64?, rateLimited: Bool, fenced: Bool) -> Bool {
        guard let remaining, !rateLimited, !fenced else { return false }
        return remaining >= minimumRemaining
    }

    /// Blocks written since the writer started (for the tests).
    var writtenBlocks: Int {
        condition.withLock { blocksWritten }
    }

    /// A buffer of ``blockSize`` bytes to fill; waits while ``blockLimit`` blocks are with the
    /// writer. (Only those: buffers transfers are filling come back only when their transfers
    /// go on, which a wait on the engine thread would keep them from.)
    func borrow() -> UnsafeMutableRawPointer {
        condition.lock()
        defer { condition.unlock() }
        while free.isEmpty, inFlight >= blockLimit { waitForWriter() }
        return free.popLast() ?? .allocate(byteCount: blockSize, alignment: 64)
    }

    /// Takes back a buffer that was borrowed and not submitted.
    func giveBack(_ buffer: UnsafeMutableRawPointer) {
        condition.withLock { keep(buffer) }
    }

    /// Keeps a buffer for the next borrower, up to ``blockLimit`` of them (under the lock).
    private func keep(_ buffer: UnsafeMutableRawPointer) {
        if free.count < blockLimit {
            free.append(buffer)
        } else {
            buffer.deallocate()
        }
        if engineWaiters > 0 { condition.broadcast() }
    }

    /// Hands `count` bytes of `buffer` (borrowed) to the writer, to go at `offset` in the
    /// stream's file and bring it to span position `end`. Waits while the stream has
    /// ``blocksInFlightPerStream`` blocks out. The buffer is the writer's from now on.
    func submit(_ stream: Stream, buffer: UnsafeMutableRawPointer, count: Int, offset: Int64, end: Int64) {
        condition.lock()
        defer { condition.unlock() }
        while stream.inFlight >= blocksInFlightPerStream || inFlight >= blockLimit { waitForWriter() }
        stream.inFlight += 1
        inFlight += 1
        stream.mostInFlight = max(stream.mostInFlight, stream.inFlight)
        queue.append(Block(stream: stream, buffer: buffer, count: count, offset: offset, end: end))
        if !running {
            // (The first block, or one that comes after a stop: a transfer the engine ends as it
            // shuts down still writes out what it received.)
            running = true
            let thread = Thread { [self] in
                tessera_name_this_thread("tessera-write")
                run()
            }
            thread.name = "tessera-write"
            thread.stackSize = 1 << 18
            thread.start()
        }
        if writerWaits { condition.broadcast() }
    }

    /// Where the stream's file is now: the span position written up to, and `errno` of a write
    /// that failed (0 for none).
    func state(of stream: Stream) -> (writtenEnd: Int64, failure: Int32) {
        condition.withLock { (stream.writtenEnd, stream.failure) }
    }

    /// Waits until every block of the stream is written (or skipped after a failure), and
    /// returns the stream's state then.
    func drain(_ stream: Stream) -> (writtenEnd: Int64, failure: Int32) {
        condition.lock()
        defer { condition.unlock() }
        while stream.inFlight > 0 { waitForWriter() }
        return (stream.writtenEnd, stream.failure)
    }

    /// Lets the thread end once the blocks handed over are written (the engine stops); a block
    /// handed over after that starts it again.
    func stop() {
        condition.withLock {
            stopping = true
            condition.broadcast()
        }
    }

    private func run() {
        condition.lock()
        while true {
            guard let block = queue.popFirst() else {
                if stopping {
                    running = false
                    break
                }
                writerWaits = true
                condition.wait()
                writerWaits = false
                continue
            }
            let skip = block.stream.failure != 0
            condition.unlock()
            let failure = skip ? 0 : Self.write(block)
            condition.lock()
            if failure != 0, block.stream.failure == 0 { block.stream.failure = failure }
            if !skip, failure == 0 {
                block.stream.writtenEnd = block.end
                blocksWritten += 1
            }
            block.stream.inFlight -= 1
            inFlight -= 1
            keep(block.buffer)
        }
        condition.unlock()
    }

    /// Writes a whole block; `errno` of the failure, or 0.
    private static func write(_ block: Block) -> Int32 {
        var done = 0
        while done < block.count {
            let result = pwrite(block.stream.descriptor, block.buffer + done, block.count - done, off_t(block.offset) + off_t(done))
            if result < 0 {
                if errno == EINTR { continue }
                return errno
            }
            if result == 0 { return EIO }
            done += result
        }
        return 0
    }
}
