import Foundation
import Synchronization
import Logging

/// What every run of a manager shares.
final class RunServices: Sendable {
    let engine: CurlEngine
    let cache: SegmentCache?
    let executor: BlockingExecutor
    let layout: FileLayout
    let configuration: DownloadTaskManager.Configuration
    let diskGate: DiskGate?
    /// Which task holds each output path.
    let claims: OutputClaims

    init(
        engine: CurlEngine, cache: SegmentCache?, executor: BlockingExecutor, layout: FileLayout,
        configuration: DownloadTaskManager.Configuration, diskGate: DiskGate?, claims: OutputClaims
    ) {
        self.engine = engine
        self.cache = cache
        self.executor = executor
        self.layout = layout
        self.configuration = configuration
        self.diskGate = diskGate
        self.claims = claims
    }
}

/// What reaches a run's loop: slots from the scheduler, and the ends of its own work.
enum RunEvent: Sendable {
    /// The scheduler granted `count` segment slots for `host`.
    case granted(host: String, count: Int)
    /// The scheduler's fair share for this run changed.
    case share(Int)
    /// A piece of work ended.
    case finished(RunWork, host: String, RunWorkResult)
    /// A retry's wait is over: the work wants a slot again.
    case due(RunWork)
    /// A single output's first response told whether its ranges may be asked for, and how many
    /// more connections may share it.
    case resourceKnown(output: Int, rangesAllowed: Bool, connections: Int, roundTrip: Duration?)
    /// A response of a single output measured its connection's round trip (under a rate limit,
    /// it sizes the ranges asked for).
    case roundTrip(output: Int, Duration)
    /// A single output's first response proposed a name for it (settled when it is finished).
    case named(output: Int, proposal: String)
    /// An output was finished (assembled, verified, moved into place), or could not be.
    case finalized(output: Int, DownloadError?)
    /// A file is at an output's place: it needs another name.
    case needsAnotherName(output: Int)
    /// Work started without a task of its own (its transfer `transfer`) ended.
    case quickEnded(RunWork, host: String, transfer: Int, QuickEnd)
}

/// How work started without a task of its own ended.
enum QuickEnd: Sendable {
    /// With this result.
    case result(RunWorkResult)
    /// A segment's first attempt that needs the full path from here (a retry, a check, a stash).
    case handOver(TaskRun.StartedAttempt)
}

/// The transfers a run's loop started itself (no task of their own): stopped with the loop, and
/// waited for before it returns.
final class InFlightTransfers: Sendable {
    private struct State {
        var next = 0
        var handles: [Int: TransferHandle] = [:]
        var reserved: Set<Int> = []
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let state = Locked(State())

    /// A number for a transfer about to start.
    func reserve() -> Int {
        state.withLock { state in
            state.next += 1
            state.reserved.insert(state.next)
            return state.next
        }
    }

    /// The transfer `key` started (unless it has ended already).
    func started(_ key: Int, _ handle: TransferHandle) {
        state.withLock { state in
            if state.reserved.contains(key) { state.handles[key] = handle }
        }
    }

    /// The transfer `key` ended, or never started.
    func ended(_ key: Int) {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.reserved.remove(key)
            state.handles[key] = nil
            guard state.reserved.isEmpty else { return nil }
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// Stops every transfer still running (each ends with a cancellation, as told to its end).
    func cancelAll(on engine: CurlEngine) {
        for handle in state.withLock({ Array($0.handles.values) }) { engine.cancel(handle) }
    }

    /// Returns once every transfer has ended.
    func drained() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                if state.reserved.isEmpty { return true }
                state.waiter = continuation
                return false
            }
            if now { continuation.resume() }
        }
    }
}

/// A unit of work that holds one segment slot while it runs.
enum RunWork: Sendable, Hashable {
    /// A segment of an ordered, pieces, separate or cache-only output.
    case segment(output: Int, segment: Int)
    /// A connection for a single output: it fetches the first range nobody fetches, or half of
    /// the busiest connection's rest. `attempt` names the retry state it carries on, if any.
    case piece(output: Int, attempt: Int?)
}

