import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Where a transfer's bytes went, as its hooks learn it on the engine thread.
final class Landing: Sendable {
    private struct State {
        /// The offset in the output file, `nil` while the bytes go elsewhere (a stash, memory).
        var base: Int64?
        var onDisk: Int64 = 0
    }

    private let state: Locked<State>

    init(base: Int64?, onDisk: Int64) {
        state = Locked(State(base: base, onDisk: onDisk))
    }

    var base: Int64? { state.withLock { $0.base } }

    func land(at base: Int64) { state.withLock { $0.base = base } }

    /// The output range newly on disk, if the bytes go to the output.
    func flushed(_ onDisk: Int64) -> Range<Int64>? {
        state.withLock { state in
            defer { state.onDisk = max(state.onDisk, onDisk) }
            guard let base = state.base, onDisk > state.onDisk else { return nil }
            return base + state.onDisk..<base + onDisk
        }
    }
}

extension TaskRun {
    /// Encrypted segments are fetched into memory and decrypted there; larger ones are refused.
    static let maxEncryptedSegmentSize = 64 << 20

    // MARK: - Segments

    /// An attempt the run's loop started itself (``startSegment(_:of:onEnd:)``) and handed over
    /// when its end needs more than bookkeeping: a failure to retry, a checksum to verify, a
    /// stash to place.
    struct StartedAttempt: Sendable {
        let job: Int
        let mirror: Int
        let state: RetryState
        let landing: Landing
        let destination: TransferRequest.Destination
        let result: Result<TransferResult, DownloadError>
    }

    /// How a segment started by ``startSegment(_:of:onEnd:)`` ended.
    enum SegmentStart: Sendable {
        /// Done, on the quick path: recorded already.
        case done
        /// Anything else: ``fetchSegment(_:of:retry:started:)`` takes it from there.
        case handOver(StartedAttempt)
    }

    /// Starts a segment's first attempt without a task of its own, when nothing stands before
    /// the request (no cache entry to look at, no server to wait for, nothing expired or
    /// refused): the request goes to the engine at once, and `onEnd` is called (on the engine
    /// thread) when it ends. A segment whose bytes land at their place and need no check is
    /// finished right there; any other ending is handed over. ``QuickStart/needsTask`` when the
    /// segment needs the full path (``fetchSegment(_:of:retry:started:)``).
    func startSegment(_ index: Int, of writer: OutputWriter, onEnd: @escaping @Sendable (SegmentStart) -> Void) -> QuickStart {
        if let cache = services.cache, writer.kind != .single, cache.contains(cacheKey(index, of: writer)) { return .needsTask }
        if let expiresAt = manifestExpiry, expiresAt <= Date() { return .needsTask }
        if services.diskGate?.refusal() != nil { return .needsTask }
        let urls = writer.output.segments.urls(at: index)
        var state = initialState(index, of: writer, urls: urls)
        guard case .fetch(let mirror, _) = state.next, !writer.output.segments.isEncrypted(at: index) else { return .needsTask }
        state.checkpoint = nil
        let first = state
        let job = shared.nextJob()
        let attempt = segmentRequest(index, of: writer, mirror: mirror, job: job, state: first)
        let progress = self.progress
        return .started(services.engine.start(attempt.request, lane: lane, progress: { update in
            progress.update(job: job, bytes: update.bytesTaken)
        }) { [self] result in
            if case .success(let transferred) = result,
                finishQuickly(index, of: writer, result: transferred, landing: attempt.landing, job: job)
            {
                progress.abandon(job: job)
                CrashPoint.segmentDone.reach()
                onEnd(.done)
                return
            }
            onEnd(.handOver(StartedAttempt(
                job: job, mirror: mirror, state: first, landing: attempt.landing, destination: attempt.request.destination,
                result: result)))
        })
    }

    /// How work started without a task of its own began.
    enum QuickStart {
        /// Its transfer runs; the handle stops it.
        case started(TransferHandle)
        /// It ended at once (its end was told).
        case ended
        /// It needs a task of its own (the full path).
        case needsTask
    }

    /// A segment's retry state before its first attempt (`sharesFile`: a single output's
    /// connection, whose bytes share its file); `resuming`: the bytes an earlier run left of it
    /// at `offset` in the output file, which the first request continues.
    func initialState(
        _ index: Int, of writer: OutputWriter, urls: [URL], sharesFile: Bool = false,
        resuming: (checkpoint: TransferCheckpoint, offset: Int64)? = nil
    ) -> RetryState {
        let shared = self.shared
        var attempt = SegmentAttempt(
            mirrorCount: urls.count, dead: Set(urls.indices.filter { shared.isDead(urls[$0]) }),
            sharesFile: sharesFile || writer.kind == .pieces, policy: policy, seed: seed(output: writer.index, segment: index))
        let next = attempt.start { shared.wait(for: urls[$0]) }
        return RetryState(
            attempt: attempt, next: next, checkpoint: resuming.map { ($0.checkpoint, mirror: 0) }, checkpointOffset: resuming?.offset)
    }

