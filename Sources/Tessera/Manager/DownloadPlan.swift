/// The decisions of one download pass: which work takes a slot the scheduler granted, whether a
/// slot is kept for the next work of its host or given back, when a retry's wait starts and
/// where the work goes when it is over, when an output is finished, how a failure ends the pass.
///
/// A plain value, like ``Scheduler``: it takes an ``Event`` and appends the ``Action``s to
/// perform, and touches nothing else: no network, no clock, no files, no actor. The run's loop
/// (`DownloadLoop`) holds one, feeds it what happened and performs what it answers; the tests in
/// `DownloadPlanTests` drive it alone. What a segment does after a failure is
/// ``SegmentAttempt``'s rule; the plan only carries its answer out.
///
/// The rules, in one place:
/// - **Slots.** Work waits by host, in order (a retry and a connection that just ended go first).
///   A granted slot starts the next work of its host; a slot whose work ended starts the next
///   one while the run holds no more than its share, else it goes back. Work that turns out to
///   need nothing gives its slot to the next, and so does work that needs nothing yet (it waits
///   without its slot, then queues first); every work started on a slot that was not granted
///   for it withdraws one unit of demand.
/// - **Retries.** A segment's retry waits without its slot, then queues first; so does a
///   connection of a single output, whose retry state ``SegmentAttempt`` keeps across its
///   connections. A server's `Retry-After` arrives as a wait, never as a failure.
/// - **Outputs.** An output whose bytes are all in is finished once; one whose checksum or size
///   fails is fetched again from scratch as ``SegmentAttempt/mismatchVerdict(_:failures:)`` says.
/// - **Ending.** A failure cancels what runs and ends the pass once nothing runs and nothing is
///   being finished; stale URLs stop new work and end it once what runs is over; the pass is
///   complete when every output is finished and nothing runs.
struct DownloadPlan {
    /// Something that happened.
    enum Event: Sendable {
        /// `work` is wanted on `host` (queued first when `front`).
        case add(RunWork, host: String, front: Bool)
        /// The scheduler granted `count` slots for `host`.
        case granted(host: String, count: Int)
        /// The scheduler's fair share for the run changed.
        case share(Int)
        /// A ``Action/start(_:host:retry:)`` found nothing to do: the slot goes to the next work.
        case startedNothing(host: String)
        /// Work started on `host` found nothing to do yet: it looks again after `after`, without
        /// its slot (``SplitPlan/Choice/later(id:after:)``).
        case notYet(RunWork, host: String, after: Duration)
        /// Work ended (its slot is free).
        case ended(RunWork, host: String, Ended)
        /// A retry's wait is over; `host` is where the work goes now.
        case due(RunWork, host: String)
        /// An output's bytes were all in when the pass began.
        case complete(output: Int)
        /// A single output's first response shows that `count` more connections may share it;
        /// they go to `host`.
        case connectionsAdded(output: Int, count: Int, host: String)
        /// An output was finished, or could not be (`error`).
        case finalized(output: Int, DownloadError?)
        /// The run is cancelled.
        case cancelled
    }

    /// How work ended, as the plan needs to know it.
    enum Ended: Sendable {
        /// A segment is done; `outputComplete` when it was its output's last.
        case done(outputComplete: Bool)
        /// Nothing was left to do.
        case idle
        /// A segment waits, then tries again as `state` says.
        case retry(after: Duration, RetryState)
        /// Every URL looks stale.
        case reResolve(DownloadError)
        /// The resource changed under output `index`.
        case resetOutput(Int, DownloadError)
        /// Every host is unreachable.
        case networkLost(DownloadError)
        /// The task fails.
        case failed(DownloadError)
        /// A connection of a single output ended and the output's bytes are all in.
        case pieceCompletedOutput
        /// A connection ended with its range: it takes the next one, on `host`.
        case pieceFree(host: String)
        /// The server serves no ranges after all: the connection asks for the whole file, now,
        /// on `host`.
        case rangesRefused(host: String)
        /// A connection failed; `progressed` when its bytes are kept, `resumed` when it continued
        /// an earlier attempt's. `mirrors` is what the run knows of the output's URLs now.
        case pieceFailed(DownloadError, progressed: Bool, resumed: Bool, mirrors: Mirrors)
        /// A connection did not start: every URL must wait (`Retry-After`), as `state` says.
        case pieceWaits(Duration, RetryState)
    }

    /// What the run knows of a single output's URLs when a connection fails.
    struct Mirrors: Sendable {
        /// How many there are.
        var count: Int
        /// Those found dead for good.
        var dead: Set<Int> = []
        /// How long each must not be asked yet (`nil`: it may be asked); missing entries may be.
        var waits: [Duration?] = []
        /// The scheduler's host of each (a retry goes to the first one alive).
        var hosts: [String] = []
    }

