import Foundation
import Logging
import Tessera

/// The ``DownloadStore`` a fleet worker's manager writes to: the tasks' records in PostgreSQL,
/// each write fenced by the epoch this worker claimed the task with.
///
/// - ``loadAll()`` returns the tasks claimed since the last call (the worker calls the manager's
///   `restore()` after each claim, which adds them and queues them).
/// - A change of state or manifest is written to the task's row at once (`WHERE owner = $me AND
///   epoch = $epoch`); a row not returned means the task was taken over: the worker hears of it
///   and drops the task without writing anything more. Progress alone goes to the UNLOGGED
///   progress table, at most once a second.
/// - A terminal state (completed, failed, invalid), a pause and a removal let the task go; a
///   completed task whose merge is pending stays held (and `running` in the queue) until the
///   merge has ended.
/// - A write the database cannot take now (it restarts) stays pending, the newest per task, and
///   is written at the next change or when the worker's next heartbeat succeeds.
/// - Changes about tasks this worker does not hold are ignored: a task dropped here is another
///   worker's, and the manager forgetting it must not touch its row.
public final class FleetStore: DownloadStore {
    /// What the worker hears from the store.
    enum Notice: Sendable {
        /// The task ended here (its row says so): the worker lets it go.
        case released(DownloadTaskID, state: String, epoch: Int64)
        /// A fenced write found the task taken over: the worker drops it.
        case lost(DownloadTaskID)
    }

    private struct Held {
        var epoch: Int64
        var writtenState: DownloadTaskState.Kind?
        var writtenRevision: Int = -1
        var writtenError: String?
        /// Runs stopped by the worker itself (lease in doubt, hand-back): their pause is not the user's.
        var suspended = false
        var progress: (bytes: Int64, segments: Int)?
        var progressDirty = false
    }

    private struct State {
        var worker: Int64?
        var held: [DownloadTaskID: Held] = [:]
        var claimed: [StoredTask] = []
        /// Writes the database could not take, the newest per task.
        var pending: [DownloadTaskID: StoreChange] = [:]
        var lastProgressWrite = FleetInstant(nanoseconds: 0)
    }

    private let queue: FleetQueue
    private let state = Locked(State())
    private let notices: AsyncStream<Notice>.Continuation
    let noticeStream: AsyncStream<Notice>
    private let logger: Logger
    /// The least time between two progress writes.
    let progressInterval: Duration

    init(queue: FleetQueue, logger: Logger, progressInterval: Duration = .seconds(1)) {
        self.queue = queue
        self.logger = logger
        self.progressInterval = progressInterval
        (noticeStream, notices) = AsyncStream.makeStream(of: Notice.self)
    }

    // MARK: - What the worker tells the store

    func setWorker(_ worker: Int64?) {
        state.withLock { $0.worker = worker }
    }

    /// A claimed task: written under `epoch` from now on, and handed to the manager's next restore.
    func hold(_ task: StoredTask, epoch: Int64) {
        state.withLock { state in
            state.held[task.task.id] = Held(epoch: epoch)
            state.pending[task.task.id] = nil
            state.claimed.append(task)
        }
    }

    /// Forgets a task (taken over, or let go): nothing more is written about it.
    func forget(_ id: DownloadTaskID) {
        state.withLock { state in
            state.held[id] = nil
            state.pending[id] = nil
            state.claimed.removeAll { $0.task.id == id }
        }
    }

    /// Forgets every task.
    func forgetAll() {
        state.withLock { state in
            state.held.removeAll()
            state.pending.removeAll()
            state.claimed.removeAll()
        }
    }

    /// Marks runs the worker stops itself (their pause is not written) or lets run again.
    func setSuspended(_ ids: [DownloadTaskID], _ suspended: Bool) {
        state.withLock { state in
            for id in ids { state.held[id]?.suspended = suspended }
        }
    }

    func epoch(of id: DownloadTaskID) -> Int64? {
        state.withLock { $0.held[id]?.epoch }
    }

    deinit {
        notices.finish()
    }

    // MARK: - DownloadStore

    public func loadAll() async throws -> [StoredTask] {
        state.withLock { state in
            defer { state.claimed.removeAll() }
            return state.claimed
        }
    }