    /// Fetches one segment of an ordered, pieces, separate or cache-only output: from the cache
    /// when it is there, else over its URLs as ``SegmentAttempt`` decides. `started` is a first
    /// attempt the run's loop made itself (``startSegment(_:of:onEnd:)``): it is taken up where
    /// it ended.
    func fetchSegment(_ index: Int, of writer: OutputWriter, retry: RetryState?, started: StartedAttempt? = nil) async -> RunWorkResult {
        let urls = writer.output.segments.urls(at: index)
        let job = started?.job ?? shared.nextJob()
        defer { progress.abandon(job: job) }
        if retry == nil, started == nil, let outcome = await fromCache(index, of: writer) { return outcome }
        let shared = self.shared
        var state = started?.state ?? retry ?? initialState(index, of: writer, urls: urls)
        var action = state.next
        var pending = started
        while true {
            switch action {
            case .fetch(let mirror, let fromScratch):
                if pending == nil {
                    if Task.isCancelled { return .idle }
                    if let expiresAt = manifestExpiry, expiresAt <= Date() {
                        return .reResolve(DownloadError(.manifestExpired, "the manifest's URLs expired at \(expiresAt)"))
                    }
                    if let refusal = services.diskGate?.refusal() { return .failed(refusal) }
                }
                if fromScratch { state.checkpoint = nil }
                let resumed = (state.checkpoint?.0.bytesWritten ?? 0) > 0
                let before = state.checkpoint?.0.bytesWritten ?? 0
                do {
                    let verdict: Verdict
                    if let attempt = pending {
                        pending = nil
                        let result = try record(attempt.result, destination: attempt.destination, landing: attempt.landing, mirror: mirror, state: &state)
                        verdict = try await complete(index, of: writer, result: result, landing: attempt.landing, job: job)
                    } else {
                        verdict = try await transfer(index, of: writer, mirror: mirror, job: job, state: &state)
                    }
                    switch verdict {
                    case .done:
                        CrashPoint.segmentDone.reach()
                        return .done
                    case .checksumMismatch(let error):
                        state.checkpoint = nil
                        mailbox.report(.retrying(error))
                        action = state.attempt.next(after: .checksumMismatch(error)) { shared.wait(for: urls[$0]) }
                    case .conflict(let error):
                        return .resetOutput(writer.index, error)
                    }
                } catch let error as DownloadError {
                    if error.isCancellation || Task.isCancelled { return .idle }
                    progress.abandon(job: job)
                    let after = state.checkpoint?.0.bytesWritten ?? 0
                    // What the failure says of the URL (dead, or a Retry-After) is known before the
                    // next attempt is chosen: the first retry honours it too.
                    noteFailure(error, url: urls[mirror], attempt: state.attempt, urls: urls)
                    // Progress counts only when its bytes can be resumed (a version to ask
                    // `If-Range` with): a server that cuts every answer short, without one, would
                    // be asked again forever.
                    let kept = after > before && state.checkpoint?.0.validator?.ifRangeValue != nil
                    action = state.attempt.next(after: .failed(error, progressed: kept, resumed: resumed)) {
                        shared.wait(for: urls[$0])
                    }
                    noteFailure(error, url: nil, attempt: state.attempt, urls: urls)
                    if case .fetch = action { mailbox.report(.retrying(error)) }
                    if case .wait = action { mailbox.report(.retrying(error)) }
                } catch {
                    return .idle
                }
            case .wait(let delay, let mirror, let fromScratch):
                return .retry(after: delay, state: RetryState(
                    attempt: state.attempt, next: .fetch(mirror: mirror, fromScratch: fromScratch), checkpoint: state.checkpoint))
            case .waitForNetwork(let error):
                return .networkLost(error)
            case .reResolve(let error):
                return .reResolve(error)
            case .resetOutput(let error):
                return .resetOutput(writer.index, error)
            case .fail(let error):
                return .failed(error)
            }
        }
    }

    enum Verdict {
        case done
        case checksumMismatch(DownloadError)
        case conflict(DownloadError)
    }

    /// One attempt's request, and where its bytes land.
    struct AttemptRequest {
        var request: TransferRequest
        let landing: Landing
    }

    /// One attempt at a segment; on failure `state.checkpoint` tells what it left on disk.
    private func transfer(
        _ index: Int, of writer: OutputWriter, mirror: Int, job: Int, state: inout RetryState
    ) async throws -> Verdict {
        let attempt = segmentRequest(index, of: writer, mirror: mirror, job: job, state: state)
        let progress = self.progress
        let outcome: Result<TransferResult, DownloadError>
        do {
            outcome = .success(try await services.engine.transfer(attempt.request, lane: lane) { update in
                progress.update(job: job, bytes: update.bytesTaken)
            })
        } catch let error as DownloadError {
            outcome = .failure(error)
        }
        let result = try record(outcome, destination: attempt.request.destination, landing: attempt.landing, mirror: mirror, state: &state)
        return try await complete(index, of: writer, result: result, landing: attempt.landing, job: job)
    }

    /// Keeps what a failed attempt left on disk in `state` (to resume from), and throws its
    /// error; returns a successful attempt's result.
    private func record(
        _ outcome: Result<TransferResult, DownloadError>, destination: TransferRequest.Destination, landing: Landing, mirror: Int,
        state: inout RetryState
    ) throws(DownloadError) -> TransferResult {
        switch outcome {
        case .success(let result):
            state.checkpoint = nil
            return result
        case .failure(let error):
            if let saved = error.checkpoint, saved.bytesWritten > 0, case .file = destination {
                state.checkpoint = (saved, mirror: mirror)
                state.checkpointOffset = landing.base
            } else if error.checkpoint != nil {
                state.checkpoint = nil
            }
            throw error
        }
    }

