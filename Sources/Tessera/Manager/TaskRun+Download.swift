import Foundation

extension TaskRun {
    /// One pass over the outputs: every piece of work that is not done gets a slot in turn, until
    /// every output is finished, or something sends the run back to resolving, or it fails.
    /// `slot`: the host of a slot the run holds already (the one its transfer started before its
    /// task used).
    func download(
        _ manifest: DownloadManifest, writers: [Int: OutputWriter], events: inout EventQueue<RunEvent>.Iterator,
        demanded: Bool, slot: String? = nil
    ) async throws -> PassOutcome {
        var loop = DownloadLoop(run: self, manifest: manifest, writers: writers)
        return try await loop.run(events: &events, demanded: demanded, slot: slot)
    }
}

/// One pass's loop: it feeds what happens to its ``DownloadPlan`` and performs what the plan
/// answers (starting work, timers, finishing outputs, slot counts for the scheduler). What it
/// keeps itself is the single outputs' ranges (``SingleOutputState``), which are where bytes are,
/// not decisions.
struct DownloadLoop {
    let run: TaskRun
    let manifest: DownloadManifest
    let writers: [Int: OutputWriter]

    private var plan: DownloadPlan
    /// The plan's answers to the event at hand (kept, so an event costs no allocation).
    private var actions: [DownloadPlan.Action] = []
    private var singles: [Int: SingleOutputState] = [:]
    /// Names the server proposed for single outputs, settled when they are finished.
    private var proposals: [Int: String] = [:]
    /// Transfers started without a task of their own.
    private let inFlight = InFlightTransfers()
    /// Under a rate limit, the segment slots this pass last said it wants at most.
    private var sentCap: Int?

    init(run: TaskRun, manifest: DownloadManifest, writers: [Int: OutputWriter]) {
        self.run = run
        self.manifest = manifest
        self.writers = writers
        plan = DownloadPlan(outputCount: writers.count, policy: run.policy, baseSeed: run.baseSeed)
        actions.reserveCapacity(4)
    }

    /// `demanded` when the manager already has this pass's first demand (a fresh task); `slot`:
    /// the host of a slot granted before the pass began.
    mutating func run(events: inout EventQueue<RunEvent>.Iterator, demanded: Bool, slot: String?) async throws -> TaskRun.PassOutcome {
        var demand: [String: Int] = [:]
        for (index, writer) in writers.sorted(by: { $0.key < $1.key }) {
            switch writer.kind {
            case .single:
                var state = SingleOutputState()
                state.chunk = chunkUnderRateLimit(roundTrip: nil)
                // (A transfer the run started before its task counts its bytes as it ends, as the
                // pass's own first connection would: the pass starts as a fresh one.)
                if writer.isJournaled, slot == nil {
                    // (What the writer counted as done when it was restored.)
                    let record = writer.journal.output(index)
                    state.done = record.resumableRanges
                    state.rangesAllowed = record.rangesAllowed
                }
                singles[index] = state
                if !writer.isDone(0) {
                    let connections = slot != nil ? 1 : state.connectionsToResume(
                        resource(of: writer), splitting: run.configuration.splitting,
                        rateLimited: run.services.engine.globalRateLimit != nil)
                    for _ in 0..<connections { add(.piece(output: index, attempt: nil), demand: &demand) }
                }
            default:
                for segment in writer.pending { add(.segment(output: index, segment: segment), demand: &demand) }
            }
        }
        sentCap = run.initialCap(manifest)
        if !demanded { run.mailbox.report(.downloading(demand: demand, cap: sentCap)) }
        return try await withThrowingDiscardingTaskGroup { group in
            for (index, writer) in writers where writer.isComplete { handle(.complete(output: index), in: &group) }
            if let slot { handle(.granted(host: slot, count: 1), in: &group) }
            // What a batch of events makes the run tell the manager goes with one wake-up, when
            // the batch is handled (before the run waits for more, or ends).
            let mailbox = run.mailbox
            var holding = false
            defer { if holding { mailbox.release() } }
            while true {
                if holding, !events.hasBuffered {
                    mailbox.release()
                    holding = false
                }
                guard let event = await events.next() else { break }
                if !holding {
                    mailbox.hold()
                    holding = true
                }
                receive(event, in: &group)
                if let outcome = plan.outcome(into: &actions) {
                    perform(in: &group)
                    // (What is left in the group is a wait for work that the pass no longer needs.)
                    group.cancelAll()
                    return try outcome.get()
                }
            }
            // The stream ended: the run was cancelled.
            handle(.cancelled, in: &group)
            await inFlight.drained()
            throw CancellationError()
        }
    }

