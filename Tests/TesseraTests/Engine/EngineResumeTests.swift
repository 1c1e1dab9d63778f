import Foundation
import Testing
import Tessera
import TesseraTesting

/// Resume semantics: `Range` + `If-Range` from a checkpoint, clean restarts, never a splice.
@Suite(.timeLimit(.minutes(2))) struct EngineResumeTests {
    let directory = TemporaryDirectory("resume")
    let engine: CurlEngine

    init() throws {
        engine = try CurlEngine(configuration: .forTests())
    }

    /// Downloads `path` with the origin dropping the connection after `dropAfter` bytes once;
    /// returns the checkpoint the failure carried.
    func interruptedDownload(
        _ origin: LoopbackOrigin, path: String, to file: String, dropAfter: Int64
    ) async throws -> TransferCheckpoint {
        origin.inject(.dropConnection(afterBytes: dropAfter), at: path, times: 1)
        let error = await #expect(throws: DownloadError.self) {
            try await engine.transfer(.download(origin.url(path), to: file))
        }
        let failure = try #require(error)
        #expect(failure.code == .connectionLost)
        #expect(failure.isTransient)
        return try #require(failure.checkpoint)
    }

    @Test func resumesAfterADroppedConnection() async throws {
        try await withLoopbackOrigin { origin in
            defer { directory.cleanUp() }
            let path = "/bytes/3000000/resume.bin", file = directory.file("resume.bin")
            let checkpoint = try await interruptedDownload(origin, path: path, to: file, dropAfter: 1_200_000)
            #expect(checkpoint.bytesWritten > 0 && checkpoint.bytesWritten <= 1_200_000)
            #expect(checkpoint.validator?.etag != nil)
            #expect(fileSize(file) == checkpoint.bytesWritten)

            let result = try await engine.transfer(.download(origin.url(path), to: file, resume: checkpoint))
            #expect(result.status == 206)
            #expect(result.resumedFrom == checkpoint.bytesWritten)
            #expect(result.bytesReceived == 3_000_000 - checkpoint.bytesWritten)
            #expect(result.bytesWritten == 3_000_000)
            #expect(!result.restarted)
            #expect(await origin.content(at: path).verifyFile(atPath: file, size: 3_000_000))

            let second = try #require(origin.requests(for: path).last)
            #expect(second.header("Range") == "bytes=\(checkpoint.bytesWritten)-")
            #expect(second.header("If-Range") == checkpoint.validator?.etag)
            // Only the missing bytes crossed the wire again.
            #expect(origin.bytesServed(for: path) <= 3_000_000 + (1_200_000 - checkpoint.bytesWritten))
        }
    }

    @Test func aChangedETagRestartsCleanlyInsteadOfSplicing() async throws {
        try await withLoopbackOrigin { origin in
            defer { directory.cleanUp() }
            let path = "/bytes/2000000/changing.bin", file = directory.file("changing.bin")
            let checkpoint = try await interruptedDownload(origin, path: path, to: file, dropAfter: 700_000)
            origin.changeContent(at: path)

            let result = try await engine.transfer(.download(origin.url(path), to: file, resume: checkpoint))
            #expect(result.status == 200)
            #expect(result.restarted)
            #expect(result.resumedFrom == 0)
            #expect(result.bytesReceived == 2_000_000)
            #expect(result.validator != checkpoint.validator)
            // The file is the new version from its first byte, never old bytes + new bytes.
            #expect(await OriginContent(path: path, version: 1).verifyFile(atPath: file, size: 2_000_000))
            let second = try #require(origin.requests(for: path).last)
            #expect(second.header("If-Range") == checkpoint.validator?.etag)
        }
    }

    @Test func aShorterNewVersionLeavesNoStaleTail() async throws {
        try await withLoopbackOrigin { origin in
            defer { directory.cleanUp() }
            let file = directory.file("shrinking.bin")
            let longPath = "/long.bin"
            origin.serve(longPath, .generated(size: 1_000_000))
            _ = try await engine.transfer(.download(origin.url(longPath), to: file))
            // The same file name now gets a shorter resource: the old tail must go.
            let shortPath = "/bytes/1000/short.bin"
            let result = try await engine.transfer(.download(origin.url(shortPath), to: file))
            #expect(result.bytesWritten == 1000)
            #expect(await origin.content(at: shortPath).verifyFile(atPath: file, size: 1000))
        }
    }

    @Test func a416ForACompleteFileIsSuccess() async throws {
        try await withLoopbackOrigin { origin in
            defer { directory.cleanUp() }
            let path = "/bytes/500000/done.bin", file = directory.file("done.bin")
            let first = try await engine.transfer(.download(origin.url(path), to: file))
            let again = try await engine.transfer(.download(origin.url(path), to: file, resume: first.checkpoint))
            let request = try #require(origin.requests(for: path).last)
            #expect(request.header("Range") == "bytes=500000-")
            #expect(again.bytesReceived == 0)
            #expect(again.bytesWritten == 500_000)
            #expect(again.resourceLength == 500_000)
            #expect(await origin.content(at: path).verifyFile(atPath: file, size: 500_000))
        }
    }

    @Test func a416ForAFileThatShrankStartsOver() async throws {
        try await withLoopbackOrigin { origin in
            defer { directory.cleanUp() }
            let path = "/grown-then-shrunk.bin", file = directory.file("g.bin")
            // Only Last-Modified, which stays the same when the resource is replaced below.
            origin.serve(path, LoopbackOrigin.Resource(.generated(size: 400_000), sendsETag: false))
            let first = try await engine.transfer(.download(origin.url(path), to: file))
            // The server's copy is now shorter than ours, with the same validator: the origin
            // answers 416 (bytes */300000), and the engine must fetch the whole thing again.
            origin.serve(path, LoopbackOrigin.Resource(.generated(size: 300_000), sendsETag: false))
            let again = try await engine.transfer(.download(origin.url(path), to: file, resume: first.checkpoint))
            let requests = origin.requests(for: path)
            #expect(requests.count == 3)
            #expect(requests[1].header("Range") == "bytes=400000-")
            #expect(requests[2].header("Range") == nil)
            #expect(again.restarted)
            #expect(again.bytesWritten == 300_000)
            #expect(await origin.content(at: path).verifyFile(atPath: file, size: 300_000))
        }
    }

    @Test func aFirstRangePastTheEndEndsWhereTheResourceDoes() async throws {
        try await withLoopbackOrigin { origin in
            defer { directory.cleanUp() }
            // A first range asked for before the length is known (a rate limit's first range):
            // the server ends it at its last byte (RFC 9110 §14.1.2), and that is the whole span.
            let path = "/bytes/300000/short.bin", file = directory.file("short.bin")
            var request = TransferRequest.download(origin.url(path), to: file, range: ByteRange(offset: 0, length: 1 << 20))
            request.rangeMayPassEnd = true
            let result = try await engine.transfer(request)
            #expect(result.status == 206)
            #expect(result.bytesWritten == 300_000)
            #expect(result.resourceLength == 300_000)
            #expect(await origin.content(at: path).verifyFile(atPath: file, size: 300_000))
            #expect(origin.requests(for: path).last?.header("Range") == "bytes=0-1048575")

            // The same range computed from a length learned earlier: the resource shrank.
            request.rangeMayPassEnd = false
            let error = await #expect(throws: DownloadError.self) { try await engine.transfer(request) }
            #expect(error?.code == .contentChanged)
        }
    }

    @Test func aFirstRangeOfAnEmptyResourceIsAnEmptySpan() async throws {
        try await withLoopbackOrigin { origin in
            defer { directory.cleanUp() }
            let path = "/empty.bin", file = directory.file("empty.bin")
            origin.serve(path, .generated(size: 0))
            var request = TransferRequest.download(origin.url(path), to: file, range: ByteRange(offset: 0, length: 1 << 20))
            request.rangeMayPassEnd = true
            let result = try await engine.transfer(request)
            #expect(result.bytesWritten == 0)
            #expect(result.resourceLength == 0)
            #expect(origin.requests(for: path).count == 1)
        }
    }

    @Test func aFirstRangeAnsweredWholeByAServerWithoutRangesIsTheWholeResource() async throws {
        try await withLoopbackOrigin { origin in
            defer { directory.cleanUp() }
            let path = "/no-ranges.bin", file = directory.file("no-ranges.bin")
            origin.serve(path, .generated(size: 200_000))
            origin.inject(.ignoreRange, at: path)
            var request = TransferRequest.download(origin.url(path), to: file, range: ByteRange(offset: 0, length: 1 << 20))
            request.rangeMayPassEnd = true
            let result = try await engine.transfer(request)
            #expect(result.status == 200)
            #expect(result.bytesWritten == 200_000)
            #expect(await origin.content(at: path).verifyFile(atPath: file, size: 200_000))
        }
    }

    @Test func aCompleteBoundedSpanNeedsNoRequest() async throws {
        try await withLoopbackOrigin { origin in
            defer { directory.cleanUp() }
            let path = "/bytes/100000/span.bin", file = directory.file("span.bin")
            let range = ByteRange(offset: 1000, length: 5000)
            let first = try await engine.transfer(.download(origin.url(path), to: file, range: range))
            #expect(first.status == 206)
            let before = origin.requestCount(for: path)
            let again = try await engine.transfer(
                .download(origin.url(path), to: file, range: range, resume: first.checkpoint))
            #expect(again.status == 0)
            #expect(again.bytesWritten == 5000)
            #expect(origin.requestCount(for: path) == before, "no request was needed")
        }
    }

    @Test func a200ForAResumedWholeFileTruncatesAndRestarts() async throws {
        try await withLoopbackOrigin { origin in
            defer { directory.cleanUp() }
            let path = "/bytes/1500000/norange.bin", file = directory.file("norange.bin")
            let checkpoint = try await interruptedDownload(origin, path: path, to: file, dropAfter: 600_000)
            origin.inject(.ignoreRange, at: path)
            let result = try await engine.transfer(.download(origin.url(path), to: file, resume: checkpoint))
            #expect(result.status == 200)
            #expect(result.restarted)
            #expect(result.bytesReceived == 1_500_000)
            #expect(await origin.content(at: path).verifyFile(atPath: file, size: 1_500_000))
        }
    }

    @Test func a200ForASubRangeIsRefusedAndTouchesNothing() async throws {
        try await withLoopbackOrigin { origin in
            defer { directory.cleanUp() }
            let path = "/bytes/1000000/piece.bin", file = directory.file("piece.bin")
            try Data(repeating: 7, count: 10).write(to: URL(fileURLWithPath: file))
            origin.inject(.ignoreRange, at: path)
            let error = await #expect(throws: DownloadError.self) {
                try await engine.transfer(TransferRequest(
                    url: origin.url(path), range: ByteRange(offset: 4096, length: 4096),
                    destination: .file(path: file, offset: 0, ownsTail: false)))
            }
            #expect(error?.code == .rangeNotSupported)
            #expect(fileBytes(file) == [UInt8](repeating: 7, count: 10))
        }
    }

    @Test func aContentRangeOtherThanAskedIsRefused() async throws {
        try await withLoopbackOrigin { origin in
            defer { directory.cleanUp() }
            let path = "/bytes/100000/shifted.bin"
            origin.inject(.shiftContentRange(by: 10), at: path)
            let error = await #expect(throws: DownloadError.self) {
                try await engine.transfer(.download(
                    origin.url(path), to: directory.file("shifted.bin"), range: ByteRange(offset: 0, length: 1000)))
            }
            #expect(error?.code == .rangeMismatch)
            #expect(fileSize(directory.file("shifted.bin")) == nil, "nothing is written for a refused response")
        }
    }

    @Test func aContentLengthLargerThanTheBodyIsATruncation() async throws {
        try await withLoopbackOrigin { origin in
            defer { directory.cleanUp() }
            let path = "/bytes/200000/long-header.bin", file = directory.file("lh.bin")
            origin.inject(.wrongContentLength(delta: 100), at: path, times: 1)
            let error = await #expect(throws: DownloadError.self) {
                try await engine.transfer(.download(origin.url(path), to: file))
            }
            #expect(error?.code == .connectionLost)
            // The bytes that did arrive are kept and resumable.
            let checkpoint = try #require(error?.checkpoint)
            #expect(checkpoint.bytesWritten == 200_000)
            let result = try await engine.transfer(.download(origin.url(path), to: file, resume: checkpoint))
            #expect(result.bytesWritten == 200_000)
            #expect(await origin.content(at: path).verifyFile(atPath: file, size: 200_000))
        }
    }

    @Test func aContentLengthSmallerThanExpectedIsASizeMismatch() async throws {
        try await withLoopbackOrigin { origin in
            defer { directory.cleanUp() }
            let path = "/bytes/200000/short-header.bin"
            origin.inject(.wrongContentLength(delta: -100), at: path)
            var request = TransferRequest.download(origin.url(path), to: directory.file("sh.bin"))
            request.expectedLength = 200_000
            let error = await #expect(throws: DownloadError.self) { try await engine.transfer(request) }
            #expect(error?.code == .sizeMismatch)
        }
    }

    @Test func withoutAValidatorTheEngineStartsOverRatherThanGuess() async throws {
        try await withLoopbackOrigin { origin in
            defer { directory.cleanUp() }
            let path = "/novalidator.bin", file = directory.file("nv.bin")
            origin.serve(path, LoopbackOrigin.Resource(.generated(size: 800_000), sendsETag: false, sendsLastModified: false))
            let checkpoint = try await interruptedDownload(origin, path: path, to: file, dropAfter: 300_000)
            #expect(checkpoint.validator == nil)
            let result = try await engine.transfer(.download(origin.url(path), to: file, resume: checkpoint))
            let request = try #require(origin.requests(for: path).last)
            #expect(request.header("Range") == nil)
            #expect(result.resumedFrom == 0)
            #expect(await origin.content(at: path).verifyFile(atPath: file, size: 800_000))
        }
    }

    @Test func lastModifiedServesAsValidatorWhenThereIsNoETag() async throws {
        try await withLoopbackOrigin { origin in
            defer { directory.cleanUp() }
            let path = "/dateonly.bin", file = directory.file("d.bin")
            origin.serve(path, LoopbackOrigin.Resource(.generated(size: 900_000), sendsETag: false))
            let checkpoint = try await interruptedDownload(origin, path: path, to: file, dropAfter: 400_000)
            let result = try await engine.transfer(.download(origin.url(path), to: file, resume: checkpoint))
            let request = try #require(origin.requests(for: path).last)
            #expect(request.header("If-Range") == checkpoint.validator?.lastModified)
            #expect(result.status == 206)
            #expect(await origin.content(at: path).verifyFile(atPath: file, size: 900_000))
        }
    }

    @Test func aCheckpointLargerThanTheFileIsNotTrusted() async throws {
        try await withLoopbackOrigin { origin in
            defer { directory.cleanUp() }
            let path = "/bytes/300000/gone.bin", file = directory.file("gone.bin")
            let first = try await engine.transfer(.download(origin.url(path), to: file))
            try FileManager.default.removeItem(atPath: file)
            // The store says 300000 bytes are done, but the file is gone: resuming would leave a
            // hole of zeros. The engine fetches everything again.
            let again = try await engine.transfer(.download(origin.url(path), to: file, resume: first.checkpoint))
            #expect(again.resumedFrom == 0)
            #expect(await origin.content(at: path).verifyFile(atPath: file, size: 300_000))
        }
    }

    @Test func piecesWrittenAtTheirOffsetsAssembleTheFile() async throws {
        try await withLoopbackOrigin { origin in
            defer { directory.cleanUp() }
            let size: Int64 = 1_000_003, pieceLength: Int64 = 131_072
            let path = "/bytes/\(size)/pieces.bin", file = directory.file("pieces.bin")
            try await withThrowingTaskGroup(of: TransferResult.self) { group in
                var offset: Int64 = 0
                while offset < size {
                    let range = ByteRange(offset: offset, length: min(pieceLength, size - offset))
                    group.addTask {
                        try await engine.transfer(TransferRequest(
                            url: origin.url(path), range: range,
                            destination: .file(path: file, offset: range.offset, ownsTail: false)))
                    }
                    offset += pieceLength
                }
                for try await result in group { #expect(result.status == 206) }
            }
            #expect(await origin.content(at: path).verifyFile(atPath: file, size: size))
        }
    }

    @Test func aPieceResumesInsideItsRange() async throws {
        try await withLoopbackOrigin { origin in
            defer { directory.cleanUp() }
            let path = "/bytes/2000000/piece-resume.bin", file = directory.file("pr.bin")
            let range = ByteRange(offset: 500_000, length: 1_000_000)
            origin.inject(.dropConnection(afterBytes: 300_000), at: path, times: 1)
            let request = TransferRequest(
                url: origin.url(path), range: range, destination: .file(path: file, offset: 0, ownsTail: false))
            let error = await #expect(throws: DownloadError.self) { try await engine.transfer(request) }
            var retry = request
            retry.resume = try #require(error?.checkpoint)
            let done = try #require(retry.resume?.bytesWritten)
            let result = try await engine.transfer(retry)
            let sent = try #require(origin.requests(for: path).last)
            #expect(sent.header("Range") == "bytes=\(500_000 + done)-1499999")
            #expect(result.bytesWritten == 1_000_000)
            #expect(await origin.content(at: path).verifyFile(atPath: file, size: 1_000_000, offset: 500_000))
        }
    }
}
