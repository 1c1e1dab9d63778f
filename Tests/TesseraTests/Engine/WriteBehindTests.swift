import Foundation
import Testing
@testable import Tessera
import TesseraTesting

#if canImport(Glibc)
import Glibc
#endif

/// The engine's writer thread (``WriteBehind``): blocks in order, within their limits, a failure
/// kept; and through the engine, a large body written behind whole, its flushes only of bytes in
/// the file, a full disk reported as such.
@Suite(.timeLimit(.minutes(2))) struct WriteBehindTests {
    private static let twoCores = ProcessInfo.processInfo.activeProcessorCount > 1

    /// Hands `count` blocks of `size` bytes to `writer` for `stream`, block `i` filled with
    /// `i % 251`, starting at span (and file) position `start`.
    private static func submit(
        _ count: Int, of size: Int, to writer: WriteBehind, _ stream: WriteBehind.Stream, from start: Int64 = 0,
        check: (Int64) -> Void = { _ in }
    ) {
        var end = start
        for index in 0..<count {
            let buffer = writer.borrow()
            buffer.initializeMemory(as: UInt8.self, repeating: UInt8(index % 251), count: size)
            writer.submit(stream, buffer: buffer, count: size, offset: end, end: end + Int64(size))
            end += Int64(size)
            check(end)
        }
    }

    @Test func blocksOfAStreamAreWrittenInOrderWithinTheirLimits() throws {
        let directory = TemporaryDirectory()
        defer { directory.cleanUp() }
        let path = directory.file("behind.bin")
        let descriptor = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        try #require(descriptor >= 0)
        defer { close(descriptor) }
        let writer = WriteBehind(blockSize: 4096, blockLimit: 4, blocksInFlightPerStream: 2)
        defer { writer.stop() }
        let stream = WriteBehind.Stream(descriptor: descriptor, writtenEnd: 0)
        var seen: Int64 = 0
        Self.submit(50, of: 4096, to: writer, stream) { handedOver in
            let state = writer.state(of: stream)
            // What the writer says is written is a prefix of what it was given, and never goes back.
            #expect(state.writtenEnd >= seen && state.writtenEnd <= handedOver && state.failure == 0)
            seen = state.writtenEnd
        }
        let state = writer.drain(stream)
        #expect(state.writtenEnd == 50 * 4096)
        #expect(state.failure == 0)
        #expect(stream.mostInFlight >= 1 && stream.mostInFlight <= 2, "at most two blocks of the stream out at once")
        #expect(writer.writtenBlocks == 50)
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        #expect(bytes.count == 50 * 4096)
        #expect((0..<50).allSatisfy { index in bytes[index * 4096..<(index + 1) * 4096].allSatisfy { $0 == UInt8(index % 251) } })

        // Blocks handed over after a stop (a transfer ending as its engine shuts down) are
        // still written: the thread starts again for them.
        writer.stop()
        Self.submit(3, of: 4096, to: writer, stream, from: 50 * 4096)
        #expect(writer.drain(stream) == (writtenEnd: 53 * 4096, failure: 0))
        #expect(FileOperations.size(path) == Int64(53 * 4096))
    }

    @Test func aFailedWriteIsKeptAndTheBlocksAfterItAreNotWritten() throws {
        // A descriptor open for reading only: every write fails with EBADF.
        let descriptor = open("/dev/null", O_RDONLY | O_CLOEXEC)
        try #require(descriptor >= 0)
        defer { close(descriptor) }
        let writer = WriteBehind(blockSize: 1024, blockLimit: 4, blocksInFlightPerStream: 3)
        defer { writer.stop() }
        let stream = WriteBehind.Stream(descriptor: descriptor, writtenEnd: 100)
        Self.submit(5, of: 1024, to: writer, stream, from: 100)
        let state = writer.drain(stream)
        #expect(state.failure == EBADF)
        #expect(state.writtenEnd == 100, "nothing after the kept bytes counts as written")
        #expect(writer.writtenBlocks == 0)
    }

    @Test func onlyLargeBodiesWithoutARateLimitOrAFenceAreWrittenBehind() {
        let large = WriteBehind.minimumRemaining
        #expect(WriteBehind.takes(remaining: large, rateLimited: false, fenced: false))
        #expect(!WriteBehind.takes(remaining: large - 1, rateLimited: false, fenced: false), "a small body is written by its thread")
        #expect(!WriteBehind.takes(remaining: nil, rateLimited: false, fenced: false), "a body of unknown length too")
        #expect(!WriteBehind.takes(remaining: large, rateLimited: true, fenced: false), "a rate-limited one too")
        #expect(!WriteBehind.takes(remaining: large, rateLimited: false, fenced: true), "a fenced one asks before each write")
    }

    /// A large body goes through the writer thread, whole; each flush the transfer reports is of
    /// bytes already in the file. A small one, and any body of an engine without the writer, is
    /// written by the engine thread.
    @Test(.enabled(if: twoCores)) func aLargeBodyIsWrittenBehindAndWhole() async throws {
        try await withLoopbackOrigin { origin in
            let engine = try CurlEngine(configuration: .forTests())
            let directory = TemporaryDirectory()
            defer { directory.cleanUp() }
            let path = "/bytes/9000000/behind.bin"
            let file = directory.file("behind.bin")
            var request = TransferRequest.download(origin.url(path), to: file)
            let flushes = Locked<[Int64]>([])
            request.onFlush = { onDisk in
                // (On the engine thread, as the transfer's other hooks.)
                let size = FileOperations.size(file) ?? -1
                flushes.withLock { $0.append(size >= onDisk ? onDisk : -onDisk) }
            }
            let result = try await engine.transfer(request)
            #expect(result.bytesWritten == 9_000_000)
            #expect(await origin.content(at: path).verifyFile(atPath: file, size: 9_000_000))
            let seen = flushes.withLock { $0 }
            #expect(seen.allSatisfy { $0 >= 0 }, "a flush reported bytes the file did not hold yet: \(seen.filter { $0 < 0 })")
            #expect(seen == seen.sorted() && seen.last == 9_000_000)
            let behind = try #require(engine.writtenBehindBlocks)
            #expect(behind >= 9_000_000 / CurlTransfer.writeBlockSize)

            let small = "/bytes/1000000/small.bin"
            _ = try await engine.transfer(.download(origin.url(small), to: directory.file("small.bin")))
            #expect(await origin.content(at: small).verifyFile(atPath: directory.file("small.bin"), size: 1_000_000))
            #expect(engine.writtenBehindBlocks == behind, "a small body is not handed over")
            await engine.shutdown()

            var configuration = CurlEngine.Configuration.forTests()
            configuration.writesBehind = false
            let plain = try CurlEngine(configuration: configuration)
            _ = try await plain.transfer(.download(origin.url(path), to: directory.file("plain.bin")))
            #expect(await origin.content(at: path).verifyFile(atPath: directory.file("plain.bin"), size: 9_000_000))
            #expect(plain.writtenBehindBlocks == nil)
            await plain.shutdown()
        }
    }

    @Test(.enabled(if: twoCores)) func aFullDiskBehindIsReportedAsSuch() async throws {
        try await withLoopbackOrigin { origin in
            let engine = try CurlEngine(configuration: .forTests())
            // Every write to /dev/full fails with ENOSPC.
            let request = TransferRequest(
                url: origin.url("/bytes/6000000/full"), destination: .file(path: "/dev/full", offset: 0, ownsTail: false))
            do {
                _ = try await engine.transfer(request)
                Issue.record("a write to /dev/full succeeded")
            } catch let error as DownloadError {
                #expect(error.code == .diskFull)
                #expect(error.systemErrno == ENOSPC)
                #expect(error.checkpoint?.bytesWritten ?? 0 == 0)
            }
            #expect(engine.writtenBehindBlocks == 0)
            await engine.shutdown()
        }
    }
}