    // MARK: - Events

    private mutating func receive(_ event: RunEvent, in group: inout ThrowingDiscardingTaskGroup<any Error>) {
        switch event {
        case .granted(let host, let count):
            handle(.granted(host: host, count: count), in: &group)

        case .share(let limit):
            handle(.share(limit), in: &group)

        case .finished(let work, let host, let result):
            workEnded(work, host: host, result, in: &group)

        case .quickEnded(let work, let host, _, let end):
            switch end {
            case .result(let result):
                workEnded(work, host: host, result, in: &group)
            case .handOver(let attempt):
                guard !plan.isEnding, case .segment(let output, let segment) = work, let writer = writers[output] else {
                    // The pass ends: what the attempt did is not taken up (its bytes are in the journal).
                    run.progress.abandon(job: attempt.job)
                    workEnded(work, host: host, .idle, in: &group)
                    return
                }
                let run = self.run
                group.addTask {
                    let result = await run.fetchSegment(segment, of: writer, retry: nil, started: attempt)
                    run.events.post(.finished(work, host: host, result))
                }
            }

        case .due(let work):
            handle(.due(work, host: host(of: work)), in: &group)

        case .resourceKnown(let output, let rangesAllowed, let count, let roundTrip):
            singles[output]?.rangesAllowed = rangesAllowed
            if singles[output]?.chunk != nil {
                let chunk = chunkUnderRateLimit(roundTrip: roundTrip)
                singles[output]?.chunk = chunk
            }
            guard count > 0 else { return }
            handle(.connectionsAdded(output: output, count: count, host: host(of: .piece(output: output, attempt: nil))), in: &group)

        case .roundTrip(let output, let roundTrip):
            if singles[output]?.chunk != nil {
                let chunk = chunkUnderRateLimit(roundTrip: roundTrip)
                singles[output]?.chunk = chunk
            }

        case .named(let output, let proposal):
            // Claimed now (shown until the output is finished and named).
            proposals[output] = proposal
            if let writer = writers[output] { run.claimName(of: writer, original: originalName(of: output), taken: []) }

        case .needsAnotherName(let output):
            guard let writer = writers[output] else { return }
            let run = self.run, original = originalName(of: output), taken: Set = [writer.finalPath]
            group.addTask {
                let error = await run.finalize(writer, original: original, taken: taken)
                run.events.post(.finalized(output: output, error))
            }

        case .finalized(let output, let error):
            handle(.finalized(output: output, error), in: &group)
        }
    }

    /// A piece of work ended: what it did is told to the plan (a single output's bytes are
    /// placed in its ranges first).
    private mutating func workEnded(_ work: RunWork, host: String, _ result: RunWorkResult, in group: inout ThrowingDiscardingTaskGroup<any Error>) {
        let ended: DownloadPlan.Ended
        switch result {
        case .done:
            guard case .segment(let output, _) = work else { return handle(.ended(work, host: host, .idle), in: &group) }
            ended = .done(outputComplete: writers[output]?.isComplete ?? false)
        case .idle:
            ended = .idle
        case .retry(let delay, let state):
            ended = .retry(after: delay, state)
        case .pieceEnded(let pieceID, let error, let written, let resumed):
            guard case .piece(let output, _) = work else { return handle(.ended(work, host: host, .idle), in: &group) }
            ended = pieceEnded(output: output, pieceID: pieceID, error: error, kept: written, resumed: resumed)
        case .pieceWaits(let pieceID, let delay, let state):
            if case .piece(let output, _) = work { singles[output]?.pieces[pieceID] = nil }
            ended = .pieceWaits(delay, state)
        case .reResolve(let error):
            ended = .reResolve(error)
        case .resetOutput(let index, let error):
            ended = .resetOutput(index, error)
        case .networkLost(let error):
            ended = .networkLost(error)
        case .failed(let error):
            ended = .failed(error)
        }
        handle(.ended(work, host: host, ended), in: &group)
    }

    // MARK: - Acting

    /// Tells the plan `event` and performs what it answers.
    private mutating func handle(_ event: DownloadPlan.Event, in group: inout ThrowingDiscardingTaskGroup<any Error>) {
        plan.handle(event, into: &actions)
        perform(in: &group)
    }