/// How a unit of work ended.
enum RunWorkResult: Sendable {
    /// The segment is done (or the piece's bytes are in).
    case done
    /// Nothing was left to do for this slot.
    case idle
    /// Wait, then try again (the slot is given back meanwhile).
    case retry(after: Duration, state: RetryState)
    /// A connection of a single output ended: `written` bytes from its start are on disk;
    /// `error` when it ended early.
    case pieceEnded(pieceID: Int, error: DownloadError?, written: Int64, resumed: Bool)
    /// A connection of a single output did not start: every URL must wait (a server's
    /// `Retry-After`); it tries again after `after`, as `state` says.
    case pieceWaits(pieceID: Int, after: Duration, state: RetryState)
    /// Every URL looks stale: resolve again.
    case reResolve(DownloadError)
    /// The resource changed under the output: start it over.
    case resetOutput(Int, DownloadError)
    /// Every host is unreachable: wait for the network.
    case networkLost(DownloadError)
    /// The task fails.
    case failed(DownloadError)
}

/// What a segment's next attempt starts from.
struct RetryState: Sendable {
    var attempt: SegmentAttempt
    var next: SegmentAttempt.Action
    /// What an earlier attempt left on disk, and from which URL.
    var checkpoint: (TransferCheckpoint, mirror: Int)?
    /// Where those bytes are in the output file (`nil`: in the segment's stash file).
    var checkpointOffset: Int64?
}

/// One run of one task: resolve (unless a stored manifest is still good), fetch what is not on
/// disk yet over the segment slots the scheduler grants, finish every output, report the end.
///
/// A run decides nothing about scheduling: it asks for slots (``RunMailbox``) and uses the
/// ones it gets. What each segment does after a failure is ``SegmentAttempt``'s decision; where
/// its bytes go is ``OutputWriter``'s; what is on disk is the ``TaskJournal``'s.
final class TaskRun: Sendable {
    let ticket: RunTicket
    /// The task's identity.
    let id: DownloadTaskID
    let manager: DownloadTaskManager
    /// What the task had when the run was launched.
    let start: RunStart
    let entity: DownloadBaseEntity
    let mode: DownloadTaskMode
    let progress: TaskProgress
    let mailbox: RunMailbox
    let services: RunServices
    /// The loop's events: the manager posts grants here, the run's work its ends.
    let events: EventQueue<RunEvent>
    let shared = RunShared()
    /// How the run executes (in its task, or first without one), as the manager holds it.
    let execution: RunExecution
    /// The transfer the run started without a task (``startDirectly(host:)``), until the run ends.
    let direct = Locked<DirectTransfer?>(nil)
    /// The run's seed for retry jitter: the configuration's (tests), else a random one, mixed
    /// with the task's identity.
    let baseSeed: UInt64
    /// The engine thread of the run's transfers (chosen at the first, ``lane``), -1 before.
    private let engineLane = Atomic<Int>(-1)

    /// The engine thread every transfer of the run goes to: its hooks then never run on two
    /// threads at once, as with one engine thread. The least busy one when the run asks first.
    var lane: Int {
        let current = engineLane.load(ordering: .relaxed)
        if current >= 0 { return current }
        let chosen = services.engine.leastBusyLane()
        let (exchanged, original) = engineLane.compareExchange(expected: -1, desired: chosen, ordering: .relaxed)
        return exchanged ? chosen : original
    }

    init(
        ticket: RunTicket, id: DownloadTaskID, manager: DownloadTaskManager, start: RunStart, entity: DownloadBaseEntity, mode: DownloadTaskMode,
        progress: TaskProgress, mailbox: RunMailbox, services: RunServices, events: EventQueue<RunEvent>, baseSeed: UInt64,
        execution: RunExecution
    ) {
        self.ticket = ticket
        self.id = id
        self.manager = manager
        self.start = start
        self.entity = entity
        self.mode = mode
        self.progress = progress
        self.mailbox = mailbox
        self.services = services
        self.events = events
        self.baseSeed = baseSeed
        self.execution = execution
    }

    var configuration: DownloadTaskManager.Configuration { services.configuration }
    var policy: RetryPolicy { configuration.retry }

    /// How a download pass ended.
    enum PassOutcome {
        case complete
        case reResolve(DownloadError)
        case resetOutput(Int, DownloadError)
    }

    /// Every host of a segment is unreachable.
    struct NetworkUnavailable: Error {
        var error: DownloadError
    }

    // MARK: - The run