    /// The request of one attempt at a segment: where its bytes go (its place in the output when
    /// the place is known by the time the response comes, else its stash), what it resumes.
    private func segmentRequest(_ index: Int, of writer: OutputWriter, mirror: Int, job: Int, state: RetryState) -> AttemptRequest {
        let segment = writer.output.segments[index]
        var headers = configuration.headers
        for field in segment.headers { headers.replaceOrAdd(name: field.name, value: field.value) }
        let checkpoint = state.checkpoint?.0
        var request = TransferRequest(
            url: segment.urls[mirror], range: segment.range, headers: headers, destination: .discard, resume: checkpoint,
            expectedLength: segment.encryption == nil ? segment.expectedSize : nil)
        let landing: Landing
        let journal = writer.journal
        let output = writer.index
        switch writer.kind {
        case .ordered where segment.encryption != nil:
            request.destination = .memory(limit: Self.maxEncryptedSegmentSize)
            request.resume = nil
            landing = Landing(base: nil, onDisk: 0)
        case .ordered:
            let progress = self.progress
            if let checkpoint, checkpoint.bytesWritten > 0, let offset = state.checkpointOffset {
                // Resuming bytes already at their place in the output.
                request.destination = .file(path: writer.partPath, offset: offset, ownsTail: false)
                landing = Landing(base: offset, onDisk: checkpoint.bytesWritten)
            } else if let checkpoint, checkpoint.bytesWritten > 0 {
                // Resuming bytes in the stash.
                request.destination = .file(path: writer.stashPath(index), offset: 0, ownsTail: true)
                landing = Landing(base: nil, onDisk: checkpoint.bytesWritten)
            } else {
                request.resume = nil
                request.destination = .file(path: writer.stashPath(index), offset: 0, ownsTail: true)
                landing = Landing(base: nil, onDisk: 0)
            }
            let partPath = writer.partPath
            request.onResponse = { response in
                switch writer.placement(of: index, length: response.spanLength, progress: progress) {
                case .conflict(let error):
                    return .refuse(error)
                case .output(let offset):
                    if let validator = response.validator { journal.update(output) { $0.partials[index] = validator } }
                    guard response.resumedFrom == 0, landing.base == nil else { return .proceed }
                    landing.land(at: offset)
                    return .redirect(to: .file(path: partPath, offset: offset, ownsTail: false))
                case .stash:
                    return .proceed
                }
            }
        case .pieces:
            let offset = segment.pieceOffset ?? 0
            request.destination = .file(path: writer.partPath, offset: offset, ownsTail: false)
            landing = Landing(base: offset, onDisk: checkpoint?.bytesWritten ?? 0)
            request.onResponse = { response in
                if let validator = response.validator { journal.update(output) { $0.partials[index] = validator } }
                return .proceed
            }
        case .separate:
            request.destination = .file(path: FileLayout.partPath(separatePath(index, of: writer)), offset: 0, ownsTail: true)
            landing = Landing(base: nil, onDisk: 0)
        case .cacheOnly, .single:
            request.destination = .file(path: writer.stashPath(index), offset: 0, ownsTail: true)
            landing = Landing(base: nil, onDisk: 0)
        }
        request.onFlush = { onDisk in
            if let range = landing.flushed(onDisk) { writer.written(range) }
        }
        request.permitsWrite = writeCheck
        if services.engine.globalRateLimit != nil {
            // Under a rate limit, the round trip sizes how many segments are in flight.
            let shared = self.shared, decide = request.onResponse
            request.onResponse = { response in
                shared.noteRoundTrip(response.roundTripTime)
                return decide?(response) ?? .proceed
            }
        }
        return AttemptRequest(request: request, landing: landing)
    }

    /// Finishes a segment whose bytes are at their place and need no check (no checksum, not
    /// encrypted, not stashed): the bookkeeping only, on any thread. `false` when the segment
    /// needs ``complete(_:of:result:landing:job:)``.
    private func finishQuickly(_ index: Int, of writer: OutputWriter, result: TransferResult, landing: Landing, job: Int) -> Bool {
        let segments = writer.output.segments
        guard !segments.isEncrypted(at: index), segments.checksum(at: index) == nil else { return false }
        switch writer.kind {
        case .ordered:
            guard landing.base != nil, !writer.hasParked else { return false }
        case .pieces:
            break
        case .separate, .cacheOnly, .single:
            return false
        }
        writer.journal.update(writer.index) { $0.partials[index] = nil }
        writer.setDone(index)
        progress.finish(job: job, bytes: result.bytesWritten, completesSegment: true)
        return true
    }

