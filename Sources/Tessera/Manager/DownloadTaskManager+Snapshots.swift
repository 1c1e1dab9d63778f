import Foundation

/// Snapshots, groups and the tick: progress, store writes, journals, group changes, disk pace.
extension DownloadTaskManager {
    func state(of task: ManagedTask) -> DownloadTaskState {
        scheduler.state(of: task.handle) ?? .removed
    }

    /// The tasks in the order they were added.
    var liveTasks: [ManagedTask] {
        if addedOrder.count > tasks.count * 2 { addedOrder.removeAll(where: \.isRemoved) }
        return addedOrder.filter { !$0.isRemoved }
    }

    func info(_ task: ManagedTask, state explicit: DownloadTaskState? = nil) -> DownloadTaskInfo {
        let state = explicit ?? self.state(of: task)
        return task.snapshot(state: state, weight: scheduler.weight(of: task.handle))
    }

    func taskRecord(_ task: ManagedTask, state: DownloadTaskState) -> TaskRecord {
        task.record(state: state, weight: scheduler.weight(of: task.handle))
    }

    func joinGroup(_ task: ManagedTask) {
        guard let key = task.groupKey else { return }
        groups.join(task.handle, key: key) { type(of: task.entity).groupType.init(key: key) }
    }

    /// Notes that a child's snapshot changed: its group's tally counts it again at the next tick.
    func markGroupChild(_ task: ManagedTask) {
        guard let key = task.groupKey else { return }
        groups.markChanged(task.handle, key: key)
    }

    func leaveGroup(_ task: ManagedTask) {
        guard let key = task.groupKey else { return }
        groups.leave(task.handle, key: key)
        ensureTicker()
    }

    /// A group with every child's snapshot (queries; O(children)).
    func groupInfo(_ key: String) -> DownloadGroupInfo? {
        groups.info(key, children: children(of: key))
    }

    func children(of key: String) -> [DownloadTaskInfo] {
        (groups.entries[key]?.children ?? []).compactMap { byHandle[$0] }.sorted { $0.sequence < $1.sequence }.map { info($0) }
    }

    // MARK: - The tick: progress, store, journals, groups, disk