    public func apply(_ changes: [StoreChange]) async throws {
        var writes: [StoreChange] = []
        state.withLock { state in
            // Pending writes first (older), each replaced by a newer change of the same task.
            var order: [DownloadTaskID] = Array(state.pending.keys)
            var latest = state.pending
            state.pending.removeAll()
            for change in changes {
                let id = change.taskID
                guard var held = state.held[id] else { continue }
                switch change {
                case .insert(let task):
                    // (A task added here, not claimed: only its record is written.)
                    latest[id] = .update(task.task)
                    if !order.contains(id) { order.append(id) }
                case .update(let record):
                    held.progress = (record.bytesDone, record.segmentsDone)
                    held.progressDirty = true
                    state.held[id] = held
                    if needsWrite(record, held) {
                        latest[id] = change
                        if !order.contains(id) { order.append(id) }
                    }
                case .remove:
                    latest[id] = change
                    if !order.contains(id) { order.append(id) }
                }
            }
            writes = order.compactMap { latest[$0] }
        }
        for change in writes { await write(change) }
        await writeProgressIfDue()
    }

    /// Writes what the database could not take before (after a heartbeat succeeded).
    func flushPending() async {
        let pending = state.withLock { state in
            defer { state.pending.removeAll() }
            return Array(state.pending.values)
        }
        for change in pending { await write(change) }
        await writeProgressIfDue()
    }

    private func needsWrite(_ record: TaskRecord, _ held: Held) -> Bool {
        if held.suspended, record.state == .paused { return false }
        return record.state.kind != held.writtenState || record.manifestRevision != held.writtenRevision
            || record.lastError?.message != held.writtenError
    }

    private func write(_ change: StoreChange) async {
        let id = change.taskID
        guard let (worker, held) = state.withLock({ state -> (Int64, Held)? in
            guard let worker = state.worker, let held = state.held[id] else { return nil }
            return (worker, held)
        }) else { return }
        let record: TaskRecord
        let queueState: String
        switch change {
        case .insert(let task):
            record = task.task
            queueState = FleetQueue.queueState(for: record)
        case .update(let update):
            record = update
            queueState = held.suspended && update.state == .paused ? "running" : FleetQueue.queueState(for: update)
        case .remove:
            var removed = TaskRecord(id: id, state: .removed, mode: .download, weight: 0, sequence: 0)
            removed.bytesDone = held.progress?.bytes ?? 0
            record = removed
            queueState = "removed"
        }
        let json: String
        do {
            json = String(decoding: try JSONEncoder().encode(record), as: UTF8.self)
        } catch {
            logger.error("a task record could not be encoded", metadata: ["task": "\(id)", "error": "\(error)"])
            return
        }
        let written: Bool
        do {
            written = try await queue.write(
                key: id.description, worker: worker, epoch: held.epoch, state: queueState, record: json,
                title: record.manifest?.title ?? "", lastError: record.lastError?.message)
        } catch {
            logger.warning("the fleet's database did not take a task's state; kept for later", metadata: [
                "task": "\(id)", "error": "\(FleetQueue.describe(error))",
            ])
            state.withLock { state in
                if state.held[id] != nil { state.pending[id] = change }
            }
            return
        }
        guard written else {
            // Taken over: nothing more about it from here.
            forget(id)
            notices.yield(.lost(id))
            return
        }
        let terminal = queueState != "running"
        state.withLock { state in
            if terminal {
                state.held[id] = nil
            } else {
                state.held[id]?.writtenState = record.state.kind
                state.held[id]?.writtenRevision = record.manifestRevision
                state.held[id]?.writtenError = record.lastError?.message
            }
        }
        if terminal { notices.yield(.released(id, state: queueState, epoch: held.epoch)) }
    }

    private func writeProgressIfDue() async {
        let now = FleetInstant.now()
        let items = state.withLock { state -> [(key: String, epoch: Int64, bytes: Int64, segments: Int)] in
            guard now.since(state.lastProgressWrite) >= progressInterval else { return [] }
            var items: [(key: String, epoch: Int64, bytes: Int64, segments: Int)] = []
            for (id, held) in state.held where held.progressDirty {
                guard let progress = held.progress else { continue }
                items.append((id.description, held.epoch, progress.bytes, progress.segments))
                state.held[id]?.progressDirty = false
            }
            if !items.isEmpty { state.lastProgressWrite = now }
            return items
        }
        do {
            try await queue.writeProgress(items)
        } catch {
            logger.debug("progress not written", metadata: ["error": "\(FleetQueue.describe(error))"])
        }
    }
}
