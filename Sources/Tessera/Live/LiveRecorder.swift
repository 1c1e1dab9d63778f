import Foundation

/// Records a live manifest: it reloads it when a ``LiveTracker`` says, fetches the segments
/// the trackers choose (one at a time per output, outputs side by side) through the shared
/// engine, appends each to its output's partial file in order, and writes the durable record
/// (``LiveJournal``) after every segment. When every output's tracker has ended (or the
/// recording is asked to end), the partial files go to their final names, playable.
///
/// What it decides, it asks a value: the trackers which segment and when; ``SegmentAttempt``
/// what a failed transfer does next (another URL, a wait). A segment that cannot be had after
/// that is a gap, not a failure of the recording; only the local disk fails it.
///
/// Live recordings take no segment slots from the scheduler (a recording fetches one segment per
/// output at a time, and cannot wait its turn behind other tasks) and, once downloading, hold no
/// task slot: a queue of VOD tasks does not stop a live stream from being recorded.
struct LiveRecorder {
    let run: TaskRun
    let manifest: DownloadManifest
    let parser: any LiveStreamParser

    /// One output being recorded.
    struct Output: Sendable {
        let index: Int
        let name: String
        let finalPath: String
        let partPath: String
        var record: LiveJournal.Output
    }

    enum Event: Sendable {
        /// A reload's windows, and the source as the reload left it (a DASH source keeps its MPD
        /// and its clock's offset).
        case reloaded([Int: LiveWindow], startedAt: Date, source: any LiveSource)
        case reloadFailed(DownloadError, startedAt: Date, source: any LiveSource)
        case fetched(output: Int, LiveSegment, FetchOutcome)
        case timer
        case endRequested
    }

    enum FetchOutcome: Sendable {
        /// The segment (and its initialisation section, when it changed) are in the file.
        case recorded(bytes: Int64, initSection: DownloadSegment?)
        /// It could not be had: a gap.
        case lost(DownloadError)
        /// The disk failed: the recording fails.
        case failed(DownloadError)
        case cancelled
    }

    private var services: RunServices { run.services }
    private var configuration: DownloadTaskManager.Configuration { run.configuration }
    private var policy: LiveRecordingPolicy { configuration.live }
    private var journalPath: String { services.layout.journalBase(of: run.id) + ".live" }

    // MARK: - The recording