    /// The end of a successful transfer: verified, decrypted, put in place, recorded.
    func complete(
        _ index: Int, of writer: OutputWriter, result: TransferResult, landing: Landing, job: Int
    ) async throws -> Verdict {
        let segment = writer.output.segments[index]
        let executor = services.executor
        switch writer.kind {
        case .ordered where segment.encryption != nil:
            let body = [UInt8](result.body ?? Data())
            if let checksum = segment.checksum {
                let actual = Checksum.compute(checksum.algorithm, bytes: body)
                if actual != checksum {
                    return .checksumMismatch(DownloadError(
                        .checksumMismatch, "checksum mismatch: \(checksum.algorithm) of segment \(index + 1) is \(actual.hexDigest), expected \(checksum.hexDigest)"))
                }
            }
            let encryption = segment.encryption!
            let key = try await shared.keys.key(for: encryption.keyURL, engine: services.engine, headers: configuration.headers, timeout: configuration.documentTimeout)
            let plain = try await executor.run { () throws(DownloadError) -> [UInt8] in
                try AES128CBC.decrypt(body, key: key, iv: encryption.iv)
            }
            if let conflict = writer.learnSize(of: index, Int64(plain.count), progress: progress) { return .conflict(conflict) }
            progress.abandon(job: job)
            writer.park(index, .memory(plain))
            try await placeParked(writer)
            return .done
        case .ordered:
            if let base = landing.base {
                if let checksum = segment.checksum {
                    let path = writer.partPath, length = result.bytesWritten
                    if let mismatch = try await mismatch({ () throws(DownloadError) in
                        try checksum.verify(fileAt: path, range: ByteRange(offset: base, length: max(1, length)))
                    }) {
                        return .checksumMismatch(mismatch)
                    }
                }
                writer.journal.update(writer.index) { $0.partials[index] = nil }
                writer.setDone(index)
                progress.finish(job: job, bytes: result.bytesWritten, completesSegment: true)
            } else {
                let stash = writer.stashPath(index)
                if let conflict = writer.learnSize(of: index, result.bytesWritten, progress: progress) { return .conflict(conflict) }
                if let checksum = segment.checksum {
                    if let mismatch = try await mismatch({ () throws(DownloadError) in try checksum.verify(fileAt: stash) }) {
                        return .checksumMismatch(mismatch)
                    }
                }
                progress.abandon(job: job)
                writer.park(index, .file(path: stash, owned: true))
            }
            try await placeParked(writer)
            return .done
        case .pieces:
            if let checksum = segment.checksum {
                let path = writer.partPath, offset = segment.pieceOffset ?? 0, length = result.bytesWritten
                if let mismatch = try await mismatch({ () throws(DownloadError) in
                    try checksum.verify(fileAt: path, range: ByteRange(offset: offset, length: max(1, length)))
                }) {
                    writer.journal.update(writer.index) { record in
                        record.ranges.remove(offset..<offset + max(1, length))
                    }
                    return .checksumMismatch(mismatch)
                }
            }
            writer.journal.update(writer.index) { $0.partials[index] = nil }
            writer.setDone(index)
            progress.finish(job: job, bytes: result.bytesWritten, completesSegment: true)
            return .done
        case .separate:
            let final = separatePath(index, of: writer)
            let part = FileLayout.partPath(final)
            if let mismatch = try await mismatch({ () throws(DownloadError) in
                if let checksum = segment.checksum { try checksum.verify(fileAt: part) }
                try FileOperations.rename(part, to: final)
            }) {
                return .checksumMismatch(mismatch)
            }
            writer.setDone(index)
            progress.finish(job: job, bytes: result.bytesWritten, completesSegment: true)
            return .done
        case .cacheOnly, .single:
            let stash = writer.stashPath(index)
            let key = cacheKey(index, of: writer)
            let cache = services.cache
            // The cache keeps what an output would hold: encrypted segments decrypted.
            var needed: (key: [UInt8], iv: [UInt8])?
            if let encryption = segment.encryption {
                needed = (try await shared.keys.key(for: encryption.keyURL, engine: services.engine, headers: configuration.headers, timeout: configuration.documentTimeout), encryption.iv)
            }
            let decryption = needed
            let plain = stash + ".plain"
            if let mismatch = try await mismatch({ () throws(DownloadError) in
                defer {
                    FileOperations.remove(stash)
                    FileOperations.remove(plain)
                }
                if let checksum = segment.checksum { try checksum.verify(fileAt: stash) }
                if let decryption {
                    try AES128CBC.decryptFile(at: stash, to: plain, key: decryption.key, iv: decryption.iv)
                    try cache?.insert(key, from: plain)
                } else {
                    try cache?.insert(key, from: stash, checksum: segment.checksum)
                }
            }) {
                return .checksumMismatch(mismatch)
            }
            writer.setDone(index)
            progress.finish(job: job, bytes: result.bytesWritten, completesSegment: true)
            return .done
        }
    }

    /// Runs `body` off the cooperative pool; returns its checksum mismatch, throws anything else.
    private func mismatch(_ body: @escaping @Sendable () throws(DownloadError) -> Void) async throws -> DownloadError? {
        do {
            try await services.executor.run(body)
            return nil
        } catch {
            if error.code == .checksumMismatch { return error }
            throw error
        }
    }

    /// Writes the parked segments of an ordered output whose places are now known.
    func placeParked(_ writer: OutputWriter) async throws(DownloadError) {
        let ready = writer.takePlaceable()
        guard !ready.isEmpty else { return }
        let progress = self.progress
        try await services.executor.run { () throws(DownloadError) in
            for (segment, parked, offset) in ready {
                let size = try FileOperations.write(parked, to: writer.partPath, at: offset)
                writer.written(offset..<offset + size)
                writer.setDone(segment)
                progress.finish(job: nil, bytes: size, completesSegment: true)
            }
        }
    }