    /// What the loop does.
    enum Action: Sendable {
        /// Start `work` on a slot of `host`, carrying on from `retry` if it is a retry. When it
        /// needs nothing, the loop sends ``Event/startedNothing(host:)``.
        case start(RunWork, host: String, retry: RetryState?)
        /// `work` waits for a slot of `host`: ask the scheduler for one more.
        case queued(RunWork, host: String)
        /// Withdraw `count` units of the demand for `host`.
        case withdraw(host: String, count: Int)
        /// Give `count` slots of `host` back to the scheduler.
        case giveBack(host: String, count: Int)
        /// After `delay`, send ``Event/due(_:host:)`` for `work`.
        case schedule(RunWork, after: Duration)
        /// Share the single output's known length among `connections` (the first one stops at
        /// the end of its equal share).
        case shareOut(output: Int, connections: Int)
        /// Finish the output (move it into place); the loop sends ``Event/finalized(output:_:)``.
        case finalize(output: Int)
        /// A segment ended: under a rate limit, the slots the pass asks for may change.
        case updateCap
        /// Tell subscribers of an error the run retries.
        case retrying(DownloadError)
        /// Remember for the run's other segments what a connection of the single output learnt
        /// of its URLs (dead ones).
        case noteFailure(output: Int, DownloadError, attempt: SegmentAttempt)
        /// Fetch the output again from scratch; the loop resets it and adds its work.
        case restart(output: Int)
        /// Stop everything that runs (the pass ends).
        case cancelAll
    }

    /// How many outputs the pass has (numbered by their index in the manifest).
    let outputCount: Int
    let policy: RetryPolicy
    /// The run's seed: a connection's retry jitter is seeded from it.
    let baseSeed: UInt64

    /// Work waiting for a slot, by host, in order.
    private var queues: [String: FIFO<RunWork>] = [:]
    private var queuedCount: [String: Int] = [:]
    /// Slots this run holds, by host.
    private var held: [String: Int] = [:]
    private var heldTotal = 0
    private var share = Int.max
    /// Work started and not ended.
    private(set) var running = 0
    private var retries: [RunWork: RetryState] = [:]
    /// Retry states of single outputs' connections, by key (``RunWork/piece(output:attempt:)``).
    private var pieceRetries: [Int: RetryState] = [:]
    private var nextAttemptKey = 0
    private var finalizing: Set<Int> = []
    private var finalized: Set<Int> = []
    /// Checks failed by each output's finished bytes.
    private var mismatches: [Int: Int] = [:]
    /// Set when the pass must end: no new work starts, and it ends once nothing runs.
    private var ending: Result<TaskRun.PassOutcome, any Error>?

    init(outputCount: Int, policy: RetryPolicy, baseSeed: UInt64) {
        self.outputCount = outputCount
        self.policy = policy
        self.baseSeed = baseSeed
    }

    /// Whether the pass is ending (no new work starts).
    var isEnding: Bool { ending != nil }

    /// Work waiting for a slot of `host`.
    func queued(on host: String) -> Int { queuedCount[host] ?? 0 }

    /// Slots held for `host`.
    func holding(on host: String) -> Int { held[host] ?? 0 }

    // MARK: - Events

    /// Takes `event`; appends what to do to `actions`.
    mutating func handle(_ event: Event, into actions: inout [Action]) {
        switch event {
        case .add(let work, let host, let front):
            add(work, host: host, front: front, into: &actions)

        case .granted(let host, let count):
            held[host, default: 0] += count
            heldTotal += count
            for _ in 0..<max(0, count) { useSlot(host, reused: false, into: &actions) }

        case .share(let limit):
            share = limit

        case .startedNothing(let host):
            running -= 1
            useSlot(host, reused: true, into: &actions)

        case .notYet(let work, let host, let delay):
            // Its slot goes as one that started nothing; the work waits for its look.
            handle(.startedNothing(host: host), into: &actions)
            schedule(work, after: delay, into: &actions)

        case .ended(let work, let host, let ended):
            running -= 1
            apply(ended, of: work, into: &actions)
            if ending == nil, heldTotal <= share, queued(on: host) > 0 {
                useSlot(host, reused: true, into: &actions)
            } else {
                releaseSlot(host, into: &actions)
            }

        case .due(let work, let host):
            guard ending == nil else { return }
            add(work, host: host, front: true, into: &actions)

        case .complete(let output):
            finalize(output, into: &actions)

        case .connectionsAdded(let output, let count, let host):
            guard ending == nil, count > 0 else { return }
            actions.append(.shareOut(output: output, connections: count + 1))
            for _ in 0..<count { add(.piece(output: output, attempt: nil), host: host, front: false, into: &actions) }

        case .finalized(let output, let error):
            finalizing.remove(output)
            guard let error else {
                finalized.insert(output)
                return
            }
            guard error.code == .checksumMismatch || error.code == .sizeMismatch else {
                return end(.failure(error), into: &actions)
            }
            mismatches[output, default: 0] += 1
            if let final = SegmentAttempt.mismatchVerdict(error, failures: mismatches[output]!) {
                return end(.failure(final), into: &actions)
            }
            // Fetched once more from scratch before the task fails.
            actions.append(.retrying(error))
            actions.append(.restart(output: output))

        case .cancelled:
            if ending == nil { ending = .failure(CancellationError()) }
            actions.append(.cancelAll)
        }
    }

