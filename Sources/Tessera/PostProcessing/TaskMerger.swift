import Foundation

/// Runs the merges of a manager's completed tasks, as its ``MergePolicy`` says: one merge per
/// task at a time, each a task this object owns (``shutdown()`` stops ffmpeg and waits). What
/// happens is told as ``DownloadEvent/taskMerge(_:_:)`` events.
///
/// A merge that ffmpeg runs is marked pending in the task's manifest first: a merge cut by a
/// shutdown (or a kill) is still pending at the next start, and the manager runs it again then;
/// a finished merge replaces the outputs (``DownloadTaskManager/recordReplacement(of:by:size:)``),
/// a failed one clears the mark (the files stay). A task that completes with a merge to come is
/// marked pending in its completion's record already (a kill before the merge starts loses
/// nothing).
///
/// Under a write fence (a fleet's lease, ``TaskWriteFence``) the merge is a fenced step: ffmpeg
/// writes a temporary file named by the holder's epoch (two holders' ffmpegs never write the same
/// file), the merged file is moved into place only while the fence permits it, and the inputs are
/// deleted only after that move. A fleet keeps the task leased while its merge is pending, so a
/// holder that dies mid-merge leaves it to the next, which merges again.
final class TaskMerger: Sendable {
    let policy: MergePolicy
    private let hub: EventHub
    private let environment: [String: String]

    private struct State {
        var running: [DownloadTaskID: Task<Void, Never>] = [:]
        var isShutDown = false
        /// Who waits for no merge to run (``waitForAll()``), by a number of their own.
        var idleWaiters: [Int: CheckedContinuation<Void, Never>] = [:]
        var nextWaiter = 0
    }

    private let state = Locked(State())

    init(policy: MergePolicy, hub: EventHub, environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.policy = policy
        self.hub = hub
        self.environment = environment
    }

    /// Merges `task` when the policy has a plan for it and it is not merging already.
    func consider(_ task: DownloadTaskInfo, manager: DownloadTaskManager) {
        guard let plan = policy.plan(for: task) else { return }
        state.withLock { state in
            guard !state.isShutDown, state.running[task.id] == nil else { return }
            state.running[task.id] = Task {
                await self.merge(task, plan: plan, manager: manager)
                let idle = self.state.withLock { state -> [CheckedContinuation<Void, Never>] in
                    state.running[task.id] = nil
                    guard state.running.isEmpty else { return [] }
                    defer { state.idleWaiters.removeAll() }
                    return Array(state.idleWaiters.values)
                }
                for waiter in idle { waiter.resume() }
            }
        }
    }

    private func merge(_ task: DownloadTaskInfo, plan: MergePlan, manager: DownloadTaskManager) async {
        guard let ffmpeg = policy.ffmpeg ?? MediaMerger.findFFmpeg(environment: environment) else {
            // (Marked pending with the completion: nothing will merge it, so it is not.)
            await manager.setMergePending(task.id, false)
            hub.emit(.taskMerge(task, .skipped(reason: "ffmpeg was not found on PATH")))
            return
        }
        await manager.setMergePending(task.id, true)
        hub.emit(.taskMerge(task, .started(plan)))
        do {
            let id = task.id
            let result = try await policy.merger.run(plan, ffmpeg: ffmpeg, fence: MergeFence(manager.layout.fence, task: id)) { path, size in
                try? await manager.recordReplacement(of: id, by: path, size: size)
            }
            hub.emit(.taskMerge(await manager.check(task.id) ?? task, .merged(result)))
        } catch {
            // Cut short (a shutdown, a removal): still pending, merged at the next start.
            if error != .cancelled { await manager.setMergePending(task.id, false) }
            hub.emit(.taskMerge(await manager.check(task.id) ?? task, .failed(error)))
        }
    }

    /// Stops the merge of `id`, if one runs (ffmpeg is stopped, the files stay).
    func cancel(_ id: DownloadTaskID) {
        state.withLock { $0.running[id] }?.cancel()
    }

    /// Returns when the merge of `id` (if one runs) has ended.
    func wait(for id: DownloadTaskID) async {
        await state.withLock { $0.running[id] }?.value
    }

    /// Returns when no merge runs, or as soon as the calling task is cancelled (the merges go on).
    func waitForAll() async {
        let number = state.withLock { state in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if state.running.isEmpty || Task.isCancelled { return true }
                    state.idleWaiters[number] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.idleWaiters.removeValue(forKey: number) }?.resume()
        }
    }

    /// Stops every merge (ffmpeg is stopped, the files stay, the merges stay pending) and waits
    /// for them; no merge starts after.
    func shutdown() async {
        let running = state.withLock { state in
            state.isShutDown = true
            return Array(state.running.values)
        }
        for task in running { task.cancel() }
        for task in running { await task.value }
    }
}

extension DownloadManifest {
    /// The metadata key that marks a completed task's merge as pending.
    static let mergePendingKey = "tessera.mergePending"

    /// Whether the task's merge is to come or started and has not ended (see `TaskMerger`): a
    /// fleet keeps such a completed task leased until it has ended.
    package var mergeIsPending: Bool {
        get { metadata[Self.mergePendingKey] == "true" }
        set { metadata[Self.mergePendingKey] = newValue ? "true" : nil }
    }
}