    /// Records until every output has ended; `announced` when the manager was already told the
    /// task downloads (a fresh task's first manifest).
    func record(announced: Bool) async throws {
        guard run.mode == .download else {
            throw DownloadError(.invalidRequest, "a live stream cannot be fetched into the cache only: record it with a download")
        }
        var outputs = try await prepare()
        let progress = run.progress
        progress.reset(
            doneBytes: outputs.values.reduce(0) { $0 + $1.record.committedBytes },
            doneSegments: outputs.values.reduce(0) { $0 + $1.record.recordedSegments }, segmentCount: 0, knownBytes: 0,
            unknownSizes: 0)
        if !announced { run.mailbox.report(.downloading(demand: [:], cap: nil)) }
        let context = ResolveContext(
            engine: services.engine, headers: configuration.headers, maxSegments: configuration.maxSegments,
            maxDocumentSize: configuration.maxManifestSize, attempt: 1, previousManifest: manifest,
            splitting: configuration.splitting, documentTimeout: configuration.documentTimeout, logger: configuration.logger)
        var source = try parser.liveSource(for: manifest, in: context)
        var trackers: [Int: LiveTracker] = [:]
        for (index, output) in outputs where output.record.ending == nil {
            let record = output.record
            trackers[index] = LiveTracker(
                policy: policy, continuingAfter: record.tail, recordedSeconds: record.recordedSeconds,
                recordedSegments: record.recordedSegments, gapCount: record.gapCount, gapSeconds: record.gapSeconds,
                recentURLs: record.recentURLs)
        }
        let endRequests = run.manager.liveRecordings.register(run.id)
        defer { run.manager.liveRecordings.unregister(run.id) }
        let clock = policy.clock
        let recorder = self

        try await withThrowingTaskGroup(of: Event.self) { group in
            group.addTask {
                for await _ in endRequests { return .endRequested }
                return .timer
            }
            var fetching = Set<Int>()
            var reloading = false
            var timer: Date?
            var stopping = false
            while true {
                let now = clock.now()
                var deadline = Date.distantFuture
                var wantsReload = false
                for index in trackers.keys.sorted() where outputs[index]?.record.ending == nil {
                    decisions: while true {
                        switch trackers[index]!.next(now: now) {
                        case .gap(let gap):
                            outputs[index]!.record.gaps.append(gap)
                            if outputs[index]!.record.gaps.count > LiveJournal.gapLimit { outputs[index]!.record.gaps.removeFirst() }
                            configuration.logger.info("live: a gap", metadata: [
                                "task": "\(run.id)", "output": "\(outputs[index]!.name)", "seconds": "\(gap.seconds)",
                                "segments": "\(gap.segments.map(String.init) ?? "?")",
                            ])
                        case .reload:
                            wantsReload = true
                        case .fetch(let segment):
                            fetching.insert(index)
                            let output = outputs[index]!
                            let target = trackers[index]!.currentTargetDuration
                            group.addTask { .fetched(output: index, segment, await recorder.fetch(segment, into: output, targetDuration: target)) }
                        case .wait(let until):
                            deadline = min(deadline, until)
                            break decisions
                        case .end(let reason):
                            if !fetching.contains(index) { outputs[index]!.record.ending = reason }
                            break decisions
                        }
                    }
                }
                recorder.publish(outputs, trackers)
                if wantsReload, !reloading {
                    reloading = true
                    // Windows from the segment after the last one dealt with (queued ones included:
                    // a reload tells which of them are still offered).
                    let hints = trackers.compactMapValues { $0.tail?.key }
                    let current = source
                    group.addTask {
                        // The reload works on a copy of the source, handed back with its result.
                        var source = current
                        let started = clock.now()
                        do {
                            let windows = try await source.reload(from: hints, clock: clock, in: context)
                            return .reloaded(windows, startedAt: started, source: source)
                        } catch let error as DownloadError {
                            return .reloadFailed(error, startedAt: started, source: source)
                        } catch {
                            return .reloadFailed(DownloadError(.cancelled, "cancelled"), startedAt: started, source: source)
                        }
                    }
                }
                if outputs.values.allSatisfy({ $0.record.ending != nil }) || stopping, fetching.isEmpty, !reloading { break }
                if deadline < .distantFuture, timer.map({ deadline < $0 }) ?? true {
                    timer = deadline
                    group.addTask {
                        try? await clock.sleep(until: deadline)
                        return .timer
                    }
                }
                guard let event = try await group.next() else { break }
                switch event {
                case .timer:
                    if let pending = timer, pending <= clock.now() { timer = nil }
                case .endRequested:
                    stopping = true
                    for index in trackers.keys { trackers[index]!.stop() }
                    // What is in flight is not waited for: its bytes are past the record's.
                    group.cancelAll()
                    for index in outputs.keys where outputs[index]!.record.ending == nil { outputs[index]!.record.ending = .stopped }
                    fetching.removeAll()
                    reloading = false
                case .reloaded(let windows, let startedAt, let updated):
                    reloading = false
                    source = updated
                    let now = clock.now()
                    // Outputs that join together (a video and its audio) start at one moment:
                    // the join point is measured in the longest target duration of them all.
                    let longest = windows.values.map(\.targetDuration).max() ?? 0
                    for index in trackers.keys where trackers[index]!.tail == nil && trackers[index]!.recordedSegments == 0 {
                        trackers[index]!.alignJoin(targetDuration: longest)
                    }
                    for index in trackers.keys {
                        if let window = windows[index] {
                            trackers[index]!.reloaded(window, startedAt: startedAt, now: now)
                        } else {
                            trackers[index]!.reloadFailed(startedAt: startedAt, now: now)
                        }
                    }
                case .reloadFailed(let error, let startedAt, let updated):
                    reloading = false
                    source = updated
                    if error.isCancellation { break }
                    run.mailbox.report(.retrying(error))
                    let now = clock.now()
                    for index in trackers.keys { trackers[index]!.reloadFailed(startedAt: startedAt, now: now) }
                case .fetched(let index, let segment, let outcome):
                    fetching.remove(index)
                    guard !stopping else { break }
                    switch outcome {
                    case .recorded(let bytes, let initSection):
                        trackers[index]!.recorded(segment, at: clock.now())
                        var record = outputs[index]!.record
                        record.committedBytes += bytes
                        if let initSection { record.initSection = initSection }
                        recorder.update(&record, from: trackers[index]!)
                        outputs[index]!.record = record
                        progress.finish(job: nil, bytes: 0, completesSegment: true)
                        try await recorder.save(outputs)
                        CrashPoint.segmentDone.reach()
                    case .lost(let error):
                        configuration.logger.info("live: a segment could not be had", metadata: ["task": "\(run.id)", "error": "\(error.message)"])
                        trackers[index]!.lost(segment, at: clock.now())
                        recorder.update(&outputs[index]!.record, from: trackers[index]!)
                    case .failed(let error):
                        throw error
                    case .cancelled:
                        throw CancellationError()
                    }
                }
            }
            group.cancelAll()
        }
        publish(outputs, trackers)
        try Task.checkCancellation()
        try await finish(outputs)
    }