    /// A segment the cache has: put in place without a request; `nil` on a miss.
    private func fromCache(_ index: Int, of writer: OutputWriter) async -> RunWorkResult? {
        guard let cache = services.cache, writer.kind != .single else { return nil }
        let segment = writer.output.segments[index]
        let key = cacheKey(index, of: writer)
        guard cache.contains(key) else { return nil }
        let expected = segment.encryption == nil ? segment.expectedSize : nil
        let executor = services.executor
        let progress = self.progress
        do {
            let placed = try await executor.run { () throws(DownloadError) -> Bool in
                guard let entry = cache.lookup(key, expectedSize: expected, checksum: segment.checksum) else { return false }
                switch writer.kind {
                case .cacheOnly:
                    break
                case .ordered:
                    if let conflict = writer.learnSize(of: index, entry.size, progress: progress) { throw conflict }
                    writer.park(index, .file(path: entry.path, owned: false))
                    return true
                case .pieces:
                    try cache.place(entry, at: writer.partPath, offset: segment.pieceOffset ?? 0)
                    writer.written((segment.pieceOffset ?? 0)..<(segment.pieceOffset ?? 0) + entry.size)
                case .separate:
                    try cache.place(entry, at: self.separatePath(index, of: writer))
                case .single:
                    return false
                }
                writer.setDone(index)
                progress.finish(job: nil, bytes: entry.size, completesSegment: true)
                return true
            }
            guard placed else { return nil }
            if writer.kind == .ordered { try await placeParked(writer) }
            return .done
        } catch {
            if error.code == .contentChanged { return .resetOutput(writer.index, error) }
            return nil
        }
    }

    func cacheKey(_ index: Int, of writer: OutputWriter) -> String {
        entity.cacheKey(for: SegmentLocation(
            outputIndex: writer.index, segmentIndex: index, outputName: writer.output.name,
            segment: writer.output.segments[index]))
    }

    func separatePath(_ index: Int, of writer: OutputWriter) -> String {
        let name = (try? SafePath.relative(writer.output.segments[index].name ?? "")) ?? "segment-\(index)"
        return SafePath.join(writer.finalPath, name)
    }

    private var manifestExpiry: Date? { shared.expiry }

    /// Remembers what a failure says about the URL for the other segments of the run: dead for
    /// good, or asked not to be asked before a time (`Retry-After`).
    func noteFailure(_ error: DownloadError, url: URL?, attempt: SegmentAttempt?, urls: [URL]) {
        for dead in attempt?.deadMirrors ?? [] { shared.markDead(urls[dead]) }
        if let url, let retryAfter = error.retryAfter {
            shared.hold(url, until: .now + min(retryAfter, policy.maxRetryAfter))
        }
    }

    // MARK: - Single outputs

    /// How a piece of a single output starts.
    enum PieceStart {
        /// It ends before any request (a server asked to wait, the disk is full).
        case ended(RunWorkResult)
        /// It needs a look at the cache first (``fetchPiece(_:_:of:retry:)``).
        case needsCache
        /// Its request.
        case request(TransferRequest, mirror: Int, job: Int)
    }

    /// One connection of a single output: the first request for the whole resource (it learns
    /// the length, the version and whether ranges may be asked for), or a range of it.
    func fetchPiece(
        _ pieceID: Int, _ piece: SingleOutputState.Piece, of writer: OutputWriter, retry: RetryState?
    ) async -> RunWorkResult {
        if piece.isFirst, retry == nil, let written = await singleFromCache(writer) {
            return .pieceEnded(pieceID: pieceID, error: nil, written: written, resumed: false)
        }
        switch startOfPiece(pieceID, piece, of: writer, retry: retry, lookingAtCache: false) {
        case .ended(let result):
            return result
        case .needsCache:
            preconditionFailure("the cache was looked at")
        case .request(let request, let mirror, let job):
            let progress = self.progress
            let outcome: Result<TransferResult, DownloadError>
            do {
                outcome = .success(try await services.engine.transfer(request, lane: lane) { update in
                    progress.update(job: job, bytes: update.bytesTaken)
                })
            } catch let error as DownloadError {
                outcome = .failure(error)
            } catch {
                outcome = .failure(DownloadError(.cancelled, "cancelled"))
            }
            return pieceEnded(outcome, pieceID: pieceID, piece: piece, of: writer, mirror: mirror, job: job, retry: retry)
        }
    }

    /// Starts a piece without a task of its own: its request goes to the engine at once and
    /// `onEnd` gets the piece's result (on the engine thread, or at once when it cannot start).
    /// ``QuickStart/needsTask`` when the piece needs ``fetchPiece(_:_:of:retry:)`` (the cache may
    /// have the file).
    func startPiece(
        _ pieceID: Int, _ piece: SingleOutputState.Piece, of writer: OutputWriter, retry: RetryState?,
        onEnd: @escaping @Sendable (RunWorkResult) -> Void
    ) -> QuickStart {
        switch startOfPiece(pieceID, piece, of: writer, retry: retry, lookingAtCache: true) {
        case .needsCache:
            return .needsTask
        case .ended(let result):
            onEnd(result)
            return .ended
        case .request(let request, let mirror, let job):
            let progress = self.progress
            return .started(services.engine.start(request, lane: lane, progress: { update in
                progress.update(job: job, bytes: update.bytesTaken)
            }) { [self] outcome in
                let result = pieceEnded(outcome, pieceID: pieceID, piece: piece, of: writer, mirror: mirror, job: job, retry: retry)
                finishEarly(writer, piece: piece, result)
                onEnd(result)
            })
        }
    }

