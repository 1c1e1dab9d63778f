import Foundation
import Synchronization

/// One run of one task: resolve (unless a stored manifest is still good), fetch the pending
/// segments with retries, mirrors and re-resolves, then assemble and verify the outputs.
///
/// The run works off the manager's actor and reports every step back to it; the actor keeps
/// the task's state. A stopped run is cancelled; its last checkpoints are still recorded.
struct TaskRun: Sendable {
    let manager: DownloadTaskManager
    let id: DownloadTaskID
    let generation: Int
    let entity: DownloadBaseEntity
    let mode: DownloadTaskMode
    let counter: ProgressCounter
    let engine: CurlEngine
    let limiter: AsyncSemaphore
    let broker: SegmentBroker
    let cache: SegmentCache?
    let diskGate: DiskGate?
    let layout: FileLayout
    let configuration: DownloadTaskManager.Configuration
    private let keys = KeyStore()
    private let deadMirrors = DeadMirrors()

    init(
        manager: DownloadTaskManager, id: DownloadTaskID, generation: Int, entity: DownloadBaseEntity,
        mode: DownloadTaskMode, counter: ProgressCounter, engine: CurlEngine, limiter: AsyncSemaphore,
        broker: SegmentBroker, cache: SegmentCache?, diskGate: DiskGate?, layout: FileLayout,
        configuration: DownloadTaskManager.Configuration
    ) {
        self.manager = manager
        self.id = id
        self.generation = generation
        self.entity = entity
        self.mode = mode
        self.counter = counter
        self.engine = engine
        self.limiter = limiter
        self.broker = broker
        self.cache = cache
        self.diskGate = diskGate
        self.layout = layout
        self.configuration = configuration
    }

    private var policy: RetryPolicy { configuration.retry }

    enum Outcome: Sendable {
        case complete
        /// Every URL of a segment looks stale: resolve the entity again.
        case reResolve(DownloadError)
        /// The resource behind an output changed under its pieces: start the output over.
        case resetOutput(Int, DownloadError)
    }

    enum SegmentOutcome: Sendable {
        case done(path: String)
        case reResolve(DownloadError)
        case resetOutput(Int, DownloadError)
    }

    /// Every host of a segment is unreachable (name resolution, refused, no route): the task
    /// waits for the network instead of spending its retries.
    struct NetworkUnavailable: Error {
        var error: DownloadError
    }

    // MARK: - The run

    func run() async {
        // A running task counts for the fair share of segment slots (see AsyncSemaphore).
        limiter.join(id)
        defer { limiter.leave(id) }
        do {
            guard let start = await manager.runnerStart(id, generation: generation) else { return }
            var resolves = start.resolveCount
            var plan: RunPlan
            if let manifest = start.manifest, !manifest.isExpired() {
                guard let begun = await manager.runnerBeginDownloading(id, generation: generation, manifest: manifest, resolved: false)
                else { return }
                plan = begun
            } else {
                plan = try await resolveAndBegin(attempt: resolves + 1, previous: start.manifest)
                resolves += 1
            }
            var reResolves = 0
            var retriedOutputs = Set<Int>()
            while true {
                try Task.checkCancellation()
                switch try await fetchAll(plan) {
                case .reResolve(let error):
                    reResolves += 1
                    guard reResolves <= policy.maxReResolves else { throw error }
                    guard await manager.runnerReResolving(id, generation: generation, because: error) else { return }
                    plan = try await resolveAndBegin(attempt: resolves + 1, previous: plan.manifest)
                    resolves += 1
                    continue
                case .resetOutput(let index, let error):
                    guard retriedOutputs.insert(index).inserted, reResolves < policy.maxReResolves else { throw error }
                    reResolves += 1
                    removeOutputFiles(plan.manifest, index)
                    guard await manager.runnerResetOutput(id, generation: generation, output: index) != nil,
                        await manager.runnerReResolving(id, generation: generation, because: error)
                    else { return }
                    plan = try await resolveAndBegin(attempt: resolves + 1, previous: plan.manifest)
                    resolves += 1
                    continue
                case .complete:
                    break
                }
                if mode == .cacheOnly { break }
                // Assemble and verify; a bad output is fetched again once.
                var bad: (index: Int, error: DownloadError)?
                for index in plan.outputs {
                    do {
                        try await assemble(plan.manifest, output: index)
                    } catch {
                        guard error.code == .checksumMismatch || error.code == .sizeMismatch else { throw error }
                        bad = (index, error)
                        break
                    }
                }
                guard let bad else { break }
                guard retriedOutputs.insert(bad.index).inserted else {
                    throw DownloadError(.checksumMismatch, "\(bad.error.message), again after downloading it a second time", url: bad.error.url)
                }
                await manager.runnerError(id, generation: generation, bad.error)
                removeOutputFiles(plan.manifest, bad.index)
                guard let fresh = await manager.runnerResetOutput(id, generation: generation, output: bad.index) else { return }
                plan = fresh
            }
            await manager.runnerFinished(id, generation: generation, error: nil)
        } catch let error as DownloadError where error.code == .cancelled || error.code == .engineShutDown || Task.isCancelled {
            // Stopped, or the engine (the process) is going away: the task stays as recorded
            // and resumes from its checkpoints next time.
            return
        } catch is CancellationError {
            return
        } catch let unavailable as NetworkUnavailable {
            await manager.runnerLostNetwork(id, generation: generation, unavailable.error)
        } catch let error as DownloadError {
            await manager.runnerFinished(id, generation: generation, error: error)
        } catch {
            await manager.runnerFinished(id, generation: generation, error: DownloadError(.transport, "\(error)"))
        }
    }

