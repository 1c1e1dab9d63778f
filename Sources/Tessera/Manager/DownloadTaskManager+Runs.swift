import Foundation

/// What runs ask of their manager and post to it, and the names their outputs get.
extension DownloadTaskManager {
    /// Waits until the files of a removed task with the same identity are gone; whether the run
    /// may still start.
    func runMayStart(_ ticket: RunTicket) async -> Bool {
        if let id = byHandle[ticket.handle]?.id, let deletion = deletions[id] { await deletion.value }
        return current(ticket) != nil
    }

    /// A run has its manifest (`resolved` when freshly resolved): its outputs get their names,
    /// the task keeps it. Returns the named manifest and whether its content differs from the
    /// one the bytes on disk belong to, or `nil` when the task moved on.
    func runHasManifest(
        _ ticket: RunTicket, _ manifest: DownloadManifest, resolved: Bool, demand: [String: Int]?, cap: Int? = nil
    ) async -> (DownloadManifest, Bool)? {
        guard let task = current(ticket) else { return nil }
        let (named, changed) = keep(manifest, of: task, resolved: resolved)
        if resolved, Self.namesOwnOutputs(named, mode: task.mode) {
            await writeUnsaved()
            guard current(ticket) != nil else { return nil }
        }
        // The first slots are granted before the run hears back: they wait in its events.
        if let demand { announce(ticket, demand: demand, cap: cap) }
        return (named, changed)
    }

    /// The task keeps `manifest` (its outputs named first when freshly `resolved`); returns the
    /// named manifest and whether its content differs from the one before.
    /// `recording` false leaves the store's record to the caller.
    func keep(_ manifest: DownloadManifest, of task: ManagedTask, resolved: Bool, recording: Bool = true) -> (DownloadManifest, Bool) {
        if resolved { task.resolveCount += 1 }
        let previous = task.manifest
        let named = resolved ? assignOutputNames(task, manifest) : manifest
        let changed = previous.map { !$0.hasSameSegments(as: named) } ?? false
        task.setManifest(named, layout: layout)
        if recording { saveRecord(task) }
        return (named, changed)
    }

    /// Whether `task`'s move from `from` to `to` is recorded with what comes of it rather than
    /// at once: a fresh task's start. Its move from waiting to resolving leaves it waiting in the
    /// store (a restart queues a waiting task and a resolving one alike, and a task that resolves
    /// records its manifest then); a run that starts without a task is named, and moves to
    /// downloading, unrecorded: its end records it (or the tick, by its bytes, if it runs that
    /// long; or a stop). On a list of small files that is one record a file after its insert,
    /// not two, each with the manifest.
    func recordsLater(_ task: ManagedTask, from: DownloadTaskState, to: DownloadTaskState) -> Bool {
        guard to.isRunning else { return false }
        if from == .waiting, to == .resolving, task.manifest == nil { return true }
        return task.run?.direct != nil
    }

    /// Whether `manifest` names outputs itself (not from a response): those names reach the
    /// store before any byte reaches their files, so that after a kill the same files are found
    /// again under the same names.
    static func namesOwnOutputs(_ manifest: DownloadManifest, mode: DownloadTaskMode) -> Bool {
        manifest.outputs.contains { !$0.isNamedByResponse && ($0.isSelected || mode == .cacheOnly) }
    }

    /// Tells the scheduler the first slots a run wants (a cap first: no slot beyond it is
    /// granted, not even for a moment).
    func announce(_ ticket: RunTicket, demand: [String: Int], cap: Int?) {
        if let cap { apply(scheduler.handle(.cap(ticket.handle, generation: ticket.generation, slots: cap))) }
        apply(scheduler.handle(.resolved(ticket.handle, generation: ticket.generation, demand: demand)))
    }