    func ensureTicker() {
        guard ticker == nil, !isShutDown else { return }
        let interval = configuration.progressInterval
        ticker = Task { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: min(interval, self?.configuration.storeInterval ?? interval))
                // Cancelled by the shutdown, which does a tick's work itself.
                guard !Task.isCancelled, let self, await self.tick() else { return }
            }
        }
    }

    /// Tells subscribers about the groups whose children changed since the last time.
    func emitGroupChanges() {
        let changed = groups.takeChanged { handle in byHandle[handle].map { DownloadGroupTally.Entry(info($0)) } }
        guard hub.hasSubscribers else { return }
        for key in changed {
            if let group = groups.update(key, children: { children(of: key) }) {
                hub.emit(.groupUpdated(group))
            } else {
                hub.emit(.groupRemoved(key: key))
            }
        }
    }

    /// Samples speeds, emits progress and group changes, commits journals, writes the store.
    /// Returns whether to go on.
    func tick() async -> Bool {
        let now = ContinuousClock.now
        let emitProgress = now - lastProgressEmit >= configuration.progressInterval
        if emitProgress { lastProgressEmit = now }
        var written: Int64 = 0
        var journals: [TaskJournal] = []
        for handle in scheduler.running {
            guard let task = byHandle[handle], let progress = task.progress else { continue }
            let snapshot = progress.snapshot
            written += max(0, snapshot.bytes - task.lastSampledBytes)
            if snapshot.bytes != task.lastSampledBytes { saveRecord(task) }
            task.lastSampledBytes = snapshot.bytes
            if let journal = task.journal, journal.isDirty { journals.append(journal) }
            task.speed.sample(bytes: snapshot.bytes, at: now, epoch: snapshot.epoch)
            guard emitProgress else { continue }
            // A running child's bytes and speed change its group's tally (a few per tick: the
            // running ones, never every sibling).
            markGroupChild(task)
            guard snapshot.bytes != task.lastReportedBytes, hub.tellsProgress else { continue }
            task.lastReportedBytes = snapshot.bytes
            hub.emit(.taskProgress(info(task)))
        }
        emitGroupChanges()
        if !journals.isEmpty {
            let dirty = journals
            executor.submit { for journal in dirty { journal.commit() } }
        }
        bytesSinceDiskCheck = bytesSinceDiskCheck.saturatingAdding(written)
        if let lastFreeBytes, let policy = configuration.diskSpace, policy.checksEarly(written: bytesSinceDiskCheck, lastFree: lastFreeBytes) {
            await checkDiskSpaceNow()
        }
        await writeUnsaved()
        if scheduler.running.isEmpty, unsaved.isEmpty, !groups.hasChanges {
            ticker = nil
            return false
        }
        return true
    }

    /// Files `change`, about the task with `handle`, for the next batch.
    func save(_ change: StoreChange, of handle: TaskHandle) {
        unsaved.add(change, handle: handle)
        writeEarlyIfMany()
        ensureTicker()
    }

    /// Notes that `task`'s record changed: the store gets the record as it is at the next batch
    /// (however often it changes until then).
    func saveRecord(_ task: ManagedTask) {
        unsaved.touch(task.handle)
        writeEarlyIfMany()
        ensureTicker()
    }

    /// Changes that pile up faster than the tick writes them (thousands of small files) go to
    /// the store in batches as they come (``writesEarly(unsaved:queued:)``).
    private func writeEarlyIfMany() {
        if Self.writesEarly(unsaved: unsaved.count, queued: scheduler.queuedCount) { startStoreWrite() }
    }

    /// Whether `unsaved` changes make a store batch before the tick, with `queued` tasks waiting
    /// to be launched: ``storeBatchSize`` of them (one batch of thousands, built at the tick,
    /// would hold the actor, and every run's report, for milliseconds at a time), or
    /// ``storeTailBatchSize`` once fewer tasks than that wait. Then the last downloads are near:
    /// what ended before them is written (and its partial files let go) while they run, not in
    /// a batch of hundreds after the last one (a list of 2,000 small files: 6-8 ms between the
    /// last file's end and the exit, most of it that batch and its releases).
    static func writesEarly(unsaved: Int, queued: Int) -> Bool {
        unsaved >= storeBatchSize || (queued < storeTailBatchSize && unsaved >= storeTailBatchSize)
    }

    /// The record to store for the task with `handle`, while it is a task of this manager. Once
    /// a completed task's record is taken (the events told too), what it keeps of its manifest
    /// is its compact form.
    private func storedRecord(_ handle: TaskHandle) -> TaskRecord? {
        guard let task = byHandle[handle], !task.isRemoved else { return nil }
        let state = state(of: task)
        guard state != .removed else { return nil }
        let record = taskRecord(task, state: state)
        if state == .completed { task.compactManifest(interning: &metadataInterning) }
        return record
    }

    /// Writes every change not in the store yet, in one batch, after the batches before it;
    /// returns when it is written. A write is never cancelled half-way (whoever waits for it
    /// may be): batches are chained in a task of their own.
    func writeUnsaved() async {
        startStoreWrite()
        await lastStoreWrite?.value
    }

    /// Takes every change not in the store yet as one batch, written after the batches before it.
    func startStoreWrite() {
        if !unsaved.isEmpty {
            let batch = unsaved.take(records: storedRecord)
            let previous = lastStoreWrite, store = self.store, hub = self.hub, logger = configuration.logger
            // (The completions these partial files waited for are in this batch or an earlier one.)
            let parts = finishedParts, executor = self.executor, work = layout.workDirectory
            finishedParts.removeAll()
            lastStoreWrite = Task {
                await previous?.value
                do {
                    try await store.apply(batch)
                    if !parts.isEmpty { executor.submit { FileOperations.remove(parts, in: work) } }
                } catch {
                    let failure = error as? DownloadError ?? DownloadError(.storeFailure, "\(error)")
                    logger.error("store write failed: \(failure)")
                    hub.emit(notice: DownloadNotice(kind: .storeFailure, message: "the store could not be written: \(failure.message)"))
                }
            }
        }
    }
}