    func run() async {
        let ending: Scheduler.RunEnding
        var cause: DownloadError?
        do {
            try await execute()
            ending = .completed
        } catch let unavailable as NetworkUnavailable {
            ending = .networkLost(host: unavailable.error.url.flatMap { URL(string: $0) }.map(Self.hostKey))
            cause = unavailable.error
        } catch let error as DownloadError where !error.isCancellation && !Task.isCancelled {
            if error.code == .diskFull {
                ending = .diskFull
                services.diskGate?.markFull()
            } else {
                ending = .failed(permanent: error.isPermanent)
            }
            cause = error
        } catch {
            ending = .stopped
        }
        events.finish()
        // A transfer started before the task and never adopted ends before the run does.
        await abandonDirectTransfer()
        // What the journal has not written yet is written now (the next run reads it back).
        if let journal = shared.journal, journal.needsClosing {
            await services.executor.run { journal.close() }
        }
        // Also when stopped (by a command, or the manager shutting down): the state stays as
        // recorded, and the manager records what the run kept.
        mailbox.report(.ended(ending, cause))
    }

    private func execute() async throws {
        if start.waitsForDeletion, await !manager.runMayStart(ticket) { throw CancellationError() }
        var manifest: DownloadManifest
        var resolved = false
        var resolves = start.resolveCount
        // Resolved, named and announced by the manager at launch (a plain URL).
        var announced = start.announced
        if let named = announced {
            manifest = named
            resolves += 1
            resolved = true
        } else if let stored = start.manifest, !stored.isExpired() {
            manifest = stored
        } else {
            manifest = try await resolveWithRetries(attempt: resolves + 1, previous: start.manifest)
            resolves += 1
            resolved = true
        }
        var reResolves = 0
        var resetOutputs = Set<Int>()
        var events = self.events.makeIterator()
        var fresh = start.isFresh
        // What the run started before its task (its writers, the slot it used), taken up once.
        var adopted = takeDirectStart()
        while true {
            try Task.checkCancellation()
            // A task that never had a manifest has nothing on disk: it asks for its first slots
            // together with its manifest (one hop, not two).
            let named: DownloadManifest, changed: Bool, demanded: Bool
            if let ready = announced {
                announced = nil
                await start.namesStored?.value
                try Task.checkCancellation()
                (named, changed, demanded) = (ready, false, true)
            } else {
                let demand = fresh ? Self.demand(of: manifest, mode: mode, shared: shared) : nil
                guard let (kept, differs) = await manager.runHasManifest(
                    ticket, manifest, resolved: resolved, demand: demand, cap: demand == nil ? nil : initialCap(manifest))
                else {
                    throw CancellationError()
                }
                (named, changed, demanded) = (kept, differs, demand != nil)
            }
            shared.setExpiry(named.expiresAt)
            if named.isLive { return try await recordLive(named, announced: demanded) }
            if changed { await discardEverything(named) }
            let writers = if let taken = adopted?.writers { taken } else { try await prepare(named, fresh: fresh) }
            let slot = adopted?.host
            adopted = nil
            fresh = false
            switch try await download(named, writers: writers, events: &events, demanded: demanded, slot: slot) {
            case .complete:
                await finishTask(writers)
                return
            case .reResolve(let error):
                reResolves += 1
                guard reResolves <= policy.maxReResolves, (entity as? any DownloadParserProtocol)?.resolvesToFreshURLs ?? true
                else { throw error }
                mailbox.report(.reResolving(error))
                manifest = try await resolveWithRetries(attempt: resolves + 1, previous: named)
            case .resetOutput(let index, let error):
                guard resetOutputs.insert(index).inserted, reResolves < policy.maxReResolves else { throw error }
                reResolves += 1
                await discard(writers[index])
                mailbox.report(.reResolving(error))
                manifest = try await resolveWithRetries(attempt: resolves + 1, previous: named)
            }
            resolves += 1
            resolved = true
        }
    }

    /// Under a global rate limit, the segment slots a run of segments starts with (one: more is
    /// asked for once a response told the round trip); `nil` otherwise.
    func initialCap(_ manifest: DownloadManifest) -> Int? {
        guard services.engine.globalRateLimit != nil else { return nil }
        let segmented = manifest.outputs.contains { output in
            (mode == .cacheOnly || output.isSelected) && !(output.assembly == .concatenated && output.segments.count == 1)
        }
        return segmented ? 1 : nil
    }

    // MARK: - Resolving

