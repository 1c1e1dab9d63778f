import Foundation

/// A run that starts without a task: a fresh plain file's run (one output of one segment, named
/// and announced at launch) starts its one transfer from the manager's first grant, and when the
/// transfer ends with the whole file, moved into place as it ended (``finishEarly(_:piece:_:)``),
/// the run ends right there, on the engine thread. A list of small files then costs no task, no
/// loop and no event per file. Anything else (an error to retry, a file large enough to split, a
/// name taken, a stop) hands the run to a task of its own, whose loop adopts the transfer, running
/// or ended, as if it had started it: the same decisions, the same requests, nothing fetched twice.
extension TaskRun {
    /// Whether a run of `manifest` (announced at launch, fresh) may start without a task: one
    /// output of one whole segment, downloaded (not cache-only), with nothing to verify or
    /// decrypt, under no rate limit (which sizes ranges from the first answer) and no fence (a
    /// fleet's lease, which may wait).
    static func startsDirectly(_ manifest: DownloadManifest, mode: DownloadTaskMode, rateLimited: Bool, fenced: Bool) -> Bool {
        guard mode == .download, !rateLimited, !fenced, !manifest.isLive, manifest.outputs.count == 1 else { return false }
        let output = manifest.outputs[0]
        guard output.isSelected, output.assembly == .concatenated, output.segments.count == 1, output.checksum == nil else { return false }
        let segment = output.segments[0]
        return !segment.urls.isEmpty && segment.range == nil && segment.checksum == nil && segment.encryption == nil
    }

    /// The manager's first grant (a slot on `host`) to a run that starts without a task: its
    /// output's first piece starts here (on the manager's actor: an `lstat` of its partial file
    /// only when the start found it linked, a look at the cache if there is one, and the request
    /// goes to the engine). Where that cannot be, the run goes on in its task.
    func startDirectly(host: String) {
        guard let manifest = start.announced, let writers = try? writers(for: manifest, records: [:], restoring: false),
            writers.count == 1, let (_, writer) = writers.first, writer.kind == .single, !writer.isDone(0)
        else {
            // (Also a file a killed process finished, found by its partial file's second name:
            // the task's loop finishes it without a request.)
            // (The task makes its writers again, and reports what stands in the way; the slot
            // waits in its events, as a grant to a task does.)
            events.post(.granted(host: host, count: 1))
            return handOver()
        }
        let piece = SingleOutputState.Piece(
            start: 0, bound: TransferBound(end: .max), attemptKey: nil, isFirst: true, startedAt: MonotonicClock.nanoseconds())
        let transfer = DirectTransfer(writers: writers, host: host, piece: piece)
        direct.withLock { $0 = transfer }
        switch startPiece(0, piece, of: writer, retry: nil, onEnd: { [self] result in directEnded(result, writer: writer, transfer) }) {
        case .started(let handle):
            if !execution.started(handle) { services.engine.cancel(handle) }
            // (A first response that asked for more connections before the handle was known.)
            if transfer.started(handle) { handOver() }
        case .ended:
            break
        case .needsTask:
            transfer.didNotStart()
            handOver()
        }
    }

    /// The transfer of a run without a task ended with `result` (on the engine thread, or at once
    /// when it could not start): the run ends here when its file is in place, else its task takes
    /// the end up.
    private func directEnded(_ result: RunWorkResult, writer: OutputWriter, _ transfer: DirectTransfer) {
        let complete: Bool
        if case .pieceEnded(_, nil, _, _) = result, case .moved? = writer.earlyFinish { complete = true } else { complete = false }
        switch transfer.ended(result, completingTheRun: complete) {
        case .runEnds:
            _ = writer.takeEarlyFinish()
            writer.setDone(0)
            progress.finish(job: nil, bytes: 0, completesSegment: true)
            events.finish()
            // (A file never journaled: no record on disk to remove.)
            writer.journal.remove()
            mailbox.report(.ended(.completed, nil))
            execution.ended()
        case .handOver:
            handOver()
        case .told:
            break
        }
    }

    /// The first response of a run without a task asks for more connections: its task takes the
    /// transfer over now (it splits the rest), not when the transfer ends.
    func directNeedsTask() {
        guard let transfer = direct.withLock({ $0 }), transfer.handOverWhileRunning() else { return }
        handOver()
    }

    /// The run goes on in its task (which takes up what the transfer did).
    private func handOver() {
        execution.continueInTask { [self] in await run() }
    }

    /// What the run started without a task, for its task to take up: the writers it made and the
    /// slot's host (once; `nil` for a run that started in its task).
    func takeDirectStart() -> (writers: [Int: OutputWriter], host: String)? {
        direct.withLock { $0 }?.takeStart()
    }

    /// The piece of a transfer the run started without a task that its loop has not adopted
    /// yet: the loop's next connection of the output is that transfer (``adoptDirectPiece(as:onEnd:)``),
    /// with this piece's range and bound in place of the one it would start.
    var adoptableDirectPiece: SingleOutputState.Piece? {
        direct.withLock { $0 }?.adoptablePiece
    }

    /// The loop's connection `pieceID` adopts the transfer the run started without a task,
    /// running or ended: `onEnd` hears of its end as the loop's own would. `nil` when there is
    /// nothing to adopt (the loop starts the piece).
    func adoptDirectPiece(as pieceID: Int, onEnd: @escaping @Sendable (RunWorkResult) -> Void) -> TaskRun.QuickStart? {
        direct.withLock { $0 }?.adopt { onEnd($0.ofPiece(pieceID)) }
    }