    // MARK: - Resolving

    /// Resolves (retrying transient failures with backoff) and starts downloading.
    private func resolveAndBegin(attempt: Int, previous: DownloadManifest?) async throws -> RunPlan {
        var failures = 0
        var random = makeRandom(salt: "resolve")
        while true {
            do {
                let manifest = try await resolve(attempt: attempt, previous: previous)
                guard let plan = await manager.runnerBeginDownloading(id, generation: generation, manifest: manifest, resolved: true)
                else { throw CancellationError() }
                return plan
            } catch let error as DownloadError where error.isConnectivity && !Task.isCancelled {
                throw NetworkUnavailable(error: error)
            } catch let error as DownloadError where error.isTransient && !error.isPermanent && !Task.isCancelled {
                failures += 1
                guard failures < policy.maxAttempts else { throw error }
                await manager.runnerError(id, generation: generation, error)
                try await configuration.sleeper.sleep(
                    for: policy.delay(afterFailure: failures, retryAfter: error.retryAfter, using: &random))
            }
        }
    }

    private func resolve(attempt: Int, previous: DownloadManifest?) async throws -> DownloadManifest {
        guard let parser = entity as? any DownloadParserProtocol else {
            throw DownloadError(.invalidRequest, "\(type(of: entity).entityType) entities have no parser")
        }
        let context = ResolveContext(
            engine: engine, headers: configuration.headers, maxSegments: configuration.maxSegments,
            maxDocumentSize: configuration.maxManifestSize, attempt: attempt, previousManifest: previous,
            splitting: configuration.splitting, logger: configuration.logger)
        let manifest: DownloadManifest
        do {
            manifest = try await parser.resolve(in: context)
        } catch let error as DownloadError {
            throw error
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw DownloadError(.manifestInvalid, "the \(type(of: entity).entityType) parser failed: \(error)")
        }
        try manifest.validate(maxSegments: configuration.maxSegments, includingUnselected: mode == .cacheOnly)
        return manifest
    }

    // MARK: - Segments

    /// Fetches every pending segment, at most ``DownloadTaskManager/Configuration/maxConcurrentSegments``
    /// of this task at a time (and as many over all tasks).
    private func fetchAll(_ plan: RunPlan) async throws -> Outcome {
        guard !plan.pending.isEmpty else { return .complete }
        let width = max(1, configuration.maxConcurrentSegments)
        return try await withThrowingTaskGroup(of: SegmentOutcome.self) { group in
            var iterator = plan.pending.makeIterator()
            let expiresAt = plan.manifest.expiresAt
            func addNext() {
                guard let planned = iterator.next() else { return }
                group.addTask { try await fetch(planned, expiresAt: expiresAt) }
            }
            for _ in 0..<width { addNext() }
            // A stale URL stops new segments, but the ones in flight finish: their URLs work and
            // their bytes count. A changed resource stops everything at once: those bytes are stale.
            var reResolve: DownloadError?
            while let outcome = try await group.next() {
                switch outcome {
                case .done:
                    if reResolve == nil { addNext() }
                case .reResolve(let error):
                    if reResolve == nil { reResolve = error }
                case .resetOutput(let index, let error):
                    group.cancelAll()
                    await drain(&group)
                    return .resetOutput(index, error)
                }
            }
            if let reResolve { return .reResolve(reResolve) }
            return .complete
        }
    }