    /// What a piece does first: its request, or its end when it cannot start.
    private func startOfPiece(
        _ pieceID: Int, _ piece: SingleOutputState.Piece, of writer: OutputWriter, retry: RetryState?, lookingAtCache: Bool
    ) -> PieceStart {
        let segment = writer.output.segments[0]
        let urls = segment.urls
        var mirror: Int
        switch retry?.next {
        case .fetch(let chosen, _), .wait(_, let chosen, _): mirror = chosen
        default: mirror = urls.indices.first { !shared.isDead(urls[$0]) } ?? 0
        }
        if retry == nil, shared.wait(for: urls[mirror]) != nil {
            // A server asked not to be asked yet: the piece's attempt takes another URL now, or
            // waits (without the slot) and takes the range then.
            var state = initialState(0, of: writer, urls: urls, sharesFile: true)
            switch state.next {
            case .fetch(let chosen, _):
                mirror = chosen
            case .wait(let delay, let chosen, let fromScratch):
                state.next = .fetch(mirror: chosen, fromScratch: fromScratch)
                return .ended(.pieceWaits(pieceID: pieceID, after: delay, state: state))
            default:
                break
            }
        }
        if lookingAtCache, piece.isFirst, retry == nil, let cache = services.cache, cache.contains(cacheKey(0, of: writer)) {
            return .needsCache
        }
        if let refusal = services.diskGate?.refusal() {
            return .ended(.pieceEnded(pieceID: pieceID, error: refusal, written: 0, resumed: false))
        }
        var headers = configuration.headers
        for field in segment.headers { headers.replaceOrAdd(name: field.name, value: field.value) }
        let base = segment.range?.offset ?? 0
        var range = segment.range
        // A first request with an end (a rate limit's first range) asks for that range only.
        let chunkedFirst = piece.isFirst && segment.range == nil && piece.bound.end != .max
        if chunkedFirst { range = ByteRange(offset: 0, length: piece.bound.end) }
        if !piece.isFirst {
            let length = piece.bound.end == .max ? nil : piece.bound.end
            range = ByteRange(offset: base + piece.start, length: length)
            let (_, validator) = writer.resource
            if let validator, validator.hasStrongETag, let etag = validator.etag {
                headers.replaceOrAdd(name: "If-Match", value: etag)
            } else if let validator, validator.lastModifiedIsStrong, let date = validator.lastModified {
                headers.replaceOrAdd(name: "If-Unmodified-Since", value: date)
            }
        }
        var request = TransferRequest(
            url: urls[mirror], range: range, headers: headers,
            destination: .file(path: writer.partPath, offset: piece.start, ownsTail: false),
            expectedLength: piece.isFirst ? segment.expectedSize : nil)
        request.bound = piece.bound
        // (The first range is asked for before the length is known: the file may be shorter.)
        request.rangeMayPassEnd = chunkedFirst
        let landing = Landing(base: piece.start, onDisk: 0)
        request.onFlush = { onDisk in
            if let range = landing.flushed(onDisk) { writer.written(range) }
        }
        request.permitsWrite = writeCheck
        if piece.isFirst {
            request.onResponse = firstResponseHook(for: writer, chunked: chunkedFirst)
        } else if services.engine.globalRateLimit != nil {
            // Each range's answer tells the round trip the next ranges are sized by.
            let events = self.events, index = writer.index
            request.onResponse = { response in
                if let roundTrip = response.roundTripTime { events.post(.roundTrip(output: index, roundTrip)) }
                return .proceed
            }
        }
        return .request(request, mirror: mirror, job: shared.nextJob())
    }

    /// A piece's result from its transfer's (on any thread).
    private func pieceEnded(
        _ outcome: Result<TransferResult, DownloadError>, pieceID: Int, piece: SingleOutputState.Piece, of writer: OutputWriter,
        mirror: Int, job: Int, retry: RetryState?
    ) -> RunWorkResult {
        defer { progress.abandon(job: job) }
        switch outcome {
        case .success(let result):
            progress.finish(job: job, bytes: result.bytesWritten, completesSegment: false)
            return .pieceEnded(pieceID: pieceID, error: nil, written: result.bytesWritten, resumed: false)
        case .failure(let error):
            let written = error.checkpoint?.bytesWritten ?? 0
            if written > 0 { progress.finish(job: job, bytes: written, completesSegment: false) }
            if written > 0, writer.resource.length != nil, !writer.isJournaled {
                // Stopped half-way (paused, or a failure): what is on disk is kept for the next try.
                writer.startJournaling()
                writer.written(piece.start..<piece.start + written)
            }
            let urls = writer.output.segments.urls(at: 0)
            noteFailure(error, url: urls[mirror], attempt: retry?.attempt, urls: urls)
            return .pieceEnded(pieceID: pieceID, error: error, written: written, resumed: false)
        }
    }