    /// The manifest of a fresh task whose entity ``ResolvesImmediately``, checked as a run
    /// checks what it resolves; `nil` when the entity resolves otherwise, or its manifest is
    /// refused (the run then resolves and reports the error).
    func immediateManifest(of task: ManagedTask) -> DownloadManifest? {
        guard task.manifest == nil, let entity = task.entity as? any ResolvesImmediately,
            let manifest = try? entity.immediateManifest(), !manifest.isLive,
            (try? manifest.validate(maxSegments: configuration.maxSegments, includingUnselected: task.mode == .cacheOnly)) != nil
        else { return nil }
        return manifest
    }

    /// A run named output `index` `name` (claimed in ``claims``; `original` is the name it was
    /// made from): the task's manifest (and a plain download's title) says so from now on.
    func runNamedOutput(_ ticket: RunTicket, output index: Int, name: String, original: String) {
        guard let task = current(ticket), var manifest = task.manifest, index < manifest.outputs.count,
            name != manifest.outputs[index].name
        else { return }
        manifest.metadata[OutputNaming.originalNameKey(index)] = name != original ? original : nil
        let previous = manifest.outputs[index].name
        manifest.outputs[index].name = name
        // A plain download's title is its file's name; a manifest of several outputs keeps its own.
        if manifest.outputs.count == 1, manifest.title == nil || manifest.title == task.entity.title || manifest.title == previous {
            manifest.title = name
        }
        task.setManifest(manifest, layout: layout)
        saveRecord(task)
    }

    func current(_ ticket: RunTicket) -> ManagedTask? {
        guard let task = byHandle[ticket.handle], task.run?.ticket == ticket, scheduler.generation(of: ticket.handle) == ticket.generation
        else { return nil }
        return task
    }

    /// Takes what runs posted (slot counts, reports) and applies it, run by run in the order
    /// they posted first.
    /// The wake-ups the batch causes (subscribers' event streams, runs' events) happen once, at
    /// its end: a subscriber that keeps up is not woken once per event.
    func drain(_ tickets: [RunTicket]) {
        WakeBatch.deferring {
            for ticket in tickets { drain(ticket) }
        }
    }

    func drain(_ ticket: RunTicket) {
        guard let task = byHandle[ticket.handle], let run = task.run, run.ticket == ticket else { return }
        for item in run.mailbox.take() {
            switch item {
            case .counts(let counts):
                for (host, count) in counts.demand {
                    apply(scheduler.handle(.demand(ticket.handle, generation: ticket.generation, host: host, count: count)))
                }
                let hosts = Set(counts.returned.keys).union(counts.withdrawn.keys)
                for host in hosts.sorted() {
                    apply(scheduler.handle(.returned(
                        ticket.handle, generation: ticket.generation, host: host, count: counts.returned[host] ?? 0,
                        withdrawn: counts.withdrawn[host] ?? 0)))
                }
            case .report(let report):
                handle(report, from: ticket, task: task)
            }
        }
    }