    /// Performs the plan's actions in order (and those of the events they lead to, after them).
    private mutating func perform(in group: inout ThrowingDiscardingTaskGroup<any Error>) {
        var next = 0
        while next < actions.count {
            let action = actions[next]
            next += 1
            switch action {
            case .start(let work, let host, let retry):
                switch start(work, host: host, retry: retry, in: &group) {
                case .started: break
                case .nothing: plan.handle(.startedNothing(host: host), into: &actions)
                case .later(let delay): plan.handle(.notYet(work, host: host, after: delay), into: &actions)
                }
            case .queued(let work, let host):
                if case .piece(let output, _) = work { singles[output]?.sharers += 1 }
                run.mailbox.demand(host)
            case .withdraw(let host, let count):
                run.mailbox.withdraw(host, count)
            case .giveBack(let host, let count):
                run.mailbox.returned(host, count)
            case .schedule(let work, let delay):
                let run = self.run
                group.addTask {
                    // (A wait cut short by the pass's end posts nothing: the work is the pass's.)
                    guard (try? await run.configuration.sleeper.sleep(for: delay)) != nil else { return }
                    run.events.post(.due(work))
                }
            case .shareOut(let output, let connections):
                shareOut(output, among: connections)
            case .finalize(let output):
                finalize(output)
            case .updateCap:
                updateCap()
            case .retrying(let error):
                run.mailbox.report(.retrying(error))
            case .noteFailure(let output, let error, let attempt):
                run.noteFailure(error, url: nil, attempt: attempt, urls: manifest.outputs[output].segments[0].urls)
            case .restart(let output):
                restart(output)
            case .cancelAll:
                group.cancelAll()
                inFlight.cancelAll(on: run.services.engine)
            }
        }
        actions.removeAll(keepingCapacity: true)
    }

    /// Adds work before the loop begins (its demand goes with the pass's first report).
    private mutating func add(_ work: RunWork, demand: inout [String: Int]) {
        let host = host(of: work)
        if case .piece(let output, _) = work { singles[output]?.sharers += 1 }
        // (Its ``DownloadPlan/Action/queued(_:host:)`` is answered by the report: dropped at
        // once, so a pass of 100,000 segments does not grow the action buffer to 100,000.)
        plan.handle(.add(work, host: host, front: false), into: &actions)
        actions.removeAll(keepingCapacity: true)
        demand[host, default: 0] += 1
    }

    private func host(of work: RunWork) -> String {
        let output: Int, segment: Int
        switch work {
        case .segment(let o, let s): (output, segment) = (o, s)
        case .piece(let o, _): (output, segment) = (o, 0)
        }
        let urls = manifest.outputs[output].segments[segment].urls
        let url = urls.first { !run.shared.isDead($0) } ?? urls[0]
        return TaskRun.hostKey(url)
    }

    /// Starts `work` on a slot.
    private mutating func start(
        _ work: RunWork, host: String, retry: RetryState?, in group: inout ThrowingDiscardingTaskGroup<any Error>
    ) -> ConnectionStart<Void> {
        let run = self.run, inFlight = self.inFlight, events = run.events
        switch work {
        case .segment(let output, let segment):
            guard let writer = writers[output], !writer.isDone(segment) else { return .nothing }
            let state = retry ?? resumeState(segment, of: writer)
            // The common case (a first attempt) needs no task: the request goes out from here.
            let quick: ((Int) -> TaskRun.QuickStart)? = state != nil ? nil : { key in
                run.startSegment(segment, of: writer) { end in
                    inFlight.ended(key)
                    switch end {
                    case .done: events.post(.quickEnded(work, host: host, transfer: key, .result(.done)))
                    case .handOver(let attempt): events.post(.quickEnded(work, host: host, transfer: key, .handOver(attempt)))
                    }
                }
            }
            launch(work, host: host, in: &group, quick: quick) { await run.fetchSegment(segment, of: writer, retry: state) }
        case .piece(let output, let attemptKey):
            guard var state = singles[output], let writer = writers[output] else { return .nothing }
            let started: ConnectionStart<(id: Int, piece: SingleOutputState.Piece)>
            // The transfer the run started before its task is this connection (its range, its
            // bound), adopted instead of a new one.
            let direct = retry == nil && !writer.isDone(0) ? run.adoptableDirectPiece : nil
            if writer.isDone(0) {
                state.dropQueued()
                started = .nothing
            } else if let direct {
                started = .started(state.adoptPiece(direct))
            } else {
                started = state.startPiece(
                    attemptKey: attemptKey, resource(of: writer), splitting: run.configuration.splitting, now: MonotonicClock.nanoseconds())
            }
            settle(&state, output: output)
            guard case .started(let (pieceID, piece)) = started else { return started.map { _ in () } }
            launch(work, host: host, in: &group, quick: { key in
                let onEnd: @Sendable (RunWorkResult) -> Void = { result in
                    inFlight.ended(key)
                    events.post(.quickEnded(work, host: host, transfer: key, .result(result)))
                }
                if direct != nil, let adopted = run.adoptDirectPiece(as: pieceID, onEnd: onEnd) { return adopted }
                return run.startPiece(pieceID, piece, of: writer, retry: retry, onEnd: onEnd)
            }) { await run.fetchPiece(pieceID, piece, of: writer, retry: retry) }
        }
        return .started(())
    }