    private func drain(_ group: inout ThrowingTaskGroup<SegmentOutcome, any Error>) async {
        while true {
            do {
                guard try await group.next() != nil else { return }
            } catch {
                continue
            }
        }
    }

    /// One segment: from the cache when it is there, shared with another task fetching the
    /// same bytes when there is one, otherwise downloaded.
    private func fetch(_ planned: PlannedSegment, expiresAt: Date?) async throws -> SegmentOutcome {
        let destination = layout.destination(of: planned, task: id, entity: entity, mode: mode)
        let cacheKey = entity.cacheKey(for: planned.location)
        if let outcome = try await fromCache(planned, destination: destination, cacheKey: cacheKey) { return outcome }
        guard destination.isWholeFile, planned.segment.encryption == nil else {
            return try await download(planned, to: destination, cacheKey: cacheKey, expiresAt: expiresAt)
        }
        switch broker.claim(cacheKey) {
        case .wait:
            if let source = await broker.wait(for: cacheKey) {
                defer { broker.release(cacheKey) }
                let target = destination.finalPath ?? destination.path
                if mode == .cacheOnly, cache?.contains(cacheKey) == true {
                    // The producer filed it already.
                } else {
                    try FileOperations.linkOrCopy(source, to: target)
                }
                let size = FileOperations.size(source) ?? 0
                await finish(planned, bytes: size, validator: nil, cacheKey: cacheKey)
                return .done(path: target)
            }
            try Task.checkCancellation()
            if let outcome = try await fromCache(planned, destination: destination, cacheKey: cacheKey) { return outcome }
            return try await download(planned, to: destination, cacheKey: cacheKey, expiresAt: expiresAt)
        case .produce:
            do {
                let outcome = try await download(planned, to: destination, cacheKey: cacheKey, expiresAt: expiresAt)
                if case .done(let path) = outcome {
                    await broker.publish(cacheKey, path: path)
                } else {
                    broker.fail(cacheKey)
                }
                return outcome
            } catch {
                broker.fail(cacheKey)
                throw error
            }
        }
    }