    /// Copies what the tracker knows into the record.
    private func update(_ record: inout LiveJournal.Output, from tracker: LiveTracker) {
        record.tail = tracker.tail
        record.recordedSeconds = tracker.recordedSeconds
        record.recordedSegments = tracker.recordedSegments
        record.gapCount = tracker.gapCount
        record.gapSeconds = tracker.gapSeconds
        record.recentURLs = tracker.recentlyRecordedURLs
    }

    /// Tells the task's snapshot how the recording stands.
    private func publish(_ outputs: [Int: Output], _ trackers: [Int: LiveTracker]) {
        var info = LiveRecordingInfo()
        info.recordedSeconds = outputs.values.map(\.record.recordedSeconds).min() ?? 0
        info.segmentsRecorded = outputs.values.reduce(0) { $0 + $1.record.recordedSegments }
        info.segmentsBehindLiveEdge = trackers.values.map(\.segmentsBehindLiveEdge).max() ?? 0
        info.gaps = outputs.values.map(\.record.gapCount).max() ?? 0
        info.gapSeconds = outputs.values.map(\.record.gapSeconds).max() ?? 0
        if outputs.values.allSatisfy({ $0.record.ending != nil }) {
            info.ending = outputs.values.compactMap(\.record.ending).first { $0 != .streamEnded } ?? .streamEnded
        }
        run.progress.setLive(info)
    }

    // MARK: - Files