    /// The pass's outcome once it is over (every output finished, or an ending with nothing left
    /// running), with the slots and demand it gives back appended to `actions`; `nil` while it
    /// goes on.
    mutating func outcome(into actions: inout [Action]) -> Result<TaskRun.PassOutcome, any Error>? {
        let outcome: Result<TaskRun.PassOutcome, any Error>
        if let ending {
            guard running == 0, finalizing.isEmpty else { return nil }
            outcome = ending
        } else {
            // (Only outputs of the pass are ever finished.)
            guard running == 0, finalized.count >= outputCount else { return nil }
            outcome = .success(.complete)
        }
        for (host, count) in held where count > 0 { actions.append(.giveBack(host: host, count: count)) }
        for (host, count) in queuedCount where count > 0 { actions.append(.withdraw(host: host, count: count)) }
        held.removeAll()
        heldTotal = 0
        queues.removeAll()
        queuedCount.removeAll()
        return outcome
    }

    // MARK: - Work ends

    private mutating func apply(_ ended: Ended, of work: RunWork, into actions: inout [Action]) {
        switch ended {
        case .done(let outputComplete):
            guard case .segment(let output, _) = work else { return }
            if outputComplete { finalize(output, into: &actions) }
            actions.append(.updateCap)
        case .idle:
            break
        case .retry(let delay, let state):
            retries[work] = state
            schedule(work, after: delay, into: &actions)
        case .reResolve(let error):
            // A stale URL stops new work; what is in flight finishes (its URLs work, its bytes count).
            if ending == nil { ending = .success(.reResolve(error)) }
        case .resetOutput(let index, let error):
            end(.success(.resetOutput(index, error)), into: &actions)
        case .networkLost(let error):
            end(.failure(TaskRun.NetworkUnavailable(error: error)), into: &actions)
        case .failed(let error):
            end(.failure(error), into: &actions)
        case .pieceCompletedOutput:
            guard case .piece(let output, _) = work else { return }
            finalize(output, into: &actions)
        case .pieceFree(let host):
            guard case .piece(let output, _) = work else { return }
            // This connection is free: it takes the next range (or half of the busiest one's rest).
            add(.piece(output: output, attempt: nil), host: host, front: true, into: &actions)
        case .rangesRefused(let host):
            guard case .piece(let output, let key) = work else { return }
            add(.piece(output: output, attempt: key), host: host, front: true, into: &actions)
        case .pieceFailed(let error, let progressed, let resumed, let mirrors):
            guard case .piece(let output, let key) = work else { return }
            pieceFailed(output: output, key: key, error, progressed: progressed, resumed: resumed, mirrors: mirrors, into: &actions)
        case .pieceWaits(let delay, let state):
            guard case .piece(let output, let key) = work else { return }
            let retryKey = key ?? newAttemptKey()
            pieceRetries[retryKey] = state
            schedule(.piece(output: output, attempt: retryKey), after: delay, into: &actions)
        }
    }