    /// Downloads one segment: mirrors in order, backoff between rounds, the failure counter
    /// reset by progress, stale URLs sent back for a re-resolve, checksums verified.
    private func download(
        _ planned: PlannedSegment, to destination: SegmentDestination, cacheKey: String, expiresAt: Date?
    ) async throws -> SegmentOutcome {
        let segment = planned.segment
        let urls = segment.urls
        var headers = configuration.headers
        for field in segment.headers { headers.replaceOrAdd(name: field.name, value: field.value) }
        var checkpoint = planned.checkpoint
        if destination.isWholeFile, destination.ownsTail,
            let recovered = TransferCheckpoint.recovered(fromFileAt: destination.path, offset: destination.offset),
            recovered.bytesWritten > (checkpoint?.bytesWritten ?? 0)
        {
            // Bytes written after the last stored checkpoint (a crash came in between).
            checkpoint = recovered
        }
        // A mirror that answered 404 (or another final refusal) for an earlier segment of this
        // run is tried last, not first: pieces of one file share their mirrors.
        var mirror = urls.indices.first { !deadMirrors.contains(urls[$0]) } ?? 0
        var dead = Set<Int>()
        var triedThisRound = Set<Int>()
        var failures = 0
        var checksumFailures = 0
        var random = makeRandom(salt: "\(planned.key.output)-\(planned.key.segment)")
        func nextMirror(excluding excluded: Set<Int>) -> Int? {
            (1...urls.count).lazy.map { (mirror + $0) % urls.count }.first { !excluded.contains($0) && !dead.contains($0) }
        }

        while true {
            try Task.checkCancellation()
            if let expiresAt, expiresAt <= Date() {
                counter.abandon(planned.key)
                return .reResolve(DownloadError(.manifestExpired, "the manifest's URLs expired at \(expiresAt)"))
            }
            if let diskGate, let error = diskGate.refusal() { throw error }
            let before = checkpoint?.bytesWritten ?? 0
            var request = TransferRequest(
                url: urls[mirror], range: segment.range, headers: headers, destination: destination.transferDestination,
                resume: checkpoint, expectedLength: segment.encryption == nil ? segment.expectedSize : nil)
            request.recordsValidator = destination.isWholeFile && destination.ownsTail
            do {
                try await limiter.acquire(for: id)
                let result: TransferResult
                do {
                    let counter = self.counter, key = planned.key
                    result = try await engine.transfer(request) { progress in counter.update(key, progress.checkpoint) }
                    limiter.release(for: id)
                } catch {
                    limiter.release(for: id)
                    throw error
                }
                if let checksum = segment.checksum {
                    let region = destination.isWholeFile ? nil : ByteRange(offset: destination.offset, length: max(1, result.bytesWritten))
                    do {
                        try checksum.verify(fileAt: destination.path, range: region)
                    } catch let mismatch {
                        guard mismatch.code == .checksumMismatch else { throw mismatch }
                        checksumFailures += 1
                        checkpoint = nil
                        counter.abandon(planned.key)
                        await recordCheckpoint(planned, TransferCheckpoint(bytesWritten: 0, validator: nil))
                        guard checksumFailures < 2 else {
                            throw DownloadError(.checksumMismatch, "\(mismatch.message), again after downloading it a second time", url: urls[mirror].absoluteString)
                        }
                        await manager.runnerError(id, generation: generation, mismatch)
                        // Another mirror, if there is one, for the second try.
                        mirror = nextMirror(excluding: [mirror]) ?? mirror
                        continue
                    }
                }
                var size = result.bytesWritten
                if let encryption = segment.encryption {
                    size = try await decrypt(destination.path, encryption)
                }
                if let finalPath = destination.finalPath {
                    try FileOperations.rename(destination.path, to: finalPath)
                }
                let placed = destination.finalPath ?? destination.path
                if let cache, destination.isWholeFile {
                    do {
                        let entry = try cache.insert(cacheKey, from: placed, checksum: segment.checksum)
                        if mode == .cacheOnly {
                            FileOperations.remove(placed)
                            await finish(planned, bytes: size, validator: result.validator, cacheKey: cacheKey)
                            return .done(path: entry.path)
                        }
                    } catch {
                        // A full or broken cache must not fail a good download.
                        configuration.logger.warning("could not cache a segment: \(error)")
                        if mode == .cacheOnly { throw error }
                    }
                }
                await finish(planned, bytes: size, validator: result.validator, cacheKey: cacheKey)
                return .done(path: placed)
            } catch let error as DownloadError {
                if let saved = error.checkpoint, destination.ownsTail || saved.bytesWritten > 0 {
                    checkpoint = saved
                    if saved.bytesWritten > 0 { await recordCheckpoint(planned, saved) }
                }
                if error.code == .cancelled || error.code == .engineShutDown || Task.isCancelled { throw CancellationError() }
                if (checkpoint?.bytesWritten ?? 0) > before {
                    failures = 0
                    triedThisRound.removeAll()
                }
                if error.code == .contentChanged {
                    checkpoint = nil
                    counter.abandon(planned.key)
                    if !destination.isWholeFile { return .resetOutput(planned.key.output, error) }
                    await manager.runnerError(id, generation: generation, error)
                    continue
                }
                if error.isLocal { throw error }
                if error.httpStatus == 412, !destination.isWholeFile {
                    // The file changed under its pieces: the ones already done are of the old version.
                    counter.abandon(planned.key)
                    return .resetOutput(planned.key.output, error)
                }
                if error.isTransient, !error.suggestsReResolve {
                    triedThisRound.insert(mirror)
                    if let next = nextMirror(excluding: triedThisRound) {
                        await manager.runnerError(id, generation: generation, error)
                        mirror = next
                        continue
                    }
                    if error.isConnectivity {
                        // Every mirror is unreachable: wait for the network, keep the retries.
                        counter.abandon(planned.key)
                        throw NetworkUnavailable(error: error)
                    }
                    failures += 1
                    guard failures < policy.maxAttempts else { throw error }
                    await manager.runnerError(id, generation: generation, error)
                    triedThisRound.removeAll()
                    mirror = nextMirror(excluding: []) ?? mirror
                    try await configuration.sleeper.sleep(
                        for: policy.delay(afterFailure: failures, retryAfter: error.retryAfter, using: &random))
                    continue
                }
                // Refused for good by this URL (gone, forbidden, or a permanent error): the next
                // mirror, if any; then a stale URL (403/404/410/412) resolves the entity again.
                dead.insert(mirror)
                deadMirrors.insert(urls[mirror])
                if let next = nextMirror(excluding: []) {
                    await manager.runnerError(id, generation: generation, error)
                    mirror = next
                    continue
                }
                guard error.suggestsReResolve else { throw error }
                counter.abandon(planned.key)
                return .reResolve(error)
            }
        }
    }