    /// What the first response of a single output tells: its length and version, whether more
    /// connections may share it, and (for an output named by the server) its name.
    private func firstResponseHook(for writer: OutputWriter, chunked: Bool) -> @Sendable (TransferResponse) -> ResponseDecision {
        let run = self
        let splitting = configuration.splitting
        let engine = services.engine
        let sink = events
        let index = writer.index
        let progress = self.progress
        return { response in
            // (A first range of a file tells the file's length in its Content-Range.)
            let length = chunked ? response.resourceLength : response.spanLength
            if writer.resource.length == nil, let length, writer.output.segments[0].knownSize == nil {
                progress.learnedSize(length)
            }
            let validator = response.validator
            let strong = validator.map { $0.hasStrongETag || $0.lastModifiedIsStrong } ?? false
            let rangesAllowed = response.acceptsRanges && strong && response.status != 0
            writer.learnResource(length: length, validator: validator)
            if length.map({ $0 >= TaskRun.journalThreshold }) ?? true {
                // A large file (or one of unknown length) is recorded as it is written; a small
                // one only if it stops half-way (see fetchPiece), so a list of small files
                // writes no journal at all.
                writer.startJournaling()
            }
            // The connections to add besides this one.
            var connections = 0
            if rangesAllowed, let length, writer.output.segments[0].range == nil {
                connections = splitting.connections(forRest: length, rateLimited: engine.globalRateLimit != nil) - 1
            }
            sink.post(.resourceKnown(output: index, rangesAllowed: rangesAllowed, connections: connections, roundTrip: response.roundTripTime))
            // (A run started without a task needs its loop now, to split the rest.)
            if connections > 0 { run.directNeedsTask() }
            if writer.namedByResponse {
                let proposal = ResponseNaming.fileName(url: response.effectiveURL, headers: response.headers)
                writer.proposal = proposal
                sink.post(.named(output: index, proposal: proposal))
            }
            return .proceed
        }
    }

    /// Single outputs larger than this are recorded in the journal as they are written.
    static let journalThreshold: Int64 = 4 << 20

    /// A single output the cache has, linked into place; its size, or `nil` on a miss.
    private func singleFromCache(_ writer: OutputWriter) async -> Int64? {
        guard let cache = services.cache else { return nil }
        let key = cacheKey(0, of: writer)
        guard cache.contains(key) else { return nil }
        let segment = writer.output.segments[0]
        return try? await services.executor.run { () throws(DownloadError) -> Int64? in
            guard let entry = cache.lookup(key, expectedSize: segment.expectedSize, checksum: segment.checksum) else { return nil }
            try cache.place(entry, at: writer.partPath)
            return entry.size
        }
    }

    // MARK: - Finishing an output

    /// Finishes an output whose segments are all done: its partial file cut to its size,
    /// checked against the manifest's size and checksum, and moved to its final place without
    /// replacing any file; a file found there sends it to the next free name. `original` is the
    /// name the output's names are made from; `taken` the paths found occupied already. `nil`
    /// when done.
    func finalize(_ writer: OutputWriter, original: String, taken: Set<String> = []) async -> DownloadError? {
        switch writer.kind {
        case .cacheOnly, .separate:
            return nil
        case .single, .ordered, .pieces:
            break
        }
        var taken = taken
        for _ in 0..<100 {
            if !taken.isEmpty || writer.namedByResponse { claimName(of: writer, original: original, taken: taken) }
            do {
                let moved = try await services.executor.run { () throws(DownloadError) -> Bool in
                    try self.moveIntoPlace(writer)
                }
                if moved { return nil }
            } catch {
                return error
            }
            // A file is at the destination (it appeared since the name was chosen): another name.
            taken.insert(writer.finalPath)
        }
        return DownloadError(.writeFailed, "no free name was found for \(writer.output.name)")
    }

    /// Names an output: the first of `original`, `original.1`, … that no other task's output
    /// holds and that is not in `taken` (paths found occupied on disk) is claimed for this task,
    /// the writer moves its final path there, and the manager hears of it (for the task's
    /// snapshots and the store). Any thread.
    func claimName(of writer: OutputWriter, original: String, taken: Set<String>) {
        let path = claimFirstFree(writer.output, index: writer.index, original: original, releasing: writer.finalPath, taken: taken)
        if path != writer.finalPath { writer.rename(to: path) }
    }

    /// Claims for output `index` (`output` of the manifest) the first of `original`,
    /// `original.1`, … that no other task's output holds and that is not in `taken`, letting go
    /// of `current`; the manager hears of a new name. Returns its path. Any thread.
    func claimFirstFree(
        _ output: DownloadOutput, index: Int, original: String, releasing current: String?, taken: Set<String>
    ) -> String {
        let layout = services.layout, entity = self.entity
        let (name, path) = services.claims.claimFirstFree(original, for: ticket.handle, releasing: current, taken: taken) { name in
            var renamed = output
            renamed.name = name
            return layout.outputPath(entity: entity, output: renamed)
        }
        if path != current { mailbox.report(.named(output: index, name: name, original: original)) }
        return path
    }

    /// What a request asks before each write to the task's files under a shared root (a fleet's
    /// lease, see ``TaskWriteFence``); `nil` without a fence.
    var writeCheck: (@Sendable () -> Bool)? {
        guard let fence = services.layout.fence else { return nil }
        let id = self.id
        return { fence.permitsWrite(to: id) }
    }

