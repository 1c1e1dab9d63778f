import Foundation

/// Picking up what the last process left in the store.
extension DownloadTaskManager {
    /// What ``DownloadTaskManager/restore(resuming:)`` did.
    public struct RestoreReport: Sendable {
        /// The tasks now known to the manager, in their restored states.
        public var restored: [DownloadTaskInfo]
        /// Stored tasks that could not be rebuilt (their entity type is not registered, their
        /// payload no longer decodes); they stay in the store, untouched.
        public var skipped: [(id: DownloadTaskID, error: DownloadError)]
    }

    /// Loads every task of the store and picks up where the last process left off: tasks that
    /// were waiting, resolving, downloading or interrupted are queued again and continue from
    /// what their journals say is on disk (or, with `resuming` false, wait paused for a command,
    /// as a command line that runs only what it is asked for wants); paused, completed, failed
    /// and invalid tasks stay so. Entities are rebuilt through the registry. Call it once,
    /// before other operations.
    @discardableResult
    public func restore(resuming: Bool = true) async throws(DownloadError) -> RestoreReport {
        let stored: [StoredTask]
        do {
            stored = try await store.loadAll()
        } catch let error as DownloadError {
            throw error
        } catch {
            throw DownloadError(.storeFailure, "the store could not be read: \(error)")
        }
        startOnce()
        var skipped: [(DownloadTaskID, DownloadError)] = []
        var resumable: [ManagedTask] = []
        for item in stored {
            let id = item.task.id
            guard tasks[id] == nil else { continue }
            let entity: DownloadBaseEntity
            do {
                entity = try registry.rebuild(item.entity)
            } catch {
                skipped.append((id, error))
                continue
            }
            let task = ManagedTask(restoring: item.task, entity: entity, handle: newHandle(), layout: layout)
            let plan = RestorePlan(stored: item.task.state, resuming: resuming)
            let state = plan.state
            // Queued again below (not ahead of the others).
            if plan.requeues { resumable.append(task) }
            nextSequence = max(nextSequence, task.sequence)
            tasks[id] = task
            byHandle[task.handle] = task
            addedOrder.append(task)
            joinGroup(task)
            if let manifest = task.manifest { claim(manifest, for: task) }
            apply(scheduler.handle(.restored(task.handle, sequence: task.sequence, weight: item.task.weight, state: state)))
            if hub.tellsAdditions { hub.emit(.taskAdded(info(task))) }
            // A merge the last process did not finish.
            if state == .completed, task.manifest?.mergeIsPending == true { merger?.consider(info(task), manager: self) }
            if state == .completed { task.compactManifest(interning: &metadataInterning) }
        }
        addedOrder.sort { $0.sequence < $1.sequence }
        await releasePartsOfCompletedTasks()
        let epoch = scheduler.beginCommand()
        for task in resumable { apply(scheduler.handle(.startIfUntouched(task.handle, since: epoch))) }
        apply(scheduler.handle(.schedule))
        return RestoreReport(restored: liveTasks.map { info($0) }, skipped: skipped)
    }

    /// The partial files that are still second names of completed tasks' outputs (a process
    /// killed after the store recorded the completions, before it let go of them; see
    /// ``releaseFinishedParts(of:)``) go. One look at the work directory (off the actor); the
    /// tasks' names in it are made only when it holds such a file. A partial file of a task the
    /// store does not know as completed stays: its next run finds its output by it (only the
    /// fresh tasks the look found such a file of look again, ``linkedPartsAtStart``).
    func releasePartsOfCompletedTasks() async {
        let work = layout.workDirectory
        let linked = await executor.run { () -> [String] in
            let names = (try? FileManager.default.contentsOfDirectory(atPath: work)) ?? []
            return names.filter { FileLayout.taskName(ofResponseNamedPart: $0) != nil && (FileOperations.linkCount(SafePath.join(work, $0)) ?? 1) > 1 }
        }
        if layout.fence == nil { linkedPartsAtStart = Set(linked.compactMap { FileLayout.taskName(ofResponseNamedPart: $0).map(String.init) }) }
        guard !linked.isEmpty else { return }
        var completed: Set<String> = []
        for task in tasks.values where state(of: task) == .completed { completed.insert(FileLayout.fileName(for: task.id)) }
        let owned = linked.filter { name in FileLayout.taskName(ofResponseNamedPart: name).map { completed.contains(String($0)) } ?? false }
        guard !owned.isEmpty else { return }
        executor.submit { FileOperations.remove(owned, in: work) }
    }
}