    /// Places a verified cache entry and records the segment as done; `nil` on a miss.
    private func fromCache(_ planned: PlannedSegment, destination: SegmentDestination, cacheKey: String) async throws
        -> SegmentOutcome?
    {
        guard let cache else { return nil }
        let segment = planned.segment
        let expected = segment.encryption == nil ? segment.expectedSize : nil
        guard let entry = cache.lookup(cacheKey, expectedSize: expected, checksum: segment.checksum) else { return nil }
        if mode == .cacheOnly {
            await finish(planned, bytes: entry.size, validator: nil, cacheKey: cacheKey)
            return .done(path: entry.path)
        }
        let target = destination.finalPath ?? destination.path
        try cache.place(entry, at: target, offset: destination.isWholeFile ? nil : destination.offset)
        await finish(planned, bytes: entry.size, validator: nil, cacheKey: cacheKey)
        return .done(path: target)
    }

    private func finish(_ planned: PlannedSegment, bytes: Int64, validator: ResourceValidator?, cacheKey: String) async {
        counter.finish(planned.key, bytes: bytes)
        await manager.runnerSegmentDone(SegmentProgress(
            taskID: id, outputIndex: planned.key.output, segmentIndex: planned.key.segment, isDone: true,
            bytesWritten: bytes, validator: validator, cacheKey: cacheKey))
    }

    private func recordCheckpoint(_ planned: PlannedSegment, _ checkpoint: TransferCheckpoint) async {
        await manager.runnerSegmentCheckpoint(SegmentProgress(
            taskID: id, outputIndex: planned.key.output, segmentIndex: planned.key.segment, isDone: false,
            bytesWritten: checkpoint.bytesWritten, validator: checkpoint.validator))
    }

    /// Decrypts a whole-file segment in place; returns its new size.
    private func decrypt(_ path: String, _ encryption: SegmentEncryption) async throws -> Int64 {
        let key = try await keys.key(for: encryption.keyURL, engine: engine, headers: configuration.headers)
        let decrypted = path + ".dec"
        try AES128CBC.decryptFile(at: path, to: decrypted, key: key, iv: encryption.iv)
        try FileOperations.rename(decrypted, to: path)
        return FileOperations.size(path) ?? 0
    }

    // MARK: - Outputs

