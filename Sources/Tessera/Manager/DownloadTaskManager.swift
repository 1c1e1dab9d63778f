import Foundation
import Logging

/// Runs download tasks: one per entity, queued by weight, at most
/// ``Configuration/maxConcurrentTasks`` active at once and ``Configuration/maxConcurrentSegments``
/// segment transfers over all of them, retried, observable, rolled up into groups.
///
/// Feed it operations (ZZDownloader's design) with ``perform(_:)``, or call the typed methods:
///
/// ```swift
/// let manager = DownloadTaskManager(configuration: .init(downloadRoot: "/data"), engine: engine)
/// let events = manager.events()
/// let info = try await manager.start(PlayurlEntity(cid: 1001))
/// for await event in events { ... }
/// await manager.shutdown()
/// ```
///
/// Who does what:
/// - the `Scheduler` (a value) **decides**: what a command does to a task, which task starts,
///   which task gets a freed segment slot;
/// - the manager (this actor) **acts**: it applies the scheduler's actions, starts and cancels
///   runs, persists and tells;
/// - a `TaskRun` **moves bytes** with the segment slots it is granted;
/// - the ``DownloadStore`` and each task's `TaskJournal` **remember**: the first what the tasks
///   are, the second what is on disk.
///
/// Operations are applied in the order received; none waits for the network. Tasks are
/// identified by their entity's ``DownloadTaskID``: starting a known entity returns the existing
/// task (queued again, ahead of the others, when it was paused or had failed). Whatever the
/// manager starts (runs, timers, watchers, probes, deletions) it owns, and ``shutdown()`` ends.
public actor DownloadTaskManager {
    /// The configuration.
    public let configuration: Configuration
    /// The engine every transfer goes through.
    public nonisolated let engine: CurlEngine
    /// The entity types known to this manager (used to rebuild stored entities).
    public nonisolated let registry: EntityRegistry
    nonisolated let store: any DownloadStore
    /// The segment cache, if the manager has one.
    public nonisolated let cache: SegmentCache?
    nonisolated let hub = EventHub()
    /// The live recordings running now, to end them on request (Live/LiveRecordings.swift).
    nonisolated let liveRecordings = LiveRecordings()
    nonisolated let layout: FileLayout
    nonisolated let diskGate: DiskGate?
    nonisolated let executor: BlockingExecutor
    /// What every run of this manager shares.
    private nonisolated let services: RunServices
    /// Runs whose mailboxes have something: taken in batches (one hop to the actor per batch).
    private nonisolated let inbox = EventQueue<RunTicket>()
    /// Merges completed tasks' files (``Configuration/merging``).
    nonisolated let merger: TaskMerger?

    private var scheduler: Scheduler
    private var tasks: [DownloadTaskID: ManagedTask] = [:]
    /// The same tasks by handle: what the scheduler and the runs name them by.
    private var byHandle: [TaskHandle: ManagedTask] = [:]
    private var nextHandle = 0
    /// Every task, in the order it was added (removed ones are skipped lazily).
    private var addedOrder: [ManagedTask] = []
    private var groups: [String: GroupEntry] = [:]
    private var nextSequence = 0
    /// Output paths, by the task that owns them (runs claim the names responses give themselves).
    nonisolated let claims = OutputClaims()
    /// What the store has not been told yet, in order (written once per tick); the index of
    /// each task's last change, so a change that only updates it merges into that one.
    private var unsaved: [StoreChange] = []
    private var lastUnsaved: [DownloadTaskID: Int] = [:]
    /// The groups to tell subscribers about at the next tick, each with the children whose
    /// snapshot changed (their part of the group's tally is counted again).
    private var dirtyGroups: [String: Set<DownloadTaskID>] = [:]
    private var started = false
    private var isShutDown = false
    /// Tasks the manager owns besides runs: the inbox, the ticker, watchers, probes, timers, deletions.
    private var owned: [UUID: Task<Void, Never>] = [:]
    private var ticker: Task<Void, Never>?
    /// Applies what runs post, in order; at shutdown it ends after the last run's last word.
    private var inboxDrain: Task<Void, Never>?
    private var prober: Task<Void, Never>?
    private var lastStoreWrite: Task<Void, Never>?
    /// Pending deletions of removed tasks' files, by task.
    private var deletions: [DownloadTaskID: Task<Void, Never>] = [:]
    private var bytesSinceDiskCheck: Int64 = 0
    /// Numbers the free-space checks: one that another started after has a newer reading, and
    /// an older reading must not undo it (the actor runs other work while a check measures).
    private var diskCheckNumber = 0
    private var lastFreeBytes: Int64?

    /// Creates a manager. Nothing runs until an operation starts a task.
    public init(
        configuration: Configuration = Configuration(), engine: CurlEngine,
        store: any DownloadStore = InMemoryDownloadStore(), cache: SegmentCache? = nil,
        registry: EntityRegistry = EntityRegistry()
    ) {
        self.configuration = configuration
        self.engine = engine
        self.store = store
        self.cache = cache
        self.registry = registry
        layout = FileLayout(root: configuration.downloadRoot, fence: configuration.writeFence)
        diskGate = configuration.diskSpace.map { policy in
            DiskGate(policy: policy, paths: [configuration.downloadRoot] + (cache.map { [$0.directory] } ?? []))
        }
        executor = BlockingExecutor(threads: 2)
        services = RunServices(
            engine: engine, cache: cache, executor: executor, layout: layout, configuration: configuration,
            diskGate: diskGate, claims: claims)
        merger = if let policy = configuration.merging { TaskMerger(policy: policy, hub: hub) } else { nil }
        scheduler = Scheduler(
            limits: Scheduler.Limits(
                tasks: configuration.maxConcurrentTasks, segments: configuration.maxConcurrentSegments,
                segmentsPerHost: configuration.maxConcurrentSegmentsPerHost ?? configuration.maxConcurrentSegments,
                allowsMeteredNetwork: configuration.allowsMeteredNetwork, maxNetworkWait: configuration.maxNetworkWait),
            network: configuration.networkMonitor?.currentStatus ?? .online)
    }

    /// A manager let go without ``shutdown()`` ends what waits on it: the task that applies what
    /// runs post, and the event streams (their subscribers' loops end instead of waiting forever).
    deinit {
        inbox.finish()
        hub.finish()
    }

    // MARK: - Operations

    /// Applies one operation.
    @discardableResult
    public func perform(_ operation: DownloadOperation) async throws(DownloadError) -> DownloadOperationResult {
        switch operation.command {
        case .add(let entity): return .task(try add(entity))
        case .start(let entity): return .task(try await start(entity))
        case .startCache(let entity): return .task(try startCache(entity))
        case .resume(let id): return .task(try resume(id))
        case .stop(let id): return .task(stop(id))
        case .remove(let id, let deletingFiles): return .task(remove(id, deletingFiles: deletingFiles))
        case .check(let id): return .task(check(id))
        case .checkGroup(let key): return .group(checkGroup(key))
        case .checkAllGroups: return .groups(checkAllGroups())
        case .startAll: return .tasks(await startAll())
        case .stopAll: return .tasks(stopAll())
        }
    }

    /// Adds the entity's task without starting it; it stays `idle` until ``startAll()`` or
    /// ``resume(_:)``. A known entity's task is returned as it is.
    @discardableResult
    public func add(_ entity: DownloadBaseEntity) throws(DownloadError) -> DownloadTaskInfo {
        try add(entity, mode: .download, start: false)
    }

    /// Adds the entity's task (or finds the known one) and queues it. A known task that
    /// completed is only reported as such while its outputs are where they belong (under this
    /// manager's download root) with their sizes: when one is missing (deleted, or the root
    /// moved), the task runs again (from the cache where it can).
    @discardableResult
    public func start(_ entity: DownloadBaseEntity) async throws(DownloadError) -> DownloadTaskInfo {
        let redo = await outputsAreMissing(entity.taskID)
        return try add(entity, mode: .download, start: true, redo: redo)
    }

    /// Starts the tasks of several entities, in order, each as ``start(_:)`` (or, with `cacheOnly`,
    /// ``startCache(_:)``) would: one call for a whole list of inputs. Each result is the task, or
    /// why that entity could not be added; the others are added all the same.
    public func start(contentsOf entities: [DownloadBaseEntity], cacheOnly: Bool = false) async
        -> [Result<DownloadTaskInfo, DownloadError>]
    {
        var results: [Result<DownloadTaskInfo, DownloadError>] = []
        results.reserveCapacity(entities.count)
        for entity in entities {
            do throws(DownloadError) {
                if cacheOnly {
                    results.append(.success(try startCache(entity)))
                } else {
                    // (Only a known, completed task is looked at on disk.)
                    let redo = tasks[entity.taskID] != nil ? await outputsAreMissing(entity.taskID) : false
                    results.append(.success(try add(entity, mode: .download, start: true, redo: redo)))
                }
            } catch {
                results.append(.failure(error))
            }
        }
        return results
    }

    /// Adds the entity's task in cache-only mode: its segments are fetched into the segment
    /// cache and no output is written.
    @discardableResult
    public func startCache(_ entity: DownloadBaseEntity) throws(DownloadError) -> DownloadTaskInfo {
        try add(entity, mode: .cacheOnly, start: true)
    }

    /// Whether the known task `id` completed in download mode and one of its outputs is not on
    /// disk with its size (checked off the actor).
    private func outputsAreMissing(_ id: DownloadTaskID) async -> Bool {
        guard let task = tasks[id], task.mode == .download, state(of: task) == .completed else { return false }
        if let replacement = task.replacement {
            // Merged into one file: the task is done while that file is there.
            let size = await executor.run { FileOperations.size(replacement.path) }
            if size == replacement.size { return false }
            guard let task = tasks[id], state(of: task) == .completed, let manifest = task.manifest else { return false }
            task.setManifest(manifest.withoutReplacement, layout: layout)
            save(.update(taskRecord(task, state: .completed)))
            configuration.logger.info("a completed task's merged file is missing: it runs again", metadata: ["task": "\(id)", "path": "\(replacement.path)"])
            return true
        }
        let outputs = task.outputInfos(complete: true)
        let missing = await executor.run { () -> String? in
            for output in outputs {
                var info = stat()
                guard stat(output.path, &info) == 0 else { return output.path }
                // (An output of separate files is a directory: there, being there is enough.)
                if info.st_mode & S_IFMT == S_IFREG, let expected = output.expectedSize, expected != Int64(info.st_size) {
                    return output.path
                }
            }
            return nil
        }
        // (A merge that ended meanwhile replaced the outputs it removed: nothing is missing.)
        guard let missing, let task = tasks[id], state(of: task) == .completed, task.replacement == nil else { return false }
        configuration.logger.info("a completed task's output is missing: it runs again", metadata: ["task": "\(id)", "path": "\(missing)"])
        return true
    }

    /// Records that a completed task's outputs were replaced by one file made from them (a
    /// merge, see `MediaMerger`): the task stays completed while `path` is there with `size`
    /// bytes, its snapshot lists that file as its only output, and starting it again fetches
    /// nothing. When the file is gone, starting the task fetches its outputs again. The record
    /// is in the store when this returns, also after ``shutdown()`` (a merge runs after the
    /// downloads).
    public func recordReplacement(of id: DownloadTaskID, by path: String, size: Int64) async throws(DownloadError) {
        guard let task = tasks[id], let manifest = task.manifest, state(of: task) == .completed, task.mode == .download else {
            throw DownloadError(.invalidState, "only a completed download's outputs can be replaced (task \(id))")
        }
        var replaced = manifest.withoutReplacement
        replaced.mergeIsPending = false
        replaced.metadata[DownloadManifest.replacedByKey] = path
        replaced.metadata[DownloadManifest.replacedBySizeKey] = String(size)
        task.setManifest(replaced, layout: layout)
        save(.update(taskRecord(task, state: .completed)))
        await writeUnsaved()
    }

    /// Marks a completed task's merge as started (or not any more), in the store when this
    /// returns: a merge cut by a shutdown runs again at the next ``restore(resuming:)``.
    func setMergePending(_ id: DownloadTaskID, _ pending: Bool) async {
        guard let task = tasks[id], var manifest = task.manifest, state(of: task) == .completed, manifest.mergeIsPending != pending
        else { return }
        manifest.mergeIsPending = pending
        task.setManifest(manifest, layout: layout)
        save(.update(taskRecord(task, state: .completed)))
        await writeUnsaved()
    }

    /// Returns when no merge runs (``Configuration/merging``): the merges of the tasks that
    /// completed so far have ended.
    public func finishMerging() async {
        await merger?.waitForAll()
    }

    /// Queues a known task again, ahead of the others.
    @discardableResult
    public func resume(_ id: DownloadTaskID) throws(DownloadError) -> DownloadTaskInfo {
        guard let task = tasks[id] else { throw DownloadError(.invalidState, "there is no task \(id)") }
        task.lastError = nil
        command(.resume(task.handle))
        return info(task)
    }

    /// Pauses a task; what it has on disk is kept.
    @discardableResult
    public func stop(_ id: DownloadTaskID) -> DownloadTaskInfo? {
        guard let task = tasks[id] else { return nil }
        command(.stop(task.handle))
        return info(task)
    }

    /// Removes a task and its partial files; with `deletingFiles`, its finished outputs too.
    @discardableResult
    public func remove(_ id: DownloadTaskID, deletingFiles: Bool = false) -> DownloadTaskInfo? {
        guard let task = tasks[id] else { return nil }
        let runner = task.run?.task
        merger?.cancel(id)
        command(.remove(task.handle))
        let snapshot = info(task, state: .removed)
        tasks[id] = nil
        byHandle[task.handle] = nil
        task.isRemoved = true
        // (Also the names its run claimed that the manifest does not show yet.)
        claims.releaseAll(of: id)
        leaveGroup(task)
        save(.remove(id))
        hub.emit(.taskRemoved(id))
        // Files go once the run has let go of them, off the actor (a task added again with the
        // same identity waits for this).
        let layout = self.layout, executor = self.executor, entity = task.entity, manifest = task.manifest
        // (Under a fence, only while the same holding lasts: a task taken again since is not touched.)
        let holding = layout.fence?.journalEpoch(of: id)
        deletions[id] = own { [weak self, outputs = manifest?.outputs ?? []] in
            await runner?.value
            await executor.run {
                // (A task another process holds now is only forgotten here, its files kept.)
                guard layout.permitsWrite(to: id), layout.fence?.journalEpoch(of: id) == holding else { return }
                TaskJournal.remove(basePath: layout.journalBase(of: id))
                layout.removeWork(of: id)
                for output in outputs {
                    let path = layout.outputPath(entity: entity, output: output)
                    FileOperations.remove(FileLayout.partPath(path))
                    if deletingFiles {
                        output.assembly == .separateFiles ? FileOperations.removeTree(path) : FileOperations.remove(path)
                    }
                }
            }
            await self?.finishDeletion(id)
        }
        return snapshot
    }

    /// A snapshot of one task.
    public func check(_ id: DownloadTaskID) -> DownloadTaskInfo? {
        tasks[id].map { info($0) }
    }

    /// The task once it has settled: completed, failed, invalid or paused (an interrupted task
    /// resumes by itself, so it is waited for). Returns at once for a settled task, `nil` for
    /// an unknown or removed one, and the latest snapshot when the manager shuts down first.
    public func wait(for id: DownloadTaskID) async -> DownloadTaskInfo? {
        // Subscribed before looking, so no change falls between the look and the stream.
        let events = hub.subscribe()
        guard let now = check(id) else { return nil }
        if Self.isSettled(now.state) { return now }
        for await event in events {
            switch event {
            case .taskStateChanged(let info, _) where info.id == id && Self.isSettled(info.state):
                return info
            case .taskRemoved(let removed) where removed == id:
                return nil
            default:
                continue
            }
        }
        return check(id)
    }

    /// Starts the entity's task (see ``start(_:)``) and returns it once it has settled (see
    /// ``wait(for:)``) and its files are merged (``Configuration/merging``): a download in one call.
    public func download(_ entity: DownloadBaseEntity) async throws(DownloadError) -> DownloadTaskInfo {
        let started = try await start(entity)
        let settled = await wait(for: started.id) ?? started
        await merger?.wait(for: started.id)
        return check(started.id) ?? settled
    }

    private static func isSettled(_ state: DownloadTaskState) -> Bool {
        state.isFinal || state == .paused
    }

    /// Snapshots of every task, in the order they were added.
    public func checkAll() -> [DownloadTaskInfo] {
        liveTasks.map { info($0) }
    }

    /// Snapshots of the tasks `ids`, in that order, leaving out unknown and removed ones (one call
    /// for a list, without building every other task's).
    public func check(_ ids: [DownloadTaskID]) -> [DownloadTaskInfo] {
        ids.compactMap { tasks[$0].map { info($0) } }
    }

    /// A snapshot of one group.
    public func checkGroup(_ key: String) -> DownloadGroupInfo? {
        groupInfo(key)
    }

    /// Snapshots of every group, by key.
    public func checkAllGroups() -> [DownloadGroupInfo] {
        groups.keys.sorted().compactMap(groupInfo)
    }

    /// Queues every task that is paused, failed, invalid or idle.
    ///
    /// Thousands of tasks are queued in chunks, letting the first ones start meanwhile; a task
    /// that a later operation touches in between is left as that operation left it.
    @discardableResult
    public func startAll() async -> [DownloadTaskInfo] {
        let epoch = scheduler.beginCommand()
        var started: [DownloadTaskInfo] = []
        for task in liveTasks {
            // (The scheduler starts only a paused, failed, invalid or idle task nothing touched since.)
            let before = state(of: task)
            apply(scheduler.handle(.startIfUntouched(task.handle, since: epoch)))
            guard state(of: task) != before else { continue }
            task.lastError = nil
            started.append(info(task))
            // The first tasks launch at once (after 1, 2, 4 … 64 queued), then every 64, with
            // a turn for the runs in between: the first transfer does not wait for a long list.
            if started.count & (started.count - 1) == 0 || started.count % 64 == 0 {
                apply(scheduler.handle(.schedule))
                await Task.yield()
            }
        }
        apply(scheduler.handle(.schedule))
        return started
    }

    /// Pauses every task that is not finished.
    @discardableResult
    public func stopAll() -> [DownloadTaskInfo] {
        _ = scheduler.beginCommand()
        let candidates = liveTasks.filter { [.idle, .waiting, .resolving, .downloading, .interrupted].contains(state(of: $0).kind) }
        apply(scheduler.handle(.stopMany(candidates.map(\.handle))))
        return candidates.map { info($0) }
    }

    /// How many tasks may be active at once now (``Configuration/maxConcurrentTasks`` until
    /// ``setMaxConcurrentTasks(_:)`` changes it).
    public var maxConcurrentTasks: Int { scheduler.limits.tasks }

    /// Changes how many tasks may be active at once, while the manager runs (at least 1): a
    /// higher limit starts waiting tasks at once; a lower one lets running tasks finish and
    /// starts no more until fewer are active (aria2's `max-concurrent-downloads` over RPC).
    public func setMaxConcurrentTasks(_ count: Int) {
        scheduler.setTaskLimit(count)
        apply(scheduler.handle(.schedule))
    }

    /// Every event from now on, in order. Each call returns a new stream; it ends when the
    /// subscriber stops iterating, or at ``shutdown()``. A condition that holds tasks back now
    /// (a full disk, no network) is told first, as a notice.
    public nonisolated func events() -> DownloadEventStream {
        hub.subscribe()
    }

    /// Returns when every change made so far is in the store, running tasks' progress included.
    public func flushStore() async {
        for handle in scheduler.running {
            guard let task = byHandle[handle], task.progress != nil else { continue }
            save(.update(taskRecord(task, state: state(of: task))))
        }
        await writeUnsaved()
    }

    /// Stops everything the manager started: runs (their bytes are kept, and their tasks resume
    /// from them next time), the ticker, watchers, probes, timers and pending deletions; writes
    /// what the store has not been told; tells the groups' last changes and ends the event
    /// streams (a subscriber that reads its stream to the end has seen every event). Call it
    /// once, at the end; later operations find nothing running, and snapshots stay readable.
    /// The engine is not shut down (it may be shared).
    public func shutdown() async {
        guard !isShutDown else { return }
        isShutDown = true
        let runs = tasks.values.compactMap { $0.run?.task }
        for task in tasks.values { task.run?.task.cancel() }
        for run in runs { await run.value }
        // Merges stop (ffmpeg too): their tasks stay completed with their files, the merge pending.
        await merger?.shutdown()
        // What the runs said last (their endings, what they kept) is applied before the store's
        // last write; nothing is launched any more.
        inbox.finish()
        await inboxDrain?.value
        ticker?.cancel()
        prober?.cancel()
        for task in owned.values { task.cancel() }
        for task in Array(owned.values) { await task.value }
        owned.removeAll()
        await writeUnsaved()
        await executor.shutdown()
        // A group's last change is told before the streams end, not lost with the next tick.
        emitGroupChanges()
        hub.finish()
    }

    /// Segment slots held now, and the most ever held at once (for tests and monitoring).
    var segmentSlots: (inUse: Int, peak: Int) { (scheduler.segmentsInUse, scheduler.peakSegmentsInUse) }

    // MARK: - Adding

    private func add(_ entity: DownloadBaseEntity, mode: DownloadTaskMode, start: Bool, redo: Bool = false) throws(DownloadError)
        -> DownloadTaskInfo
    {
        guard !isShutDown else { throw DownloadError(.invalidState, "the manager has been shut down") }
        startOnce()
        guard entity is any DownloadParserProtocol else {
            throw DownloadError(.invalidRequest, "\(type(of: entity).entityType) entities have no parser (conform to DownloadParserProtocol)")
        }
        if !entity.destinationDirectory.isEmpty { _ = try SafePath.relative(entity.destinationDirectory) }
        if mode == .cacheOnly, cache == nil {
            throw DownloadError(.invalidState, "startCache needs a segment cache, and this manager has none")
        }
        let id = entity.taskID
        _ = scheduler.beginCommand()
        if let task = tasks[id] {
            guard start else { return info(task) }
            let modeChanged = task.mode != mode
            if modeChanged, !state(of: task).isRunning, state(of: task) != .waiting { task.mode = mode }
            task.lastError = nil
            apply(scheduler.handle(.start(task.handle, redo: modeChanged || redo)))
            // A completed task started again: its files are merged if they were not.
            if state(of: task) == .completed { merger?.consider(info(task), manager: self) }
            return info(task)
        }
        let record: EntityRecord
        do {
            record = try entity.record()
        } catch {
            throw DownloadError(.invalidRequest, "the \(type(of: entity).entityType) entity \(entity.entityKey) cannot be stored: \(error)")
        }
        nextSequence += 1
        let task = ManagedTask(entity: entity, mode: mode, sequence: nextSequence, handle: newHandle())
        tasks[id] = task
        byHandle[task.handle] = task
        addedOrder.append(task)
        joinGroup(task)
        save(.insert(StoredTask(entity: record, task: taskRecord(task, state: .idle))))
        if hub.hasSubscribers { hub.emit(.taskAdded(info(task, state: .idle))) }
        // A new task queues behind the others (a known one started again jumps ahead).
        apply(scheduler.handle(.added(task.handle, sequence: task.sequence, start: start)))
        return info(task)
    }

    // MARK: - Applying the scheduler's actions

    private func newHandle() -> TaskHandle {
        nextHandle += 1
        return TaskHandle(nextHandle)
    }

    private func command(_ event: Scheduler.Event) {
        _ = scheduler.beginCommand()
        apply(scheduler.handle(event))
    }

    private func apply(_ actions: [Scheduler.Action]) {
        for action in actions {
            switch action {
            case .launch(let handle, let generation):
                launch(handle, generation: generation)
            case .cancel(let handle):
                byHandle[handle]?.run?.task.cancel()
                byHandle[handle]?.run?.events.finish()
            case .share(let handle, let generation, let limit):
                if let run = byHandle[handle]?.run, run.ticket.generation == generation { run.events.post(.share(limit)) }
            case .grant(let handle, let generation, let host, let count):
                if let run = byHandle[handle]?.run, run.ticket.generation == generation {
                    run.events.post(.granted(host: host, count: count))
                }
            case .changed(let handle, let from, let to):
                guard let task = byHandle[handle] else { continue }
                if to != .removed { save(.update(taskRecord(task, state: to))) }
                if !to.isRunning { task.speed.reset() }
                if hub.hasSubscribers { hub.emit(.taskStateChanged(info(task, state: to), previous: from)) }
                if to == .completed { merger?.consider(info(task, state: to), manager: self) }
                markGroupChild(task)
                if to == .completed || to == .failed || to == .invalid || to.isInterrupted { ensureTicker() }
            case .armNetworkWait(let handle, let wait, let after):
                own { [weak self] in
                    // Cancelled (by the shutdown) is not expired: the task stays as it is.
                    guard (try? await Task.sleep(for: after)) != nil else { return }
                    await self?.networkWaitExpired(handle, wait: wait, after: after)
                }
            case .startProbing:
                startProber()
            case .notice(let notice):
                hub.emit(notice: notice)
            case .meteredNetwork(let handle, let allowed):
                guard let id = byHandle[handle]?.id else { continue }
                let network = scheduler.network
                hub.emit(notice: DownloadNotice(
                    kind: .meteredNetwork,
                    message: allowed ? "\(id) started on a metered network (\(network))" : "\(id) waits for an unmetered network (\(network))",
                    taskID: id))
            case .refused(let handle, let from, let to):
                let task = byHandle[handle].map { "\($0.id)" } ?? "\(handle)"
                configuration.logger.error("refused transition", metadata: ["task": "\(task)", "from": "\(from)", "to": "\(to)"])
            }
        }
    }

    private func launch(_ handle: TaskHandle, generation: Int) {
        // After the shutdown a task the scheduler launches stays as the store has it (waiting or
        // resolving: resumed next time).
        guard let task = byHandle[handle], !isShutDown else { return }
        let id = task.id
        let ticket = RunTicket(handle: handle, generation: generation)
        let inbox = self.inbox
        let mailbox = RunMailbox(ticket: ticket) { inbox.post($0) }
        let events = EventQueue<RunEvent>()
        let progress = TaskProgress(startingAt: task.progress?.snapshot ?? task.summary)
        let start = RunStart(
            manifest: task.manifest, resolveCount: task.resolveCount, isFresh: task.manifest == nil,
            waitsForDeletion: deletions[id] != nil)
        let run = TaskRun(
            ticket: ticket, id: id, manager: self, start: start, entity: task.entity, mode: task.mode, progress: progress,
            mailbox: mailbox,
            services: services,
            events: events, baseSeed: TaskRun.baseSeed(for: id, configured: configuration.randomSeed))
        let previous = task.run?.task
        task.progress = progress
        task.run = RunHandle(
            ticket: ticket, mailbox: mailbox, shared: run.shared, events: events,
            task: Task {
                // A stopped run may still be letting go of its files: it finishes first.
                await previous?.value
                await run.run()
            })
        ensureTicker()
    }

    // MARK: - What runs ask

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
        if resolved { task.resolveCount += 1 }
        let previous = task.manifest
        let named = resolved ? assignOutputNames(task, manifest) : manifest
        let changed = previous.map { !$0.hasSameSegments(as: named) } ?? false
        task.setManifest(named, layout: layout)
        save(.update(taskRecord(task, state: state(of: task))))
        if resolved, named.outputs.contains(where: { !$0.isNamedByResponse && ($0.isSelected || task.mode == .cacheOnly) }) {
            // The names given to the outputs reach the store before any byte reaches their
            // files: after a kill, the same files are found again under the same names.
            await writeUnsaved()
            guard current(ticket) != nil else { return nil }
        }
        // The first slots are granted before the run hears back: they wait in its events.
        if let demand {
            // (A cap first: no slot beyond it is granted, not even for a moment.)
            if let cap { apply(scheduler.handle(.cap(ticket.handle, generation: ticket.generation, slots: cap))) }
            apply(scheduler.handle(.resolved(ticket.handle, generation: ticket.generation, demand: demand)))
        }
        return (named, changed)
    }

    /// A run named output `index` `name` (claimed in ``claims``; `original` is the name it was
    /// made from): the task's manifest (and a plain download's title) says so from now on.
    private func runNamedOutput(_ ticket: RunTicket, output index: Int, name: String, original: String) {
        guard let task = current(ticket), var manifest = task.manifest, index < manifest.outputs.count,
            name != manifest.outputs[index].name
        else { return }
        let key = "tessera.originalName.\(index)"
        manifest.metadata[key] = name != original ? original : nil
        let previous = manifest.outputs[index].name
        manifest.outputs[index].name = name
        // A plain download's title is its file's name; a manifest of several outputs keeps its own.
        if manifest.outputs.count == 1, manifest.title == nil || manifest.title == task.entity.title || manifest.title == previous {
            manifest.title = name
        }
        task.setManifest(manifest, layout: layout)
        save(.update(taskRecord(task, state: state(of: task))))
    }

    private func current(_ ticket: RunTicket) -> ManagedTask? {
        guard let task = byHandle[ticket.handle], task.run?.ticket == ticket, scheduler.generation(of: ticket.handle) == ticket.generation
        else { return nil }
        return task
    }

    /// Takes what runs posted (slot counts, reports) and applies it, run by run in the order
    /// they posted first.
    private func drain(_ tickets: [RunTicket]) {
        for ticket in tickets { drain(ticket) }
    }

    private func drain(_ ticket: RunTicket) {
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

    private func handle(_ report: RunReport, from ticket: RunTicket, task: ManagedTask) {
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
                if current != .removed { save(.update(taskRecord(task, state: current))) }
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
        }
    }

    // MARK: - Output names

    /// Gives a new manifest's outputs places no other task's output and no existing file holds,
    /// by inserting `.1`, `.2`, … before the extension (as aria2c does); names given to the
    /// same outputs before are kept, so a re-resolve finds its files again.
    /// Names an output by the template (the name the server gives no longer matters). A name the
    /// template cannot make (fields that leave nothing) keeps the plugin's, with a warning.
    private func templateName(_ index: Int, of manifest: inout DownloadManifest, for task: ManagedTask, by template: OutputNameTemplate) {
        let entity = task.entity
        let values = OutputNameTemplate.Values(
            manifest: manifest, index: index, type: type(of: entity).entityType, key: entity.entityKey, title: entity.title)
        do {
            manifest.outputs[index].name = try template.name(values)
            manifest.outputs[index].isNamedByResponse = false
        } catch {
            configuration.logger.warning("the output template gives no name for an output: the plugin's is kept", metadata: [
                "task": "\(task.id)", "error": "\(error.message)",
            ])
        }
    }

    private func assignOutputNames(_ task: ManagedTask, _ fresh: DownloadManifest) -> DownloadManifest {
        var manifest = fresh
        let previous = task.manifest
        releaseClaims(of: task)
        // The names given to this manifest's outputs so far: a template can give two the same.
        var assigned = Set<String>()
        for index in manifest.outputs.indices {
            if let template = configuration.outputNameTemplate, task.mode == .download, manifest.outputs[index].isSelected {
                templateName(index, of: &manifest, for: task, by: template)
            }
            let original = manifest.outputs[index].name
            let key = "tessera.originalName.\(index)"
            if let previous, index < previous.outputs.count {
                let earlierOriginal = previous.metadata[key] ?? previous.outputs[index].name
                if earlierOriginal == original || (manifest.outputs[index].isNamedByResponse && previous.outputs[index].isNamedByResponse) {
                    manifest.outputs[index].name = previous.outputs[index].name
                    if manifest.outputs[index].name != original { manifest.metadata[key] = earlierOriginal }
                    assigned.insert(manifest.outputs[index].name)
                    continue
                }
            }
            guard manifest.outputs[index].isSelected || task.mode == .cacheOnly else { continue }
            var candidate = original
            var number = 0
            while assigned.contains(candidate) || isTaken(candidate, output: manifest.outputs[index], by: task) {
                number += 1
                candidate = OutputClaims.numbered(original, number)
            }
            assigned.insert(candidate)
            if candidate != original {
                manifest.outputs[index].name = candidate
                manifest.metadata[key] = original
            }
        }
        claim(manifest, for: task)
        return manifest
    }

    private func isTaken(_ name: String, output: DownloadOutput, by task: ManagedTask) -> Bool {
        var renamed = output
        renamed.name = name
        let path = layout.outputPath(entity: task.entity, output: renamed)
        if let owner = claims.holder(of: path), owner != task.id { return true }
        // An output named by the server is named (and checked against the disk) when finished.
        if output.isNamedByResponse { return false }
        return FileOperations.exists(path) || FileOperations.exists(FileLayout.partPath(path))
    }

    private func claim(_ manifest: DownloadManifest, for task: ManagedTask) {
        for output in manifest.outputs where output.isSelected || task.mode == .cacheOnly {
            claims.claim(layout.outputPath(entity: task.entity, output: output), for: task.id)
        }
    }

    private func releaseClaims(of task: ManagedTask) {
        for output in task.manifest?.outputs ?? [] {
            claims.release(layout.outputPath(entity: task.entity, output: output), of: task.id)
        }
    }

    // MARK: - State, snapshots, groups

    private func state(of task: ManagedTask) -> DownloadTaskState {
        scheduler.state(of: task.handle) ?? .removed
    }

    /// The tasks in the order they were added.
    private var liveTasks: [ManagedTask] {
        if addedOrder.count > tasks.count * 2 { addedOrder.removeAll(where: \.isRemoved) }
        return addedOrder.filter { !$0.isRemoved }
    }

    func info(_ task: ManagedTask, state explicit: DownloadTaskState? = nil) -> DownloadTaskInfo {
        let state = explicit ?? self.state(of: task)
        let snapshot = task.progress?.snapshot ?? task.summary
        let (done, total, isEstimate) = task.amounts(snapshot, state: state)
        let remaining = total.map { max(0, $0 - done) }
        let isLive = task.manifest?.isLive == true
        return DownloadTaskInfo(
            id: task.id, title: task.manifest?.title ?? task.entity.title, groupKey: task.groupKey, state: state,
            mode: task.mode, bytesDone: done, bytesTotal: total,
            bytesTotalIsEstimate: isEstimate, segmentsDone: snapshot.doneSegments,
            segmentsTotal: snapshot.segmentCount, bytesPerSecond: state.isRunning ? task.speed.bytesPerSecond : 0,
            eta: state.isRunning ? task.speed.eta(remaining: remaining) : nil,
            outputs: task.outputInfos(complete: state == .completed), error: task.lastError,
            resolveCount: task.resolveCount, weight: scheduler.weight(of: task.handle),
            outputsAreAlternatives: task.manifest?.selectsAlternatives ?? false,
            live: isLive ? snapshot.live ?? LiveRecordingInfo() : nil)
    }

    private func taskRecord(_ task: ManagedTask, state: DownloadTaskState) -> TaskRecord {
        let snapshot = task.progress?.snapshot ?? task.summary
        return TaskRecord(
            id: task.id, state: state, mode: task.mode, weight: scheduler.weight(of: task.handle),
            sequence: task.sequence, resolveCount: task.resolveCount, lastError: task.lastError.map(StoredError.init),
            manifest: task.manifest, manifestRevision: task.manifestRevision, addedAt: task.addedAt,
            bytesDone: snapshot.bytes, segmentsDone: snapshot.doneSegments, bytesTotal: task.exactTotal(snapshot))
    }

    private func joinGroup(_ task: ManagedTask) {
        guard let key = task.groupKey else { return }
        if groups[key] == nil {
            groups[key] = GroupEntry(group: type(of: task.entity).groupType.init(key: key))
        }
        groups[key]?.children.insert(task.id)
        markGroupChild(task)
    }

    /// Notes that a child's snapshot changed: its group's tally counts it again at the next tick.
    private func markGroupChild(_ task: ManagedTask) {
        guard let key = task.groupKey else { return }
        dirtyGroups[key, default: []].insert(task.id)
    }

    private func leaveGroup(_ task: ManagedTask) {
        guard let key = task.groupKey, var entry = groups[key] else { return }
        entry.children.remove(task.id)
        if let counted = entry.counted.removeValue(forKey: task.id) { entry.tally.remove(counted) }
        groups[key] = entry.children.isEmpty ? nil : entry
        dirtyGroups[key, default: []].remove(task.id)
        ensureTicker()
    }

    /// A group with every child's snapshot (queries; O(children)).
    private func groupInfo(_ key: String) -> DownloadGroupInfo? {
        guard let entry = groups[key] else { return nil }
        let children = entry.children.compactMap { tasks[$0] }.sorted { $0.sequence < $1.sequence }.map { info($0) }
        let needsChildren = type(of: entry.group).needsChildren
        return DownloadGroupInfo(
            key: key, groupType: type(of: entry.group).groupType, title: entry.group.title(children: needsChildren ? children : []),
            rollUp: entry.group.rollUp(children: children), childCount: children.count, children: children)
    }

    /// A group for an event: from its tally, without its children unless its class needs them.
    private func groupUpdate(_ key: String) -> DownloadGroupInfo? {
        guard let entry = groups[key] else { return nil }
        guard !type(of: entry.group).needsChildren else { return groupInfo(key) }
        return DownloadGroupInfo(
            key: key, groupType: type(of: entry.group).groupType, title: entry.group.title(children: []),
            rollUp: entry.group.rollUp(tally: entry.tally), childCount: entry.children.count, children: [])
    }

    /// Counts the changed children of the dirty groups again.
    private func refreshTallies() {
        for (key, ids) in dirtyGroups {
            guard var entry = groups[key] else { continue }
            groups[key] = nil  // (no copy of the entry while it changes)
            for id in ids where entry.children.contains(id) {
                guard let task = tasks[id] else { continue }
                let counted = DownloadGroupTally.Entry(info(task))
                if let old = entry.counted.updateValue(counted, forKey: id) { entry.tally.remove(old) }
                entry.tally.add(counted)
            }
            groups[key] = entry
        }
    }

    // MARK: - The tick: progress, store, journals, groups, disk

    private func ensureTicker() {
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

    private var lastProgressEmit = ContinuousClock.now

    /// Tells subscribers about the groups whose children changed since the last time.
    private func emitGroupChanges() {
        refreshTallies()
        if hub.hasSubscribers {
            for key in dirtyGroups.keys.sorted() {
                if let group = groupUpdate(key) { hub.emit(.groupUpdated(group)) } else { hub.emit(.groupRemoved(key: key)) }
            }
        }
        dirtyGroups.removeAll()
    }

    /// Samples speeds, emits progress and group changes, commits journals, writes the store.
    /// Returns whether to go on.
    private func tick() async -> Bool {
        let now = ContinuousClock.now
        let emitProgress = now - lastProgressEmit >= configuration.progressInterval
        if emitProgress { lastProgressEmit = now }
        var written: Int64 = 0
        var journals: [TaskJournal] = []
        for handle in scheduler.running {
            guard let task = byHandle[handle], let progress = task.progress else { continue }
            let snapshot = progress.snapshot
            written += max(0, snapshot.bytes - task.lastSampledBytes)
            if snapshot.bytes != task.lastSampledBytes { save(.update(taskRecord(task, state: state(of: task)))) }
            task.lastSampledBytes = snapshot.bytes
            if let journal = task.journal, journal.isDirty { journals.append(journal) }
            task.speed.sample(bytes: snapshot.bytes, at: now, epoch: snapshot.epoch)
            guard emitProgress else { continue }
            // A running child's bytes and speed change its group's tally (a few per tick: the
            // running ones, never every sibling).
            markGroupChild(task)
            guard snapshot.bytes != task.lastReportedBytes, hub.hasSubscribers else { continue }
            task.lastReportedBytes = snapshot.bytes
            hub.emit(.taskProgress(info(task)))
        }
        emitGroupChanges()
        if !journals.isEmpty {
            let dirty = journals
            executor.submit { for journal in dirty { journal.commit() } }
        }
        bytesSinceDiskCheck += written
        if let lastFreeBytes, let policy = configuration.diskSpace, bytesSinceDiskCheck * 2 >= lastFreeBytes - policy.stopBytes {
            // Writing fast towards the limit: look again now, not at the next interval.
            await checkDiskSpaceNow()
        }
        await writeUnsaved()
        if scheduler.running.isEmpty, unsaved.isEmpty, dirtyGroups.isEmpty {
            ticker = nil
            return false
        }
        return true
    }

    private func save(_ change: StoreChange) {
        let id = change.taskID
        if case .update = change, let index = lastUnsaved[id], let merged = unsaved[index].merged(with: change) {
            unsaved[index] = merged
        } else {
            lastUnsaved[id] = unsaved.count
            unsaved.append(change)
        }
        ensureTicker()
    }

    /// Writes every change not in the store yet, in one batch, after the batches before it;
    /// returns when it is written. A write is never cancelled half-way (whoever waits for it
    /// may be): batches are chained in a task of their own.
    private func writeUnsaved() async {
        if !unsaved.isEmpty {
            let batch = unsaved
            unsaved.removeAll(keepingCapacity: true)
            lastUnsaved.removeAll(keepingCapacity: true)
            let previous = lastStoreWrite, store = self.store, hub = self.hub, logger = configuration.logger
            lastStoreWrite = Task {
                await previous?.value
                do {
                    try await store.apply(batch)
                } catch {
                    let failure = error as? DownloadError ?? DownloadError(.storeFailure, "\(error)")
                    logger.error("store write failed: \(failure)")
                    hub.emit(notice: DownloadNotice(kind: .storeFailure, message: "the store could not be written: \(failure.message)"))
                }
            }
        }
        await lastStoreWrite?.value
    }

    // MARK: - Environment

    private func startOnce() {
        guard !started else { return }
        started = true
        let inbox = self.inbox
        inboxDrain = Task { [weak self] in
            while let tickets = await inbox.take() {
                guard let self else { return }
                await self.drain(tickets)
            }
        }
        if let policy = configuration.diskSpace {
            let interval = policy.checkInterval
            own { [weak self] in
                // The manager is held only while it checks, not through the sleep: one let go
                // without shutdown() is freed (see deinit).
                while !Task.isCancelled {
                    guard await self?.checkDiskSpaceNow() != nil else { return }
                    try? await Task.sleep(for: interval)
                }
            }
        }
        if let monitor = configuration.networkMonitor {
            let updates = monitor.statusUpdates()
            own { [weak self] in
                for await status in updates {
                    guard let self else { return }
                    await self.networkChanged(status)
                }
            }
        }
    }

    /// Checks free space now: warns when low, interrupts running tasks when critical, resumes
    /// the ones it interrupted when space is back above the warning threshold.
    public func checkDiskSpace() async {
        await checkDiskSpaceNow()
    }

    private func checkDiskSpaceNow() async {
        guard let diskGate else { return }
        diskCheckNumber += 1
        let number = diskCheckNumber
        let previous = scheduler.disk
        let (level, free) = await executor.run { diskGate.level(after: previous) }
        // A check started meanwhile measured later: this reading is stale (applied, a reading
        // of a full disk taken before the space came back would stop the resumed tasks again).
        guard number == diskCheckNumber else { return }
        lastFreeBytes = free
        bytesSinceDiskCheck = 0
        diskGate.noteLevel(level)
        guard level != scheduler.disk else { return }
        if level != .critical { diskGate.clearFull() }
        let freeText = free.map { "\($0 / 1_000_000) MB free" } ?? "free space unknown"
        apply(scheduler.handle(.diskLevel(level, free: freeText)))
    }

    private func networkChanged(_ status: NetworkStatus) {
        apply(scheduler.handle(.network(status)))
    }

    private func networkWaitExpired(_ handle: TaskHandle, wait: Int, after limit: Duration) {
        guard !isShutDown, let task = byHandle[handle], scheduler.entry(handle)?.networkWaits == wait, state(of: task) == .interrupted(.network)
        else { return }
        let last = task.lastError ?? DownloadError(.networkUnreachable, "the host could not be reached")
        var error = last
        error.message = "\(last.message) (gave up after waiting \(limit) for the host)"
        task.lastError = error
        hub.emit(.taskError(task.id, error, willRetry: false))
        apply(scheduler.handle(.networkWaitExpired(handle, wait: wait)))
    }

    /// While tasks wait for the network, probes their hosts with backoff (a monitor may not
    /// see a server's own network coming back); a host that answers anything resumes its tasks.
    private func startProber() {
        guard prober == nil, !isShutDown else { return }
        let backoff = configuration.networkProbeBackoff
        prober = Task { [weak self] in
            var delay = backoff.initial
            while !Task.isCancelled {
                try? await Task.sleep(for: delay)
                guard let self, let hosts = await self.hostsToProbe() else { return }
                var reached = false
                for host in hosts where await self.probe(host) {
                    await self.hostReachable(host)
                    reached = true
                }
                delay = reached ? backoff.initial : min(delay * 2, backoff.maximum)
            }
        }
    }

    /// The hosts to probe; `nil` ends the prober (no task waits any more).
    private func hostsToProbe() -> [String]? {
        guard scheduler.anyWaitsForNetwork, !isShutDown else {
            prober = nil
            return nil
        }
        return scheduler.network.isOnline ? scheduler.hostsToProbe : []
    }

    private nonisolated func probe(_ host: String) async -> Bool {
        guard let url = URL(string: "http://\(host)/") else { return false }
        let request = TransferRequest(url: url, method: .head, destination: .discard, timeout: .seconds(10))
        do {
            _ = try await engine.transfer(request)
            return true
        } catch let error as DownloadError {
            // Any answer, even an error status, means the host is reachable again.
            return !error.isConnectivity && error.code != .timeout
        } catch {
            return false
        }
    }

    private func hostReachable(_ host: String) {
        apply(scheduler.handle(.hostReachable(host)))
    }

    /// Runs `body` as a task the manager owns (``shutdown()`` cancels and awaits it).
    @discardableResult
    private func own(_ body: @escaping @Sendable () async -> Void) -> Task<Void, Never> {
        let key = UUID()
        let task = Task { [weak self] in
            await body()
            await self?.disown(key)
        }
        owned[key] = task
        return task
    }

    private func finishDeletion(_ id: DownloadTaskID) {
        deletions[id] = nil
    }

    private func disown(_ key: UUID) {
        owned[key] = nil
    }

    // MARK: - Restore

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
            let task = ManagedTask(
                entity: entity, mode: item.task.mode, sequence: item.task.sequence, handle: newHandle(), addedAt: item.task.addedAt)
            task.resolveCount = item.task.resolveCount
            task.lastError = item.task.lastError.map(DownloadError.init(stored:))
            task.manifestRevision = item.task.manifestRevision
            if let manifest = item.task.manifest { task.setManifest(manifest, layout: layout) }
            task.summary.bytes = item.task.bytesDone
            task.summary.doneSegments = item.task.segmentsDone
            task.knownTotal = item.task.bytesTotal
            var state = item.task.state
            switch state {
            case .waiting, .resolving, .downloading, .interrupted:
                // Queued again below (not ahead of the others), or left paused for a command.
                if resuming { resumable.append(task) }
                state = .paused
            case .removed:
                state = .paused
            case .completed:
                task.completed = true
            case .idle, .paused, .failed, .invalid:
                break
            }
            nextSequence = max(nextSequence, task.sequence)
            tasks[id] = task
            byHandle[task.handle] = task
            addedOrder.append(task)
            joinGroup(task)
            if let manifest = task.manifest { claim(manifest, for: task) }
            apply(scheduler.handle(.restored(task.handle, sequence: task.sequence, weight: item.task.weight, state: state)))
            if hub.hasSubscribers { hub.emit(.taskAdded(info(task))) }
            // A merge the last process did not finish.
            if state == .completed, task.manifest?.mergeIsPending == true { merger?.consider(info(task), manager: self) }
        }
        addedOrder.sort { $0.sequence < $1.sequence }
        let epoch = scheduler.beginCommand()
        for task in resumable { apply(scheduler.handle(.startIfUntouched(task.handle, since: epoch))) }
        apply(scheduler.handle(.schedule))
        return RestoreReport(restored: liveTasks.map { info($0) }, skipped: skipped)
    }
}

