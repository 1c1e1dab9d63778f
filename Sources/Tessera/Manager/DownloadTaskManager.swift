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
    nonisolated let services: RunServices
    /// Runs whose mailboxes have something: taken in batches (one hop to the actor per batch).
    nonisolated let inbox = EventQueue<RunTicket>()
    /// Merges completed tasks' files (``Configuration/merging``).
    nonisolated let merger: TaskMerger?

    var scheduler: Scheduler
    var tasks: [DownloadTaskID: ManagedTask] = [:]
    /// The same tasks by handle: what the scheduler and the runs name them by.
    var byHandle = HandleTable<ManagedTask>()
    var nextHandle = 0
    /// Every task, in the order it was added (removed ones are skipped lazily).
    var addedOrder: [ManagedTask] = []
    var groups = TaskGroups()
    /// The metadata of completed tasks' compact manifests, shared where equal.
    var metadataInterning = MetadataInterning()
    var nextSequence = 0
    /// Output paths, by the task that owns them (runs claim the names responses give themselves).
    nonisolated let claims = OutputClaims()
    /// What the store has not been told yet (written once per tick, or as soon as
    /// ``storeBatchSize`` changes wait).
    var unsaved = PendingStoreChanges()
    /// The changes that make a store batch without waiting for the tick.
    static let storeBatchSize = 512
    /// The changes that make a store batch without waiting for the tick once fewer tasks than
    /// this wait to be launched (``writesEarly(unsaved:queued:)``).
    static let storeTailBatchSize = 64
    var started = false
    var isShutDown = false
    /// Tasks the manager owns besides runs: the inbox, the ticker, watchers, probes, timers, deletions.
    var owned: [UUID: Task<Void, Never>] = [:]
    var ticker: Task<Void, Never>?
    /// Applies what runs post, in order; at shutdown it ends after the last run's last word.
    var inboxDrain: Task<Void, Never>?
    var prober: Task<Void, Never>?
    var lastStoreWrite: Task<Void, Never>?
    /// Partial files of completed tasks' outputs (their names in the work directory), removed
    /// once the store has their completion (``releaseFinishedParts(of:)``).
    var finishedParts: [String] = []
    /// The tasks (their ``FileLayout/fileName(for:)``) whose partial files ``restore(resuming:)``
    /// found as second names of finished outputs in the work directory: only a fresh task among
    /// them looks for one (`TaskRun.finishedBefore`). `nil` when no start looked (every fresh task
    /// looks), as under a fence, whose work directory other processes write too.
    var linkedPartsAtStart: Set<String>?
    /// Pending deletions of removed tasks' files, by task.
    var deletions: [DownloadTaskID: Task<Void, Never>] = [:]
    var bytesSinceDiskCheck: Int64 = 0
    /// Numbers the free-space checks: one that another started after has a newer reading, and
    /// an older reading must not undo it (the actor runs other work while a check measures).
    var diskCheckNumber = 0
    var lastFreeBytes: Int64?
    /// When progress was last told (``Configuration/progressInterval``).
    var lastProgressEmit = ContinuousClock.now

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
        if let limit = configuration.unlistedHostLimit { _ = scheduler.handle(.unlistedHostLimit(limit)) }
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
        var next = 0
        while next < entities.count {
            // New tasks are added in one go: what they wake (subscribers, runs) wakes once, after.
            let added = WakeBatch.deferring { () -> [Result<DownloadTaskInfo, DownloadError>] in
                var added: [Result<DownloadTaskInfo, DownloadError>] = []
                while next < entities.count {
                    let entity = entities[next]
                    let id = entity.taskID
                    guard cacheOnly || tasks[id] == nil else { break }
                    next += 1
                    added.append(Result { () throws(DownloadError) in
                        try add(entity, id: id, mode: cacheOnly ? .cacheOnly : .download, start: true)
                    })
                }
                return added
            }
            results += added
            guard next < entities.count else { break }
            // (Only a known, completed task is looked at on disk.)
            let entity = entities[next]
            next += 1
            let redo = await outputsAreMissing(entity.taskID)
            results.append(Result { () throws(DownloadError) in try add(entity, mode: .download, start: true, redo: redo) })
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
    func outputsAreMissing(_ id: DownloadTaskID) async -> Bool {
        guard let task = tasks[id], task.mode == .download, state(of: task) == .completed else { return false }
        if let replacement = task.replacement {
            // Merged into one file: the task is done while that file is there.
            let size = await executor.run { FileOperations.size(replacement.path) }
            if size == replacement.size { return false }
            guard let task = tasks[id], state(of: task) == .completed, let manifest = task.manifest else { return false }
            task.setManifest(manifest.withoutReplacement, layout: layout)
            saveRecord(task)
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
        saveRecord(task)
        await writeUnsaved()
    }

    /// Marks a completed task's merge as started (or not any more), in the store when this
    /// returns (with the completion, which may have marked it already): a merge cut by a
    /// shutdown or a kill runs again at the next ``restore(resuming:)``, or on the fleet's next
    /// holder of the task.
    func setMergePending(_ id: DownloadTaskID, _ pending: Bool) async {
        guard let task = tasks[id], var manifest = task.manifest, state(of: task) == .completed else { return }
        if manifest.mergeIsPending != pending {
            manifest.mergeIsPending = pending
            task.setManifest(manifest, layout: layout)
            saveRecord(task)
        }
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
        let runner = task.run?.execution
        merger?.cancel(id)
        command(.remove(task.handle))
        let snapshot = info(task, state: .removed)
        tasks[id] = nil
        byHandle[task.handle] = nil
        task.isRemoved = true
        // (Also the names its run claimed that the manifest does not show yet.)
        claims.releaseAll(of: task.handle)
        leaveGroup(task)
        save(.remove(id), of: task.handle)
        hub.emit(.taskRemoved(id))
        // Files go once the run has let go of them, off the actor (a task added again with the
        // same identity waits for this).
        let layout = self.layout, executor = self.executor, entity = task.entity, manifest = task.manifest
        // (Under a fence, only while the same holding lasts: a task taken again since is not touched.)
        let holding = layout.fence?.journalEpoch(of: id)
        deletions[id] = own { [weak self, outputs = manifest?.outputs ?? []] in
            await runner?.wait()
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
        // Subscribed before looking, so no change falls between the look and the stream; told
        // only of the changes that settle a task (and removals).
        let events = hub.subscribe(Self.settlingChanges)
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

    static func isSettled(_ state: DownloadTaskState) -> Bool {
        settles(state.kind)
    }

    /// Whether a task in a state of `kind` has settled (see ``isSettled(_:)``).
    static func settles(_ kind: DownloadTaskState.Kind) -> Bool {
        kind.isFinal || kind == .paused
    }

    /// The events ``wait(for:)`` needs: the changes into the states ``isSettled(_:)`` names.
    static let settlingChanges = DownloadEventFilter(
        states: Set(DownloadTaskState.Kind.allCases.filter(settles)), additions: false, progress: false)

    /// Snapshots of every task, in the order they were added.
    public func checkAll() -> [DownloadTaskInfo] {
        liveTasks.map { info($0) }
    }

    /// Snapshots of the tasks `ids`, in that order, leaving out unknown and removed ones (one call
    /// for a list, without building every other task's).
    public func check(_ ids: [DownloadTaskID]) -> [DownloadTaskInfo] {
        ids.compactMap { tasks[$0].map { info($0) } }
    }

    /// The states of the tasks with `ids` that the manager has, in their order: what a caller
    /// that follows thousands of tasks needs to know when they are done, without a snapshot of
    /// each (``check(_:)``).
    package func states(_ ids: [DownloadTaskID]) -> [(id: DownloadTaskID, state: DownloadTaskState)] {
        ids.compactMap { id in tasks[id].map { (id, state(of: $0)) } }
    }

    /// A snapshot of one group.
    public func checkGroup(_ key: String) -> DownloadGroupInfo? {
        groupInfo(key)
    }

    /// Snapshots of every group, by key.
    public func checkAllGroups() -> [DownloadGroupInfo] {
        groups.keys.compactMap(groupInfo)
    }

    /// Queues every task that is paused, failed, invalid or idle.
    ///
    /// Thousands of tasks are queued in chunks, letting the first ones start meanwhile; a task
    /// that a later operation touches in between is left as that operation left it.
    @discardableResult
    public func startAll() async -> [DownloadTaskInfo] {
        let epoch = scheduler.beginCommand()
        var started: [DownloadTaskInfo] = []
        // The first tasks launch at once (after 1, 2, 4 … queued), then every 64, with a turn
        // for the runs in between: the first transfer does not wait for a long list.
        var batches = GrowingBatches(largest: 64)
        for task in liveTasks {
            // (The scheduler starts only a paused, failed, invalid or idle task nothing touched since.)
            let before = state(of: task)
            apply(scheduler.handle(.startIfUntouched(task.handle, since: epoch)))
            guard state(of: task) != before else { continue }
            task.lastError = nil
            started.append(info(task))
            if batches.add() {
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

    /// Every event from now on that `filter` includes (by default all), in order. Each call
    /// returns a new stream; it ends when the subscriber stops iterating, or at ``shutdown()``. A
    /// condition that holds tasks back now (a full disk, no network) is told first, as a notice.
    /// What no subscriber is told of is not made (see ``DownloadEventFilter``).
    public nonisolated func events(_ filter: DownloadEventFilter = .all) -> DownloadEventStream {
        hub.subscribe(filter)
    }

    /// Returns when every change made so far is in the store, running tasks' progress included.
    public func flushStore() async {
        for handle in scheduler.running {
            guard let task = byHandle[handle], task.progress != nil else { continue }
            saveRecord(task)
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
        let runs = tasks.values.compactMap { $0.run?.execution }
        // (Nothing posted to a run counts any more: a transfer that ends now does not finish its
        // output behind the run's back, see `TaskRun.finishEarly`.)
        for task in tasks.values { task.run?.stop() }
        for run in runs { await run.wait() }
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
        // (Nothing writes under the root any more: an empty work directory goes.)
        layout.removeWorkDirectoryIfEmpty()
        // A group's last change is told before the streams end, not lost with the next tick.
        emitGroupChanges()
        hub.finish()
    }

    /// Segment slots held now, and the most ever held at once (for tests and monitoring).
    var segmentSlots: (inUse: Int, peak: Int) { (scheduler.segmentsInUse, scheduler.peakSegmentsInUse) }

    // MARK: - Adding

    /// Adds (or starts again) `entity`'s task; `id` is its ``DownloadBaseEntity/taskID`` when the
    /// caller has it already.
    func add(
        _ entity: DownloadBaseEntity, id knownID: DownloadTaskID? = nil, mode: DownloadTaskMode, start: Bool, redo: Bool = false
    ) throws(DownloadError) -> DownloadTaskInfo {
        guard !isShutDown else { throw DownloadError(.invalidState, "the manager has been shut down") }
        startOnce()
        guard entity is any DownloadParserProtocol else {
            throw DownloadError(.invalidRequest, "\(type(of: entity).entityType) entities have no parser (conform to DownloadParserProtocol)")
        }
        if !entity.destinationDirectory.isEmpty { _ = try SafePath.relative(entity.destinationDirectory) }
        if mode == .cacheOnly, cache == nil {
            throw DownloadError(.invalidState, "startCache needs a segment cache, and this manager has none")
        }
        let id = knownID ?? entity.taskID
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
        let task = ManagedTask(entity: entity, id: id, mode: mode, sequence: nextSequence, handle: newHandle())
        tasks[id] = task
        byHandle[task.handle] = task
        addedOrder.append(task)
        joinGroup(task)
        save(.insert(StoredTask(entity: record, task: taskRecord(task, state: .idle))), of: task.handle)
        if hub.tellsAdditions { hub.emit(.taskAdded(info(task, state: .idle))) }
        // A new task queues behind the others (a known one started again jumps ahead).
        apply(scheduler.handle(.added(task.handle, sequence: task.sequence, start: start)))
        return info(task)
    }

    // MARK: - Applying the scheduler's actions

    func newHandle() -> TaskHandle {
        nextHandle += 1
        return TaskHandle(nextHandle)
    }

    func command(_ event: Scheduler.Event) {
        _ = scheduler.beginCommand()
        apply(scheduler.handle(event))
    }

    func apply(_ actions: [Scheduler.Action]) {
        for action in actions {
            switch action {
            case .launch(let handle, let generation):
                launch(handle, generation: generation)
            case .cancel(let handle):
                byHandle[handle]?.run?.stop()
            case .share(let handle, let generation, let limit):
                if let run = byHandle[handle]?.run, run.ticket.generation == generation { run.events.post(.share(limit)) }
            case .grant(let handle, let generation, let host, let count):
                if let run = byHandle[handle]?.run, run.ticket.generation == generation {
                    if let direct = run.direct {
                        // A run without a task starts its transfer on its first slot.
                        byHandle[handle]?.run?.direct = nil
                        direct.startDirectly(host: host)
                        if count > 1 { run.events.post(.granted(host: host, count: count - 1)) }
                    } else {
                        run.events.post(.granted(host: host, count: count))
                    }
                }
            case .changed(let handle, let from, let to):
                guard let task = byHandle[handle] else { continue }
                // (Only a task of several files can have something to merge.)
                let merges = to == .completed && merger != nil && (task.manifest?.outputs.count ?? 0) > 1
                // A merge to come is pending in the very record that says the task completed: a
                // kill before the merge starts leaves it pending, and a fleet keeps the task
                // leased until the merge has ended (see `TaskMerger`).
                if merges, let merger, var manifest = task.manifest, !manifest.mergeIsPending,
                    merger.policy.plan(for: info(task, state: to)) != nil
                {
                    manifest.mergeIsPending = true
                    task.setManifest(manifest, layout: layout)
                }
                if to != .removed, !recordsLater(task, from: from, to: to) { saveRecord(task) }
                if !to.isRunning { task.speed.reset() }
                let told = hub.tellsChanges(into: to.kind)
                if told || merges {
                    let snapshot = info(task, state: to)
                    if told { hub.emit(.taskStateChanged(snapshot, previous: from)) }
                    if merges { merger?.consider(snapshot, manager: self) }
                }
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

    func launch(_ handle: TaskHandle, generation: Int) {
        // After the shutdown a task the scheduler launches stays as the store has it (waiting or
        // resolving: resumed next time).
        guard let task = byHandle[handle], !isShutDown else { return }
        let id = task.id
        let ticket = RunTicket(handle: handle, generation: generation)
        let inbox = self.inbox
        let mailbox = RunMailbox(ticket: ticket) { inbox.post($0) }
        let events = EventQueue<RunEvent>()
        let progress = TaskProgress(startingAt: task.progress?.snapshot ?? task.summary)
        var start = RunStart(
            manifest: task.manifest, resolveCount: task.resolveCount, isFresh: task.manifest == nil,
            waitsForDeletion: deletions[id] != nil)
        if start.isFresh, let linked = linkedPartsAtStart {
            start.mayHaveFinishedBefore = !linked.isEmpty && linked.contains(FileLayout.fileName(for: id))
        }
        // A plain URL is resolved and named here: its run starts downloading without a round
        // trip through the manager. A fresh plain file starts without a task (at its first grant,
        // see `TaskRun.startDirectly`) and is recorded with what comes of it (`recordsLater`);
        // another is recorded now, and names of its own reach the store before any byte reaches
        // their files.
        let previous = task.run?.execution
        var direct = false
        if !start.waitsForDeletion, let manifest = immediateManifest(of: task) {
            CrashPoint.resolved.reach()
            let (named, _) = keep(manifest, of: task, resolved: true, recording: false)
            start.announced = named
            let namesOwnOutputs = Self.namesOwnOutputs(named, mode: task.mode)
            direct = previous == nil && !namesOwnOutputs && TaskRun.startsDirectly(
                named, mode: task.mode, rateLimited: services.engine.globalRateLimit != nil, fenced: layout.fence != nil)
            if !direct { saveRecord(task) }
            if namesOwnOutputs {
                startStoreWrite()
                start.namesStored = lastStoreWrite
            }
        }
        let execution = RunExecution(engine: services.engine)
        let run = TaskRun(
            ticket: ticket, id: id, manager: self, start: start, entity: task.entity, mode: task.mode, progress: progress,
            mailbox: mailbox,
            services: services,
            events: events, baseSeed: TaskRun.baseSeed(for: id, configured: configuration.randomSeed), execution: execution)
        task.progress = progress
        task.run = RunHandle(ticket: ticket, mailbox: mailbox, shared: run.shared, events: events, execution: execution, direct: direct ? run : nil)
        if !direct {
            execution.continueInTask {
                // A stopped run may still be letting go of its files: it finishes first.
                await previous?.wait()
                await run.run()
            }
        }
        if let named = start.announced {
            // (Its first slots wait in its events until it takes them.)
            announce(ticket, demand: TaskRun.demand(of: named, mode: task.mode, shared: run.shared), cap: run.initialCap(named))
        }
        ensureTicker()
    }
}