    /// Puts an output together from its segments, checks its size and checksum, and moves it
    /// to its final name. Idempotent: an output already in place and valid is accepted.
    private func assemble(_ manifest: DownloadManifest, output index: Int) async throws(DownloadError) {
        let output = manifest.outputs[index]
        let path = layout.outputPath(entity: entity, output: output)
        let part = FileLayout.partPath(path)
        switch output.assembly {
        case .separateFiles:
            for segment in output.segments {
                let file = SafePath.join(path, try SafePath.relative(segment.name ?? ""))
                guard FileOperations.exists(file) else {
                    throw DownloadError(.sizeMismatch, "the segment file \(file) is missing")
                }
            }
            await manager.runnerOutputCompleted(id, output: index)
            return
        case .concatenated where output.segments.count > 1:
            let files = output.segments.indices.map { layout.segmentPath(of: id, SegmentKey(output: index, segment: $0)) }
            if files.allSatisfy(FileOperations.exists) {
                try FileOperations.createParent(of: part)
                let descriptor = open(part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
                guard descriptor >= 0 else { throw FileOperations.systemError(errno, "could not create \(part)") }
                defer { close(descriptor) }
                for file in files { try FileOperations.append(file, to: descriptor, destinationPath: part) }
            } else if !FileOperations.exists(part), FileOperations.exists(path) {
                // Assembled and moved by an earlier run that stopped before recording it.
                try verify(output, at: path)
                await manager.runnerOutputCompleted(id, output: index)
                return
            }
        case .pieces:
            if FileOperations.exists(part), let size = output.knownSize {
                try FileOperations.truncate(part, to: size)
            }
        case .concatenated:
            break
        }
        if !FileOperations.exists(part), FileOperations.exists(path) {
            try verify(output, at: path)
        } else {
            if !FileOperations.exists(part) {
                // An empty output (a zero-byte segment) may have no file yet.
                try FileOperations.createParent(of: part)
                _ = FileManager.default.createFile(atPath: part, contents: nil)
            }
            try verify(output, at: part)
            try FileOperations.rename(part, to: path)
        }
        if output.assembly == .concatenated, output.segments.count > 1 {
            for segment in output.segments.indices {
                FileOperations.remove(layout.segmentPath(of: id, SegmentKey(output: index, segment: segment)))
            }
        }
        await manager.runnerOutputCompleted(id, output: index)
    }

    private func verify(_ output: DownloadOutput, at path: String) throws(DownloadError) {
        if let expected = output.expectedSize, let size = FileOperations.size(path), size != expected {
            throw DownloadError(.sizeMismatch, "\(output.name) has \(size) bytes, the manifest says \(expected)")
        }
        if let checksum = output.checksum { try checksum.verify(fileAt: path) }
    }

    private func removeOutputFiles(_ manifest: DownloadManifest, _ index: Int) {
        let output = manifest.outputs[index]
        let path = layout.outputPath(entity: entity, output: output)
        FileOperations.remove(FileLayout.partPath(path))
        for segment in output.segments.indices {
            FileOperations.remove(layout.segmentPath(of: id, SegmentKey(output: index, segment: segment)))
        }
    }

    private func makeRandom(salt: String) -> SplitMixRandom {
        var seed = configuration.randomSeed ?? UInt64.random(in: 0...UInt64.max)
        for byte in "\(id)/\(salt)".utf8 { seed = (seed ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return SplitMixRandom(seed: seed)
    }
}

/// URLs that refused for good (404, 410, …) during one run, so the next segments that list
/// them as mirrors start with another.
private final class DeadMirrors: Sendable {
    private let urls = Mutex<Set<URL>>([])

    func insert(_ url: URL) { _ = urls.withLock { $0.insert(url) } }
    func contains(_ url: URL) -> Bool { urls.withLock { $0.contains(url) } }
}

/// The keys of encrypted segments, fetched once per run: concurrent segments that share a key
/// wait for the one fetch in flight instead of each asking the server.
private final class KeyStore: Sendable {
    private let keys = Mutex<[URL: Task<[UInt8], any Error>]>([:])

    func key(for url: URL, engine: CurlEngine, headers: HTTPHeaders) async throws -> [UInt8] {
        let fetch = keys.withLock { keys in
            if let fetch = keys[url] { return fetch }
            let fetch = Task { try await Self.fetch(url, engine: engine, headers: headers) }
            keys[url] = fetch
            return fetch
        }
        do {
            return try await fetch.value
        } catch {
            // A failed fetch is not remembered: the next segment's retry asks again.
            keys.withLock { keys in
                if keys[url] == fetch { keys[url] = nil }
            }
            throw error
        }
    }

    private static func fetch(_ url: URL, engine: CurlEngine, headers: HTTPHeaders) async throws -> [UInt8] {
        try URLSafety.check(url, context: "the key URL")
        var request = TransferRequest.fetch(url, limit: 64, headers: headers)
        request.acceptsCompression = false
        let result = try await engine.transfer(request)
        let key = [UInt8](result.body ?? Data())
        guard key.count == 16 else {
            throw DownloadError(.cryptoFailure, "the key at \(url.absoluteString) has \(key.count) bytes, AES-128 needs 16", url: url.absoluteString)
        }
        return key
    }
}