// MARK: - Internal types

/// A task as the manager holds it; touched only on the manager's actor. Its state is the
/// scheduler's; its bytes are its run's ``TaskProgress``.
final class ManagedTask {
    let entity: DownloadBaseEntity
    let id: DownloadTaskID
    /// What the scheduler and the runs name the task by.
    let handle: TaskHandle
    let sequence: Int
    let addedAt: Date
    var mode: DownloadTaskMode
    var resolveCount = 0
    var lastError: DownloadError?
    private(set) var manifest: DownloadManifest?
    /// Increases with every manifest; restored from the store so revisions never repeat.
    var manifestRevision = 0
    /// The progress of the current (or last) run.
    var progress: TaskProgress?
    /// What the store had, before any run.
    var summary = TaskProgress.Snapshot(bytes: 0, doneSegments: 0, segmentCount: 0, knownBytes: 0, unknownSizes: 0)
    var completed = false
    /// The last exact total seen for this manifest (see `amounts(_:state:)`).
    var knownTotal: Int64?
    var speed = SpeedMeter()
    var lastReportedBytes: Int64 = -1
    var lastSampledBytes: Int64 = 0
    var run: RunHandle?
    var isRemoved = false
    private var outputs: [(name: String, path: String, expectedSize: Int64?, media: MediaInfo?)] = []