    func handle(_ report: RunReport, from ticket: RunTicket, task: ManagedTask) {
        switch report {
        case .downloading(let demand, let cap):
            if let cap { apply(scheduler.handle(.cap(ticket.handle, generation: ticket.generation, slots: cap))) }
            apply(scheduler.handle(.resolved(ticket.handle, generation: ticket.generation, demand: demand)))
        case .cap(let slots):
            apply(scheduler.handle(.cap(ticket.handle, generation: ticket.generation, slots: slots)))
        case .named(let output, let name, let original):
            runNamedOutput(ticket, output: output, name: name, original: original)
        case .retrying(let error):
            guard scheduler.generation(of: ticket.handle) == ticket.generation else { return }
            task.lastError = error
            hub.emit(.taskError(task.id, error, willRetry: true))
        case .reResolving(let error):
            guard scheduler.generation(of: ticket.handle) == ticket.generation else { return }
            task.lastError = error
            hub.emit(.taskError(task.id, error, willRetry: true))
            apply(scheduler.handle(.reResolving(ticket.handle, generation: ticket.generation)))
        case .ended(let ending, let error):
            // (The drain has checked that this run is still the task's.)
            // What the run counted stays as the task's summary; its counters go with it (a list
            // of 100,000 finished tasks keeps one snapshot each).
            task.summary = task.progress?.snapshot ?? task.summary
            task.progress = nil
            let current = state(of: task)
            guard scheduler.generation(of: ticket.handle) == ticket.generation, current.isRunning,
                !(isShutDown && ending == .stopped)
            else {
                // Stopped by a command (the state stays as it set it), or cut by the shutdown
                // (resumed next time): the store learns what the run kept by its end.
                task.run = nil
                if current != .removed { saveRecord(task) }
                return
            }
            if let error {
                task.lastError = error
                let waits = ending == .diskFull || { if case .networkLost = ending { return true } else { return false } }()
                hub.emit(.taskError(task.id, error, willRetry: waits))
            }
            if ending == .completed { task.completed = true }
            // The run is over: what it held goes (its progress stays for snapshots).
            task.run = nil
            apply(scheduler.handle(.ended(ticket.handle, generation: ticket.generation, ending)))
            if ending == .completed { releaseFinishedParts(of: task) }
        }
    }

    /// A completed task's outputs named by the server keep their partial files as second names
    /// (see `TaskRun.moveIntoPlace`) until the store batch that records the completion is written;
    /// then they go (``startStoreWrite()``).
    func releaseFinishedParts(of task: ManagedTask) {
        guard let manifest = task.manifest else { return }
        let workName = FileLayout.fileName(for: task.id)
        for (index, output) in manifest.outputs.enumerated() where output.isNamedByResponse && (output.isSelected || task.mode == .cacheOnly) {
            // (Their names in the work directory, where they all are.)
            finishedParts.append(FileLayout.responseNamedPartName(named: workName, output: index))
        }
    }

    // MARK: - Output names

    /// Gives a new manifest's outputs places no other task's output and no existing file holds
    /// (``OutputNaming`` decides; ``claims`` and the disk say what is taken), and claims them.
    func assignOutputNames(_ task: ManagedTask, _ fresh: DownloadManifest) -> DownloadManifest {
        releaseClaims(of: task)
        let entity = task.entity
        let naming = OutputNaming(
            template: configuration.outputNameTemplate, mode: task.mode, entityType: type(of: entity).entityType,
            entityKey: entity.entityKey, entityTitle: entity.title)
        let named = naming.name(fresh, previous: task.manifest) { name, output in isTaken(name, output: output, by: task) }
        for failure in named.templateFailures {
            // A name the template cannot make (fields that leave nothing) keeps the plugin's.
            configuration.logger.warning("the output template gives no name for an output: the plugin's is kept", metadata: [
                "task": "\(task.id)", "output": "\(failure.index)", "error": "\(failure.error.message)",
            ])
        }
        claim(named.manifest, for: task)
        return named.manifest
    }

    func isTaken(_ name: String, output: DownloadOutput, by task: ManagedTask) -> Bool {
        var renamed = output
        renamed.name = name
        let path = layout.outputPath(entity: task.entity, output: renamed)
        if let owner = claims.holder(of: path), owner != task.handle { return true }
        // An output named by the server is named (and checked against the disk) when finished.
        if output.isNamedByResponse { return false }
        return FileOperations.exists(path) || FileOperations.exists(FileLayout.partPath(path))
    }

    func claim(_ manifest: DownloadManifest, for task: ManagedTask) {
        for output in manifest.outputs where output.isSelected || task.mode == .cacheOnly {
            claims.claim(layout.outputPath(entity: task.entity, output: output), for: task.handle)
        }
    }

    func releaseClaims(of task: ManagedTask) {
        for output in task.manifest?.outputs ?? [] {
            claims.release(layout.outputPath(entity: task.entity, output: output), of: task.handle)
        }
    }
}