    /// Starts work without a task of its own when `quick` can (given the transfer's key; the
    /// transfer tells its end as an event), else in a task of the pass's group (`full`).
    private func launch(
        _ work: RunWork, host: String, in group: inout ThrowingDiscardingTaskGroup<any Error>,
        quick: ((Int) -> TaskRun.QuickStart)?, full: @escaping @Sendable () async -> RunWorkResult
    ) {
        if let quick {
            let key = inFlight.reserve()
            switch quick(key) {
            case .started(let handle):
                inFlight.started(key, handle)
                return
            case .ended:
                return
            case .needsTask:
                inFlight.ended(key)
            }
        }
        let events = run.events
        group.addTask { events.post(.finished(work, host: host, await full())) }
    }

    /// Under a global rate limit, tells the scheduler the segment slots the pass wants at most
    /// (``DownloadPlan/slotsUnderRateLimit(rate:roundTrip:segmentSize:)``) when that changes.
    /// Without a limit, or for single outputs (one connection under a limit, ranges of
    /// ``SplitPolicy/chunk(rate:roundTrip:)``), nothing is asked.
    private mutating func updateCap() {
        guard let rate = run.services.engine.globalRateLimit, writers.values.contains(where: { $0.kind != .single }) else { return }
        let snapshot = run.progress.snapshot
        let segmentSize = snapshot.doneSegments > 0 ? max(1, snapshot.bytes / Int64(snapshot.doneSegments)) : nil
        let cap = DownloadPlan.slotsUnderRateLimit(rate: rate, roundTrip: run.shared.roundTrip, segmentSize: segmentSize)
        guard cap != sentCap else { return }
        sentCap = cap
        run.mailbox.report(.cap(cap))
    }

    /// Under a global rate limit, the largest range a request asks for (`nil`: no limit).
    private func chunkUnderRateLimit(roundTrip: Duration?) -> Int64? {
        guard let rate = run.services.engine.globalRateLimit else { return nil }
        return run.configuration.splitting.chunk(rate: rate, roundTrip: roundTrip)
    }

    /// The first response showed a large file that `connections` connections will share
    /// (``SingleOutputState/shareOut(length:among:minimumPiece:)``).
    private mutating func shareOut(_ output: Int, among connections: Int) {
        guard let writer = writers[output], let length = writer.resource.length else { return }
        singles[output]?.shareOut(length: length, among: connections, minimumPiece: run.configuration.splitting.pieceSize)
    }

    /// For a segment the journal says is partly on disk (an earlier run stopped in its middle):
    /// where its bytes are and the version they belong to, to continue from.
    private func resumeState(_ segment: Int, of writer: OutputWriter) -> RetryState? {
        let offset: Int64?, size: Int64?
        switch writer.kind {
        case .ordered:
            offset = writer.offset(of: segment)
            size = writer.size(of: segment)
        case .pieces:
            offset = writer.output.segments[segment].pieceOffset
            size = writer.output.segments[segment].knownSize
        default:
            return nil
        }
        guard let offset,
            let checkpoint = writer.journal.output(writer.index).resumablePrefix(ofSegment: segment, at: offset, size: size)
        else { return nil }
        return run.initialState(segment, of: writer, urls: writer.output.segments[segment].urls, resuming: (checkpoint, offset))
    }

    // MARK: - Single outputs