    init(entity: DownloadBaseEntity, mode: DownloadTaskMode, sequence: Int, handle: TaskHandle, addedAt: Date = Date()) {
        self.entity = entity
        self.id = entity.taskID
        self.handle = handle
        self.mode = mode
        self.sequence = sequence
        self.addedAt = addedAt
    }

    var groupKey: String? { entity.aggregationKey }

    /// The one file the outputs were merged into (``DownloadTaskManager/recordReplacement(of:by:size:)``).
    var replacement: (path: String, size: Int64)? {
        guard let metadata = manifest?.metadata, let path = metadata[DownloadManifest.replacedByKey],
            let size = metadata[DownloadManifest.replacedBySizeKey].flatMap(Int64.init)
        else { return nil }
        return (path, size)
    }

    /// The journal of the current run, once its outputs are prepared.
    var journal: TaskJournal? { run?.shared.journal }

    /// Keeps a manifest and what snapshots need of it.
    func setManifest(_ manifest: DownloadManifest, layout: FileLayout) {
        if self.manifest != manifest { manifestRevision += 1 }
        if let previous = self.manifest, !previous.hasSameSegments(as: manifest) { knownTotal = nil }
        self.manifest = manifest
        outputs = manifest.outputs.filter { mode == .cacheOnly || $0.isSelected }.map { output in
            (output.name, layout.outputPath(entity: entity, output: output), output.knownSize, output.media)
        }
        if let replacement {
            outputs = [((replacement.path as NSString).lastPathComponent, replacement.path, replacement.size, nil)]
        }
        var segments = 0, unknown = 0
        var known: Int64 = 0
        for output in manifest.outputs where mode == .cacheOnly || output.isSelected {
            segments += output.segments.count
            let sizes = output.segments.sizeSummary
            known = known.saturatingAdding(sizes.knownBytes)
            unknown += sizes.unknownCount
        }
        summary.segmentCount = segments
        summary.knownBytes = known
        summary.unknownSizes = unknown
    }