    /// The outputs to record, with what an earlier run recorded of them: each partial file cut
    /// back to the whole segments its record claims (blocking work, on the executor).
    private func prepare() async throws -> [Int: Output] {
        let layout = services.layout, entity = run.entity, path = journalPath
        var planned: [Int: (String, String, String)] = [:]
        for (index, output) in manifest.outputs.enumerated() where output.isSelected {
            let finalPath = layout.outputPath(entity: entity, output: output)
            planned[index] = (output.name, finalPath, FileLayout.partPath(finalPath))
        }
        let plan = planned
        return try await services.executor.run { () throws(DownloadError) -> [Int: Output] in
            let journal = LiveJournal.load(from: path) ?? LiveJournal()
            var outputs: [Int: Output] = [:]
            for (index, (name, finalPath, partPath)) in plan {
                var record = journal.outputs[name] ?? LiveJournal.Output()
                let size = FileOperations.size(partPath)
                if size == nil, record.committedBytes > 0, FileOperations.size(finalPath) == record.committedBytes {
                    // Moved into place by a run that stopped before it could say so.
                    record.ending = record.ending ?? .stopped
                } else if let size, size >= record.committedBytes {
                    // Whole segments only: what a kill left of the one in flight goes.
                    if size > record.committedBytes { try FileOperations.truncate(partPath, to: record.committedBytes) }
                } else {
                    // No file (or less than recorded): the recording of this output starts over.
                    if size != nil { FileOperations.remove(partPath) }
                    record = LiveJournal.Output()
                }
                outputs[index] = Output(index: index, name: name, finalPath: finalPath, partPath: partPath, record: record)
            }
            return outputs
        }
    }

    /// Writes the durable record (off the cooperative pool).
    private func save(_ outputs: [Int: Output]) async throws {
        var journal = LiveJournal()
        for output in outputs.values { journal.outputs[output.name] = output.record }
        let path = journalPath, snapshot = journal
        try await services.executor.run { () throws(DownloadError) in try snapshot.save(to: path) }
    }

    /// Every output's recording ended: the partial files, cut to their whole segments, go to
    /// their final names (another name when a file is there), and the record goes.
    private func finish(_ outputs: [Int: Output]) async throws {
        try await save(outputs)
        guard outputs.values.contains(where: { $0.record.committedBytes > 0 }) else {
            let endings = Set(outputs.values.compactMap(\.record.ending))
            let seconds = Int(policy.stallTimeout(targetDuration: manifest.live?.targetDuration ?? 2))
            if endings.contains(.stalled) {
                throw DownloadError(.timeout, "nothing was recorded: the live stream published no segment for \(seconds) s")
            }
            if endings == [.streamEnded] {
                throw DownloadError(.invalidState, "nothing was recorded: the live stream had ended, and no segment was left to record")
            }
            throw DownloadError(.invalidState, "the recording ended before any segment was recorded")
        }
        for output in outputs.values.sorted(by: { $0.index < $1.index }) where output.record.committedBytes > 0 {
            var destination = output.finalPath
            var taken = Set<String>()
            for _ in 0..<100 {
                let committed = output.record.committedBytes, part = output.partPath, target = destination
                let moved = try await services.executor.run { () throws(DownloadError) -> Bool in
                    if !FileOperations.exists(part), FileOperations.size(target) == committed { return true }
                    try FileOperations.truncate(part, to: committed)
                    return try FileOperations.moveWithoutReplacing(part, to: target)
                }
                if moved { break }
                taken.insert(destination)
                try Task.checkCancellation()
                destination = run.claimFirstFree(
                    manifest.outputs[output.index], index: output.index, original: output.name, releasing: destination, taken: taken)
            }
        }
        let path = journalPath
        await services.executor.run { FileOperations.remove(path) }
    }

    // MARK: - Segments

    /// Fetches `segment` (after its initialisation section, when that changed) into the end of
    /// the output's partial file.
    private func fetch(_ segment: LiveSegment, into output: Output, targetDuration: Double) async -> FetchOutcome {
        var written: Int64 = 0
        var initSection: DownloadSegment?
        if let section = segment.initSection, section != output.record.initSection {
            initSection = section
        }
        do {
            if let initSection {
                written += try await transfer(initSection, to: output.partPath, at: output.record.committedBytes, targetDuration: targetDuration)
            }
            written += try await transfer(
                segment.segment, to: output.partPath, at: output.record.committedBytes + written, targetDuration: targetDuration)
            return .recorded(bytes: written, initSection: initSection)
        } catch let error as DownloadError {
            if error.isCancellation || Task.isCancelled { return .cancelled }
            return error.isLocal ? .failed(error) : .lost(error)
        } catch {
            return .cancelled
        }
    }