    /// A connection of a single output ended: its bytes are placed in the output's ranges
    /// (``SingleOutputState/pieceEnded(_:failure:kept:_:now:)``), and the plan hears what that
    /// means.
    private mutating func pieceEnded(output: Int, pieceID: Int, error: DownloadError?, kept: Int64, resumed: Bool) -> DownloadPlan.Ended {
        guard var state = singles[output], let writer = writers[output] else { return .idle }
        let (end, learned) = state.pieceEnded(pieceID, failure: error?.code, kept: kept, resource(of: writer), now: MonotonicClock.nanoseconds())
        settle(&state, output: output)
        if let learned {
            // A body of unannounced length: the task's total is known at last.
            writer.learnResource(length: learned.length, validator: learned.keepsValidator ? writer.resource.validator : nil)
            if writer.output.segments.knownSize(at: 0) == nil { run.progress.learnedSize(learned.length) }
        }
        switch end {
        case .unknown:
            return .idle
        case .completed:
            writer.setDone(0)
            run.progress.finish(job: nil, bytes: 0, completesSegment: true)
            return .pieceCompletedOutput
        case .free:
            return .pieceFree(host: host(of: .piece(output: output, attempt: nil)))
        case .rangesRefused:
            return .rangesRefused(host: host(of: .piece(output: output, attempt: nil)))
        case .failed(let progressed):
            guard let error else { return .idle }
            let urls = writer.output.segments[0].urls
            let shared = run.shared
            let mirrors = DownloadPlan.Mirrors(
                count: urls.count, dead: Set(urls.indices.filter { shared.isDead(urls[$0]) }), waits: urls.map { shared.wait(for: $0) },
                hosts: urls.map(TaskRun.hostKey))
            return .pieceFailed(error, progressed: progressed, resumed: resumed, mirrors: mirrors)
        }
    }

    /// Keeps a single output's state after a change, taking the bytes it forgot out of the
    /// task's progress.
    private mutating func settle(_ state: inout SingleOutputState, output: Int) {
        let forgotten = state.takeForgotten()
        if forgotten > 0 { run.progress.discard(bytes: forgotten, segments: 0) }
        singles[output] = state
    }

    /// What a single output's state knows of its resource.
    private func resource(of writer: OutputWriter) -> SingleOutputState.Resource {
        SingleOutputState.Resource(length: writer.resource.length, isRanged: writer.output.segments[0].range != nil)
    }

    // MARK: - Finishing

    /// Finishes an output (``TaskRun/moveIntoPlace(_:)`` on the blocking executor, no task of its
    /// own); a file found at its place sends it to ``TaskRun/finalize(_:original:taken:)`` for
    /// another name.
    private mutating func finalize(_ output: Int) {
        guard let writer = writers[output] else { return }
        let run = self.run
        switch writer.kind {
        case .cacheOnly, .separate:
            run.events.post(.finalized(output: output, nil))
            return
        case .single, .ordered, .pieces:
            break
        }
        // Finished already, as its transfer ended (see ``TaskRun/finishEarly(_:piece:_:)``).
        if let early = writer.takeEarlyFinish() {
            run.events.post(early.event(output: output))
            return
        }
        if writer.namedByResponse { run.claimName(of: writer, original: originalName(of: output), taken: []) }
        let key = inFlight.reserve()
        let inFlight = self.inFlight
        run.services.executor.submit {
            let event: RunEvent
            do throws(DownloadError) {
                event = try run.moveIntoPlace(writer) ? .finalized(output: output, nil) : .needsAnotherName(output: output)
            } catch {
                event = .finalized(output: output, error)
            }
            run.events.post(event)
            inFlight.ended(key)
        }
    }

    /// The name output `index`'s names are made from: the one a response proposed (made safe),
    /// else the one the manifest gave before any number was added.
    private func originalName(of index: Int) -> String {
        let output = manifest.outputs[index]
        if let proposal = proposals[index] { return SafePath.sanitizedFileName(proposal, fallback: output.name) }
        return manifest.metadata[OutputNaming.originalNameKey(index)] ?? output.name
    }

    /// An output's bytes failed their checksum or size: everything of it is fetched again.
    private mutating func restart(_ output: Int) {
        guard let writer = writers[output] else { return }
        let bytes = writer.output.knownSize ?? writer.orderedLength ?? FileOperations.size(writer.partPath) ?? 0
        run.progress.discard(bytes: bytes, segments: writer.doneCount)
        writer.reset()
        FileOperations.remove(writer.partPath)
        switch writer.kind {
        case .single:
            singles[output] = SingleOutputState()
            plan.handle(.add(.piece(output: output, attempt: nil), host: host(of: .piece(output: output, attempt: nil)), front: false), into: &actions)
        default:
            for segment in writer.pending {
                let work = RunWork.segment(output: output, segment: segment)
                plan.handle(.add(work, host: host(of: work), front: false), into: &actions)
            }
        }
    }
}