    func outputInfos(complete: Bool) -> [DownloadTaskInfo.OutputInfo] {
        outputs.map { DownloadTaskInfo.OutputInfo(name: $0.name, path: $0.path, expectedSize: $0.expectedSize, isComplete: complete, media: $0.media) }
    }
}

/// A running task's run, as the manager reaches it.
struct RunHandle {
    let ticket: RunTicket
    let mailbox: RunMailbox
    let shared: RunShared
    let events: EventQueue<RunEvent>
    let task: Task<Void, Never>
}

/// Where a run starts.
struct RunStart: Sendable {
    var manifest: DownloadManifest?
    var resolveCount: Int
    /// Whether the task never had a manifest (so no journal and no partial files to look for).
    var isFresh: Bool
    /// Whether files of a removed task with the same identity are still being deleted.
    var waitsForDeletion: Bool
}

struct GroupEntry {
    var group: DownloadTaskGroup
    var children: Set<DownloadTaskID> = []
    /// The roll-up's inputs, kept child by child, and each child's part as last counted.
    var tally = DownloadGroupTally()
    var counted: [DownloadTaskID: DownloadGroupTally.Entry] = [:]
}

extension DownloadManifest {
    /// Whether progress recorded against `self` still describes `other`: the same outputs with
    /// the same segments (sizes, ranges, checksums); URLs may differ (fresh signatures).
    func hasSameSegments(as other: DownloadManifest) -> Bool {
        guard outputs.count == other.outputs.count else { return false }
        for (mine, theirs) in zip(outputs, other.outputs) {
            // Header fields count: an If-Match names the version the pieces belong to.
            guard mine.name == theirs.name, mine.assembly == theirs.assembly, mine.segments.hasSameLayout(as: theirs.segments)
            else { return false }
        }
        return true
    }
}

extension DownloadManifest {
    /// Metadata keys of a completed task whose outputs were merged into one file.
    static let replacedByKey = "tessera.replacedBy"
    static let replacedBySizeKey = "tessera.replacedBySize"

    /// The manifest without a record of its outputs' replacement.
    var withoutReplacement: DownloadManifest {
        var manifest = self
        manifest.metadata[Self.replacedByKey] = nil
        manifest.metadata[Self.replacedBySizeKey] = nil
        return manifest
    }
}