    /// A connection of a single output failed: its attempt (``SegmentAttempt``, kept across the
    /// output's connections under one key) says what comes next.
    private mutating func pieceFailed(
        output: Int, key: Int?, _ error: DownloadError, progressed: Bool, resumed: Bool, mirrors: Mirrors,
        into actions: inout [Action]
    ) {
        let key = key ?? newAttemptKey()
        var retry = pieceRetries.removeValue(forKey: key) ?? RetryState(
            attempt: SegmentAttempt(
                mirrorCount: mirrors.count, dead: mirrors.dead, sharesFile: true, policy: policy,
                seed: TaskRun.seed("piece-\(output)-\(key)", base: baseSeed)),
            next: .fetch(mirror: 0, fromScratch: false), checkpoint: nil)
        let waits = mirrors.waits
        let next = retry.attempt.next(after: .failed(error, progressed: progressed, resumed: resumed)) {
            $0 < waits.count ? waits[$0] : nil
        }
        actions.append(.noteFailure(output: output, error, attempt: retry.attempt))
        retry.next = next
        switch next {
        case .fetch:
            actions.append(.retrying(error))
            pieceRetries[key] = retry
            // (To the first URL alive, now that this attempt may have found some dead.)
            let dead = retry.attempt.deadMirrors
            let live = mirrors.hosts.indices.first { !dead.contains($0) && !mirrors.dead.contains($0) } ?? 0
            let host = live < mirrors.hosts.count ? mirrors.hosts[live] : ""
            add(.piece(output: output, attempt: key), host: host, front: true, into: &actions)
        case .wait(let delay, _, _):
            actions.append(.retrying(error))
            pieceRetries[key] = retry
            schedule(.piece(output: output, attempt: key), after: delay, into: &actions)
        case .waitForNetwork(let error):
            end(.failure(TaskRun.NetworkUnavailable(error: error)), into: &actions)
        case .reResolve(let error):
            if ending == nil { ending = .success(.reResolve(error)) }
        case .resetOutput(let error):
            end(.success(.resetOutput(output, error)), into: &actions)
        case .fail(let error):
            end(.failure(error), into: &actions)
        }
    }

    private mutating func newAttemptKey() -> Int {
        nextAttemptKey += 1
        return nextAttemptKey
    }

    // MARK: - Slots and work

    private mutating func add(_ work: RunWork, host: String, front: Bool, into actions: inout [Action]) {
        if front {
            var queue = FIFO<RunWork>()
            queue.append(work)
            while let next = queues[host]?.popFirst() { queue.append(next) }
            queues[host] = queue
        } else {
            queues[host, default: FIFO()].append(work)
        }
        queuedCount[host, default: 0] += 1
        actions.append(.queued(work, host: host))
    }

    /// Starts the next work of `host` on a slot held for it; `reused` when the slot did not come
    /// with a grant (work ended on it, or found nothing to do): the demand is withdrawn.
    private mutating func useSlot(_ host: String, reused: Bool, into actions: inout [Action]) {
        guard ending == nil, let work = queues[host]?.popFirst() else { return releaseSlot(host, into: &actions) }
        queuedCount[host, default: 1] -= 1
        // A granted slot already took one unit of the demand.
        if reused { actions.append(.withdraw(host: host, count: 1)) }
        running += 1
        let retry: RetryState?
        switch work {
        case .segment: retry = retries.removeValue(forKey: work)
        case .piece(_, let key): retry = key.flatMap { pieceRetries[$0] }
        }
        actions.append(.start(work, host: host, retry: retry))
    }

    private mutating func releaseSlot(_ host: String, into actions: inout [Action]) {
        guard let count = held[host], count > 0 else { return }
        held[host] = count - 1
        heldTotal -= 1
        actions.append(.giveBack(host: host, count: 1))
    }

    private func schedule(_ work: RunWork, after delay: Duration, into actions: inout [Action]) {
        guard ending == nil else { return }
        actions.append(.schedule(work, after: delay))
    }

    /// Finishes an output, once.
    private mutating func finalize(_ output: Int, into actions: inout [Action]) {
        guard !finalizing.contains(output), !finalized.contains(output) else { return }
        finalizing.insert(output)
        actions.append(.finalize(output: output))
    }

    /// The pass ends with `outcome` (unless it ends already, other than for stale URLs).
    private mutating func end(_ outcome: Result<TaskRun.PassOutcome, any Error>, into actions: inout [Action]) {
        if let ending {
            guard case .success(.reResolve) = ending else { return }
        }
        ending = outcome
        actions.append(.cancelAll)
    }
}

extension DownloadPlan {
    /// Under a global rate limit of `rate` bytes per second, the segment slots a pass asks for at
    /// most: segments in flight beyond what keeps the rate over the round trip add no speed,
    /// only what a server writes ahead of each (lost when the download stops). That is
    /// `⌈rate × round trip / segment size⌉` (1 to 1,024), one more when a request's round trip
    /// costs more than a twentieth of a segment's time; 1 until a segment's size and the round
    /// trip are known.
    static func slotsUnderRateLimit(rate: Int64, roundTrip: Duration?, segmentSize: Int64?) -> Int {
        guard let segmentSize, segmentSize > 0, let roundTrip else { return 1 }
        let seconds = Double(roundTrip.components.seconds) + Double(roundTrip.components.attoseconds) / 1e18
        // The share of a segment's time that one request's round trip takes.
        let gap = Double(rate) * seconds / Double(segmentSize)
        return gap.isFinite ? Int(min(1024, max(1, gap.rounded(.up)))) + (gap > 0.05 ? 1 : 0) : 1024
    }
}