    /// The run ends: a transfer it started without a task and never adopted (its task was
    /// stopped before its loop began) is stopped, and its end waited for.
    func abandonDirectTransfer() async {
        guard let transfer = direct.withLock({ $0 }) else { return }
        await transfer.abandon(on: services.engine)
    }
}

/// The one transfer of a run that started without a task: running, ended, handed to the run's
/// task, adopted by its loop. The engine thread, the manager and the run's task meet here, under
/// one lock.
final class DirectTransfer: Sendable {
    /// What an end of the transfer leads to.
    enum EndOutcome {
        /// The file is in place: the run ends.
        case runEnds
        /// The run's task must take the end up.
        case handOver
        /// The task has it already (told to its loop, or kept for it).
        case told
    }

    private struct State {
        var handle: TransferHandle?
        var started = true
        /// The transfer ended.
        var finished = false
        var result: RunWorkResult?
        /// The run's task exists (or is being made).
        var handedOver = false
        /// A hand-over asked for before the handle was known.
        var wantsHandOver = false
        /// Its loop took the writers, and then the transfer.
        var writersTaken = false
        var adopted = false
        var onEnd: (@Sendable (RunWorkResult) -> Void)?
        var abandonWaiter: CheckedContinuation<Void, Never>?
    }

    let writers: [Int: OutputWriter]
    let host: String
    let piece: SingleOutputState.Piece
    private let state = Locked(State())

    init(writers: [Int: OutputWriter], host: String, piece: SingleOutputState.Piece) {
        self.writers = writers
        self.host = host
        self.piece = piece
    }

    /// The transfer's handle, known once its start returned; whether the run's task is to be made
    /// now (a hand-over asked for before the handle was known).
    func started(_ handle: TransferHandle) -> Bool {
        state.withLock { state in
            guard !state.finished else { return false }
            state.handle = handle
            guard state.wantsHandOver else { return false }
            state.wantsHandOver = false
            state.handedOver = true
            return true
        }
    }

    func didNotStart() {
        state.withLock { state in
            state.started = false
            state.handedOver = true
        }
    }

    /// The transfer ended with `result`; `completingTheRun` when its file is in place.
    func ended(_ result: RunWorkResult, completingTheRun: Bool) -> EndOutcome {
        let (outcome, onEnd, waiter) = state.withLock { state -> (EndOutcome, (@Sendable (RunWorkResult) -> Void)?, CheckedContinuation<Void, Never>?) in
            state.handle = nil
            state.finished = true
            state.wantsHandOver = false
            defer { state.abandonWaiter = nil }
            if !state.handedOver {
                if completingTheRun { return (.runEnds, nil, nil) }
                state.handedOver = true
                state.result = result
                return (.handOver, nil, nil)
            }
            if let onEnd = state.onEnd { return (.told, onEnd, state.abandonWaiter) }
            state.result = result
            return (.told, nil, state.abandonWaiter)
        }
        onEnd?(result)
        waiter?.resume()
        return outcome
    }

    /// Whether the task is to be made now, the transfer still running.
    func handOverWhileRunning() -> Bool {
        state.withLock { state in
            guard !state.handedOver, !state.finished else { return false }
            guard state.handle != nil else {
                state.wantsHandOver = true
                return false
            }
            state.handedOver = true
            return true
        }
    }

    func takeStart() -> (writers: [Int: OutputWriter], host: String)? {
        state.withLock { state in
            guard !state.writersTaken else { return nil }
            state.writersTaken = true
            return (writers, host)
        }
    }

    /// The piece, while the loop may still adopt the transfer.
    var adoptablePiece: SingleOutputState.Piece? {
        state.withLock { state in state.started && !state.adopted ? piece : nil }
    }

    /// The loop adopts the transfer (its first piece): `onEnd` hears of its end (at once when it
    /// has ended). `nil` when it never started, or was adopted already.
    func adopt(_ onEnd: @escaping @Sendable (RunWorkResult) -> Void) -> TaskRun.QuickStart? {
        let adopted = state.withLock { state -> (TaskRun.QuickStart, RunWorkResult?)? in
            guard state.started, !state.adopted else { return nil }
            if let result = state.result {
                state.adopted = true
                state.result = nil
                return (.ended, result)
            }
            guard !state.finished, let handle = state.handle else { return nil }
            state.adopted = true
            state.onEnd = onEnd
            return (.started(handle), nil)
        }
        guard let (start, result) = adopted else { return nil }
        if let result { onEnd(result) }
        return start
    }

    /// Stops the transfer unless the loop adopted it, and waits for its end.
    func abandon(on engine: CurlEngine) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let handle = state.withLock { state -> TransferHandle? in
                guard state.started, !state.finished, !state.adopted, let handle = state.handle else { return nil }
                state.abandonWaiter = continuation
                return handle
            }
            if let handle { engine.cancel(handle) } else { continuation.resume() }
        }
    }
}

extension RunWorkResult {
    /// The same end, told of piece `id`.
    func ofPiece(_ id: Int) -> RunWorkResult {
        switch self {
        case .pieceEnded(_, let error, let written, let resumed): .pieceEnded(pieceID: id, error: error, written: written, resumed: resumed)
        case .pieceWaits(_, let after, let state): .pieceWaits(pieceID: id, after: after, state: state)
        default: self
        }
    }
}