    /// Resolves, retrying transient failures with backoff.
    private func resolveWithRetries(attempt: Int, previous: DownloadManifest?) async throws -> DownloadManifest {
        var failures = 0
        var random = SplitMixRandom(seed: seed("resolve"))
        while true {
            do {
                return try await resolve(attempt: attempt, previous: previous)
            } catch let error as DownloadError where error.isConnectivity && !Task.isCancelled {
                throw NetworkUnavailable(error: error)
            } catch let error as DownloadError where error.isTransient && !error.isPermanent && !Task.isCancelled {
                failures += 1
                guard failures < policy.maxAttempts else { throw error }
                mailbox.report(.retrying(error))
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
            engine: services.engine, headers: configuration.headers, maxSegments: configuration.maxSegments,
            maxDocumentSize: configuration.maxManifestSize, attempt: attempt, previousManifest: previous,
            splitting: configuration.splitting, documentTimeout: configuration.documentTimeout, logger: configuration.logger)
        let manifest: DownloadManifest
        do {
            manifest = try await parser.resolve(in: context)
            CrashPoint.resolved.reach()
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

    // MARK: - Preparing the outputs

    /// The writers of the outputs this run produces, with what the journal and the disk say is
    /// done already (off the cooperative pool).
    private func prepare(_ manifest: DownloadManifest, fresh: Bool) async throws -> [Int: OutputWriter] {
        if fresh {
            // Nothing of a task that never had a manifest is on disk but an output a killed
            // process finished before the store heard of the task (one look, `finishedBefore`).
            return try writers(for: manifest, records: [:], restoring: false)
        }
        let journalBase = services.layout.journalBase(of: id)
        // After a new resolve, the journal of the manifest before is written out and closed
        // first: what it has not committed yet (the last segments done) is read back below.
        let previous = shared.journal
        return try await services.executor.run { () throws(DownloadError) -> [Int: OutputWriter] in
            if let previous, previous.needsClosing { previous.close() }
            return try self.writers(for: manifest, records: TaskJournal.load(from: journalBase), restoring: true)
        }
    }

    /// The writers of the outputs, restored from the journal's `records` and the disk when
    /// `restoring` (blocking file work then).
    func writers(
        for manifest: DownloadManifest, records: [Int: TaskJournal.Output], restoring: Bool
    ) throws(DownloadError) -> [Int: OutputWriter] {
        let layout = services.layout
        let entity = self.entity, mode = self.mode, id = self.id, cache = services.cache, progress = self.progress
        // (The task's name in the work directory, made once; a stash's path only when one is needed.)
        let workName = FileLayout.fileName(for: id)
        let journalBase = layout.journalBase(named: workName, epoch: layout.fence?.journalEpoch(of: id))
        let commitInterval = configuration.journalCommitInterval
        do {
            let journal = TaskJournal(
                basePath: journalBase, outputs: records, commitInterval: commitInterval, mayExist: restoring,
                permitsWrite: { layout.permitsWrite(to: id) })
            shared.setJournal(journal)
            var writers: [Int: OutputWriter] = [:]
            var doneBytes: Int64 = 0, doneSegments = 0, segmentCount = 0, knownBytes: Int64 = 0, unknown = 0
            for (index, output) in manifest.outputs.enumerated() where mode == .cacheOnly || output.isSelected {
                let kind: OutputWriter.Kind
                switch (mode, output.assembly) {
                case (.cacheOnly, _): kind = .cacheOnly
                case (_, .pieces): kind = .pieces
                case (_, .separateFiles): kind = .separate
                case (_, .concatenated): kind = output.segments.count == 1 ? .single : .ordered
                }
                let finalPath = layout.outputPath(entity: entity, output: output)
                let namedByResponse = output.isNamedByResponse
                let partPath = namedByResponse ? layout.responseNamedPart(named: workName, output: index) : FileLayout.partPath(finalPath)
                let writer = OutputWriter(
                    index: index, output: output, kind: kind, finalPath: finalPath, partPath: partPath,
                    namedByResponse: namedByResponse, journal: journal,
                    stashPath: { layout.stashPath(named: workName, output: index, segment: $0) })
                let record = records[index] ?? TaskJournal.Output()
                if restoring {
                    doneBytes += try Self.restore(writer, record: record, cache: cache, entity: entity)
                } else if start.mayHaveFinishedBefore, let bytes = Self.finishedBefore(writer) {
                    // (A task the store never heard of, whose file a killed process had finished.)
                    doneBytes += bytes
                }
                // An output already in place from an earlier run (moved, not yet recorded: the
                // journal may still list its segments) is done. Its name was given to this task
                // when no file had it, and its size (and checksum) say it is the output.
                if restoring, kind != .cacheOnly, kind != .separate, !FileOperations.exists(partPath), FileOperations.exists(finalPath),
                    Self.isValid(output, at: finalPath)
                {
                    for segment in 0..<output.segments.count where !writer.isDone(segment) { writer.setDone(segment) }
                    doneBytes = FileOperations.size(finalPath) ?? doneBytes
                }
                doneSegments += writer.doneCount
                segmentCount += output.segments.count
                let sizes = output.segments.sizeSummary
                if sizes.unknownCount > 0, writer.doneCount == output.segments.count, kind != .cacheOnly, kind != .separate,
                    let size = FileOperations.size(finalPath)
                {
                    // All of it is in place already (a file a killed process had finished): its
                    // size is the file's, not an estimate.
                    knownBytes = knownBytes.saturatingAdding(size)
                } else {
                    knownBytes = knownBytes.saturatingAdding(sizes.knownBytes)
                    unknown += sizes.unknownCount
                }
                writers[index] = writer
            }
            progress.reset(
                doneBytes: doneBytes, doneSegments: doneSegments, segmentCount: segmentCount, knownBytes: knownBytes,
                unknownSizes: unknown)
            return writers
        }
    }

    /// A single output named by the server whose partial file is a second name of a finished
    /// output (see `moveIntoPlace`): its bytes when that output is this one, finished by a run
    /// that stopped (or a process that was killed) before the store recorded it; a link to a file
    /// at another name is let go of here, never written through. `nil` otherwise. Blocking (one
    /// `lstat` when there is no such file).
    static func finishedBefore(_ writer: OutputWriter) -> Int64? {
        guard writer.kind == .single, writer.namedByResponse, let links = FileOperations.linkCount(writer.partPath), links > 1
        else { return nil }
        if FileOperations.isSameFile(writer.partPath, writer.finalPath) {
            writer.setDone(0)
            return FileOperations.size(writer.finalPath) ?? 0
        }
        FileOperations.remove(writer.partPath)
        return nil
    }

    /// What of `writer`'s output is done already; returns its bytes.
    private static func restore(
        _ writer: OutputWriter, record: TaskJournal.Output, cache: SegmentCache?, entity: DownloadBaseEntity
    ) throws(DownloadError) -> Int64 {
        let output = writer.output
        switch writer.kind {
        case .ordered, .pieces, .single:
            if let bytes = finishedBefore(writer) { return bytes }
            guard FileOperations.exists(writer.partPath) else {
                if !record.ranges.isEmpty { writer.journal.update(writer.index) { $0 = TaskJournal.Output() } }
                return 0
            }
            var bytes = writer.restore(from: record)
            // Bytes the journal claims were checked by size; a segment with a checksum is checked
            // again (a kill may have come between its bytes and their verification).
            let segments = output.segments, hasChecksums = segments.hasChecksums
            for index in segments.indices where hasChecksums && writer.isDone(index) {
                guard let checksum = segments.checksum(at: index), !segments.isEncrypted(at: index) else { continue }
                let offset = writer.kind == .pieces ? segments.pieceOffset(at: index) : writer.offset(of: index)
                guard let offset, let size = writer.kind == .pieces ? segments.knownSize(at: index) : writer.size(of: index) else { continue }
                if (try? checksum.verify(fileAt: writer.partPath, range: ByteRange(offset: offset, length: max(1, size)))) == nil {
                    writer.setDone(index, false)
                    bytes -= size
                }
            }
            return max(0, bytes)
        case .separate:
            var bytes: Int64 = 0
            for (index, segment) in output.segments.enumerated() {
                let path = SafePath.join(writer.finalPath, (try? SafePath.relative(segment.name ?? "")) ?? "segment-\(index)")
                if let size = FileOperations.size(path), segment.knownSize.map({ $0 == size }) ?? true {
                    writer.setDone(index)
                    bytes += size
                }
            }
            return bytes
        case .cacheOnly:
            guard let cache else { return 0 }
            var bytes: Int64 = 0
            for (index, segment) in output.segments.enumerated() {
                let key = entity.cacheKey(for: SegmentLocation(outputIndex: writer.index, segmentIndex: index, outputName: output.name, segment: segment))
                if let size = cache.size(of: key) {
                    writer.setDone(index)
                    bytes += size
                }
            }
            return bytes
        }
    }

    /// Whether a file already at an output's final place is that output (by size and checksum).
    static func isValid(_ output: DownloadOutput, at path: String) -> Bool {
        guard let size = FileOperations.size(path) else { return false }
        if let expected = output.knownSize, expected != size { return false }
        if output.knownSize == nil, output.checksum == nil { return false }
        if let checksum = output.checksum { return (try? checksum.verify(fileAt: path)) != nil }
        return true
    }

    // MARK: - Ending

    /// The task completed: its journal and work files go.
    private func finishTask(_ writers: [Int: OutputWriter]) async {
        guard let journal = writers.values.first?.journal, journal.mayHaveFiles else {
            writers.values.first?.journal.remove()
            return
        }
        await services.executor.run { journal.remove() }
    }

    /// The manifest's content changed since the bytes on disk were written: they all go.
    private func discardEverything(_ manifest: DownloadManifest) async {
        let layout = services.layout, id = self.id, entity = self.entity
        await services.executor.run {
            guard layout.permitsWrite(to: id) else { return }
            TaskJournal.remove(basePath: layout.journalBase(of: id))
            for (index, output) in manifest.outputs.enumerated() {
                FileOperations.remove(FileLayout.partPath(layout.outputPath(entity: entity, output: output)))
                FileOperations.remove(layout.responseNamedPart(of: id, output: index))
            }
        }
    }

    /// An output starts over: its files and its part of the journal go.
    private func discard(_ writer: OutputWriter?) async {
        guard let writer else { return }
        let layout = services.layout, id = self.id
        await services.executor.run {
            writer.reset()
            writer.journal.commit()
            guard layout.permitsWrite(to: id) else { return }
            FileOperations.remove(writer.partPath)
            for parked in writer.dropParked() {
                if case .file(let path, true) = parked { FileOperations.remove(path) }
            }
        }
    }

    /// The segment slots a new manifest wants at once, by host: one per segment of the outputs
    /// this run produces (a single output starts with one connection).
    static func demand(of manifest: DownloadManifest, mode: DownloadTaskMode, shared: RunShared) -> [String: Int] {
        guard !manifest.isLive else { return [:] }
        var demand: [String: Int] = [:]
        for output in manifest.outputs where mode == .cacheOnly || output.isSelected {
            let hosts = output.segments.countByHost { segment in
                (segment.urls.first { !shared.isDead($0) } ?? segment.urls.first).map(hostKey) ?? ""
            }
            // (The first output's counts are the demand so far: no merge, as for a plain file.)
            if demand.isEmpty { demand = hosts } else { demand.merge(hosts, uniquingKeysWith: +) }
        }
        return demand
    }

    // MARK: - Helpers

    /// The scheduler's name for a URL's host: `host:port`.
    static func hostKey(_ url: URL) -> String {
        let host = url.host ?? ""
        let port = url.port ?? (url.scheme?.caseInsensitiveEquals("https") == true ? 443 : 80)
        // (Built once: a host that is lowercase ASCII, as nearly all are, is not lowercased again.)
        let lower = host.utf8.allSatisfy { $0 < 0x80 && $0.asciiLowercased == $0 } ? host : host.lowercased()
        var key = lower
        key.reserveCapacity(lower.utf8.count + 6)
        key.append(":")
        key.append(String(port))
        return key
    }

    func seed(_ salt: String) -> UInt64 {
        Self.seed(salt, base: baseSeed)
    }

    /// The seed named `salt` of a run whose base seed is `base`.
    static func seed(_ salt: String, base: UInt64) -> UInt64 {
        var seed = base
        for byte in salt.utf8 { seed = (seed ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return seed
    }

    /// A run's base seed: `configured` (tests) or a random one, mixed with the task's identity.
    static func baseSeed(for id: DownloadTaskID, configured: UInt64?) -> UInt64 {
        // (One system random number per process, not one per run: a run costs no system call.)
        var seed = configured ?? (processSeed ^ runCounter.wrappingAdd(1, ordering: .relaxed).newValue &* 0x9E37_79B9_7F4A_7C15)
        // The bytes of `id.description` (`type:key`, `type:key#variant`), without making it.
        func mix<Bytes: Sequence<UInt8>>(_ bytes: Bytes) {
            for byte in bytes { seed = (seed ^ UInt64(byte)) &* 0x100_0000_01b3 }
        }
        mix(id.entityType.utf8)
        mix(CollectionOfOne(UInt8(ascii: ":")))
        mix(id.entityKey.utf8)
        if !id.variantKey.isEmpty {
            mix(CollectionOfOne(UInt8(ascii: "#")))
            mix(id.variantKey.utf8)
        }
        return seed
    }

    private static let processSeed = UInt64.random(in: 0...UInt64.max)
    private static let runCounter = Atomic<UInt64>(0)

    /// The seed of one segment's retry jitter.
    func seed(output: Int, segment: Int) -> UInt64 {
        var seed = baseSeed
        for value in [UInt64(truncatingIfNeeded: output), UInt64(truncatingIfNeeded: segment)] {
            seed = (seed ^ value) &* 0x100_0000_01b3
            seed = (seed ^ (seed >> 29)) &* 0xBF58_476D_1CE4_E5B9
        }
        return seed
    }
}

/// What the segments of one run share: URLs found dead, URLs a server asked to wait for, the
/// keys of encrypted segments (fetched once), numbers for transfers.
final class RunShared: Sendable {
    private struct State {
        var dead: Set<URL> = []
        /// By server (`host:port`): a `Retry-After` holds every URL of the server that sent it.
        var notBefore: [String: ContinuousClock.Instant] = [:]
        var nextJob = 0
        var expiry: Date?
        var journal: TaskJournal?
        var roundTrip: Duration?
    }

    private let state = Locked(State())
    let keys = KeyStore()

    /// When the manifest's URLs stop working.
    var expiry: Date? { state.withLock { $0.expiry } }
    func setExpiry(_ date: Date?) { state.withLock { $0.expiry = date } }

    /// The run's journal, once its outputs are prepared.
    var journal: TaskJournal? { state.withLock { $0.journal } }
    func setJournal(_ journal: TaskJournal) { state.withLock { $0.journal = journal } }

    func markDead(_ url: URL) { _ = state.withLock { $0.dead.insert(url) } }
    func isDead(_ url: URL) -> Bool { state.withLock { $0.dead.contains(url) } }

    /// The server of `url` asked not to be asked again before `instant` (`Retry-After`): no URL
    /// on it (the same resource, a mirror on the same server) is asked before then.
    func hold(_ url: URL, until instant: ContinuousClock.Instant) {
        let server = TaskRun.hostKey(url)
        state.withLock { state in state.notBefore[server] = max(state.notBefore[server] ?? instant, instant) }
    }

    /// How long `url` must not be asked yet, or `nil`.
    func wait(for url: URL, now: ContinuousClock.Instant = .now) -> Duration? {
        state.withLock { state in
            guard !state.notBefore.isEmpty else { return nil }
            let server = TaskRun.hostKey(url)
            guard let instant = state.notBefore[server] else { return nil }
            guard instant > now else {
                state.notBefore[server] = nil
                return nil
            }
            return instant - now
        }
    }

    /// The round trip the last response measured, if any.
    var roundTrip: Duration? { state.withLock { $0.roundTrip } }
    func noteRoundTrip(_ roundTrip: Duration?) {
        guard let roundTrip else { return }
        state.withLock { $0.roundTrip = roundTrip }
    }

    /// A number for a transfer's progress.
    func nextJob() -> Int { state.withLock { state in state.nextJob += 1; return state.nextJob } }
}

/// The keys of encrypted segments, fetched once per run: concurrent segments that share a key
/// wait for the one fetch in flight instead of each asking the server.
final class KeyStore: Sendable {
    private let keys = Locked<[URL: Task<[UInt8], any Error>]>([:])

    func key(for url: URL, engine: CurlEngine, headers: HTTPHeaders, timeout: Duration) async throws -> [UInt8] {
        let fetch = keys.withLock { keys in
            if let fetch = keys[url] { return fetch }
            let fetch = Task { try await Self.fetch(url, engine: engine, headers: headers, timeout: timeout) }
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

    private static func fetch(_ url: URL, engine: CurlEngine, headers: HTTPHeaders, timeout: Duration) async throws -> [UInt8] {
        var request = TransferRequest.fetch(url, limit: 64, headers: headers)
        request.acceptsCompression = false
        request.timeout = timeout
        let result = try await engine.transfer(request)
        let key = [UInt8](result.body ?? Data())
        guard key.count == 16 else {
            throw DownloadError(
                .cryptoFailure, "the key at \(UntrustedText.printable(url.absoluteString)) has \(key.count) bytes, AES-128 needs 16",
                url: url.absoluteString)
        }
        return key
    }
}