    /// Finishes an output whose segments are all in, at its final path as it stands: the partial
    /// file cut to its size, checked, and moved there without replacing a file. `false` when a
    /// file is there. `known`: the partial file's size when the caller wrote it all and knows it
    /// (no need to look). Blocking (the executor's, or another thread that may block).
    func moveIntoPlace(_ writer: OutputWriter, size known: Int64? = nil) throws(DownloadError) -> Bool {
        // Another process may hold the task now (a fleet's lease): nothing is moved without it.
        if let fence = services.layout.fence, !fence.awaitWritePermission(for: id) {
            throw DownloadError(.cancelled, "\(writer.output.name) was not moved into place: this process no longer holds the task")
        }
        let destination = writer.finalPath
        let part = writer.partPath
        let length: Int64? = switch writer.kind {
        case .single: writer.resource.length
        case .ordered: writer.orderedLength
        default: writer.output.expectedSize ?? writer.output.knownSize
        }
        var size = known ?? FileOperations.size(part)
        if size == nil, FileOperations.exists(destination) {
            // Moved by an earlier run that stopped before recording it.
            try Self.verify(writer.output, at: destination)
            return true
        }
        // Every segment is in: the journal says so on disk before the output is assembled, so a
        // kill from here on fetches nothing again.
        writer.journal.commit()
        if size == nil {
            try FileOperations.createEmpty(part)
            size = 0
        }
        if let length, size != length {
            try FileOperations.truncate(part, to: length)
            size = length
        }
        if writer.kind == .single, let checksum = writer.output.segments[0].checksum {
            try checksum.verify(fileAt: part)
        }
        try Self.verify(writer.output, at: part, size: size)
        CrashPoint.assembled.reach()
        if writer.kind == .single, writer.namedByResponse {
            // The partial file (in the work directory, named after the task) stays the output's
            // second name until the store has recorded the task complete: a run after a kill in
            // between finds the two names of one file and knows the output is this task's
            // (``TaskRun/restore``), instead of fetching it again beside itself.
            switch try FileOperations.linkWithoutReplacing(part, to: destination) {
            case true?:
                break
            case false?:
                // A file is there: this output's own (linked by a run that stopped before it was
                // recorded), or another file, which is never replaced.
                guard FileOperations.isSameFile(part, destination) else { return false }
            case nil:
                guard try FileOperations.moveWithoutReplacing(part, to: destination) else { return false }
            }
        } else {
            guard try FileOperations.moveWithoutReplacing(part, to: destination) else { return false }
        }
        writer.journal.update(writer.index) { $0 = TaskJournal.Output() }
        fillCache(from: writer, at: destination)
        CrashPoint.moved.reach()
        return true
    }

    /// Finishes a small single output on the engine thread as its only connection ends with all
    /// of its bytes (`result`, of the first piece `piece`): the move into place is a rename, no
    /// dearer than the writes this thread makes, so it needs no hop to the blocking executor and
    /// back, and the run hears of the transfer's end and the output's finish at once. Only where
    /// finishing needs nothing else: no checksum to compute, no journal to commit, no fence to wait
    /// for, no other connection, a run not stopping. The loop takes the result up when its plan
    /// finalizes the output (``OutputWriter/takeEarlyFinish()``); otherwise it finalizes as usual.
    func finishEarly(_ writer: OutputWriter, piece: SingleOutputState.Piece, _ result: RunWorkResult) {
        guard case .pieceEnded(_, nil, let written, false) = result, piece.isFirst, piece.start == 0, writer.kind == .single,
            let length = writer.resource.length, length == written, configuration.splitting.connections(forRest: length) == 1,
            services.engine.globalRateLimit == nil, services.layout.fence == nil, !writer.isJournaled,
            writer.output.checksum == nil, writer.output.segments.checksum(at: 0) == nil, writer.output.segments[0].range == nil,
            !events.isFinished
        else { return }
        if writer.namedByResponse {
            // The name the loop gives it when it hears of the proposal (the same claim: it keeps it).
            guard let proposal = writer.proposal else { return }
            claimName(of: writer, original: SafePath.sanitizedFileName(proposal, fallback: writer.output.name), taken: [])
        }
        let finish: OutputWriter.EarlyFinish
        do throws(DownloadError) {
            finish = try moveIntoPlace(writer, size: written) ? .moved : .occupied
        } catch {
            finish = .failed(error)
        }
        writer.setEarlyFinish(finish)
    }

    /// Files the output's content-addressed segments (those with a checksum, which any entity
    /// may share) in the cache: a single-segment output by a link to the finished file, a segment
    /// inside an output by a copy of its bytes. Segments without a checksum are the task's own and
    /// stay out (`startCache` fills the cache with them). Blocking; errors only cost the cache.
    private func fillCache(from writer: OutputWriter, at path: String) {
        guard let cache = services.cache, mode == .download else { return }
        switch writer.kind {
        case .single:
            let segment = writer.output.segments[0]
            guard let checksum = segment.checksum else { return }
            _ = try? cache.insert(cacheKey(0, of: writer), from: path, checksum: checksum)
        case .ordered:
            let segments = writer.output.segments
            guard segments.hasChecksums else { return }
            for (index, segment) in segments.enumerated() where segment.checksum != nil && segment.encryption == nil {
                guard let offset = writer.offset(of: index), let size = writer.size(of: index), size > 0 else { continue }
                let key = cacheKey(index, of: writer)
                guard !cache.contains(key) else { continue }
                _ = try? cache.insert(key, from: path, range: ByteRange(offset: offset, length: size), checksum: segment.checksum)
            }
        default:
            return
        }
    }

    static func verify(_ output: DownloadOutput, at path: String, size known: Int64? = nil) throws(DownloadError) {
        if let expected = output.expectedSize, let size = known ?? FileOperations.size(path), size != expected {
            throw DownloadError(.sizeMismatch, "\(output.name) has \(size) bytes, the manifest says \(expected)")
        }
        if let checksum = output.checksum { try checksum.verify(fileAt: path) }
    }
}