    /// One resource into the file at `offset` (its bytes there, and nothing after them), over
    /// its URLs as ``SegmentAttempt`` decides; decrypted first when it is encrypted. Returns its
    /// size. A 404 or 410 is asked again once, a quarter of a target duration later (a segment
    /// just listed may not have reached every server yet), before it counts.
    private func transfer(_ segment: DownloadSegment, to path: String, at offset: Int64, targetDuration: Double) async throws -> Int64 {
        let urls = segment.urls
        guard !urls.isEmpty else { throw DownloadError(.manifestInvalid, "a live segment has no URL") }
        let shared = run.shared
        let retry = configuration.retry
        let delayCap = Duration.nanoseconds(Int64(max(0.05, targetDuration) * 1e9))
        let live = RetryPolicy(
            maxAttempts: retry.maxAttempts, baseDelay: min(retry.baseDelay, delayCap / 4), maxDelay: min(retry.maxDelay, delayCap),
            maxReResolves: 0)
        var attempt = SegmentAttempt(
            mirrorCount: urls.count, dead: Set(urls.indices.filter { shared.isDead(urls[$0]) }), sharesFile: false, policy: live,
            seed: run.seed("live-\(urls[0].absoluteString)"))
        var action = attempt.start { shared.wait(for: urls[$0]) }
        var headers = configuration.headers
        for field in segment.headers { headers.replaceOrAdd(name: field.name, value: field.value) }
        var notFound = 0
        let job = shared.nextJob()
        let progress = run.progress
        defer { progress.abandon(job: job) }
        while true {
            switch action {
            case .fetch(let mirror, _):
                try Task.checkCancellation()
                if let refusal = services.diskGate?.refusal() { throw refusal }
                var request = TransferRequest(
                    url: urls[mirror], range: segment.range, headers: headers, destination: .file(path: path, offset: offset, ownsTail: true),
                    expectedLength: segment.encryption == nil ? segment.expectedSize : nil)
                if segment.encryption != nil { request.destination = .memory(limit: TaskRun.maxEncryptedSegmentSize) }
                do {
                    let result = try await services.engine.transfer(request) { update in progress.update(job: job, bytes: update.bytesTaken) }
                    guard let encryption = segment.encryption else {
                        progress.finish(job: job, bytes: result.bytesWritten, completesSegment: false)
                        return result.bytesWritten
                    }
                    let key = try await shared.keys.key(
                        for: encryption.keyURL, engine: services.engine, headers: configuration.headers, timeout: configuration.documentTimeout)
                    let body = [UInt8](result.body ?? Data())
                    let size = try await services.executor.run { () throws(DownloadError) -> Int64 in
                        let plain = try AES128CBC.decrypt(body, key: key, iv: encryption.iv)
                        try FileOperations.write(plain, to: path, at: offset)
                        try FileOperations.truncate(path, to: offset + Int64(plain.count))
                        return Int64(plain.count)
                    }
                    progress.finish(job: job, bytes: size, completesSegment: false)
                    return size
                } catch let error as DownloadError {
                    if error.isCancellation || Task.isCancelled { throw CancellationError() }
                    progress.abandon(job: job)
                    if [404, 410].contains(error.httpStatus ?? 0), notFound < 1 {
                        notFound += 1
                        try await policy.clock.sleep(until: policy.clock.now().addingTimeInterval(targetDuration / 4))
                        continue
                    }
                    action = attempt.next(after: .failed(error, progressed: false)) { shared.wait(for: urls[$0]) }
                    run.noteFailure(error, url: urls[mirror], attempt: attempt, urls: urls)
                }
            case .wait(let delay, let mirror, let fromScratch):
                try await configuration.sleeper.sleep(for: delay)
                action = .fetch(mirror: mirror, fromScratch: fromScratch)
            case .waitForNetwork(let error), .reResolve(let error), .resetOutput(let error), .fail(let error):
                throw error
            }
        }
    }
}
