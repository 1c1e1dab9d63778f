import Foundation
import Logging

/// Runs download tasks: one per entity, queued by weight, at most
/// ``Configuration/maxConcurrentTasks`` at once and ``Configuration/maxConcurrentSegments``
/// segment transfers over all of them, retried, observable, rolled up into groups.
///
/// Feed it operations (ZZDownloader's design) with ``perform(_:)``, or call the typed methods:
///
/// ```swift
/// let manager = DownloadTaskManager(configuration: .init(downloadRoot: "/data"), engine: engine)
/// let events = manager.events()
/// let info = try await manager.start(PlayurlEntity(cid: 1001))
/// for await event in events { ... }
/// ```
///
/// Operations are applied in the order received; none of them waits for the network. Tasks
/// are identified by their entity's ``DownloadTaskID``: starting a known entity returns the
/// existing task (queued again, ahead of the others, when it was paused or had failed).
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
    nonisolated let limiter: AsyncSemaphore
    nonisolated let broker = SegmentBroker()
    nonisolated let writer: StoreWriter
    nonisolated let layout: FileLayout
    nonisolated let diskGate: DiskGate?

    private var tasks: [DownloadTaskID: ManagedTask] = [:]
    /// Every task, in the order it was added (removed ones are skipped lazily).
    private var addedOrder: [ManagedTask] = []
    private var groups: [String: GroupEntry] = [:]
    private var queue = PriorityQueue<QueueEntry>()
    private var running: Set<DownloadTaskID> = []
    private var nextSequence = 0
    private var topWeight = 0
    private var ticker: Task<Void, Never>?
    private var dirtyGroups: Set<String> = []
    /// Counts commands; a task remembers the last one that touched it, so a bulk command that
    /// yields part-way never overrides a later command.
    private var commandEpoch = 0
    /// Output paths, by the task that owns them.
    private var claims: [String: DownloadTaskID] = [:]
    private var diskLevel = DiskSpaceLevel.ample
    private var watchersStarted = false
    private var networkStatus = NetworkStatus.online
    private var prober: Task<Void, Never>?
    private var watchers: [Task<Void, Never>] = []

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
        limiter = AsyncSemaphore(limit: configuration.maxConcurrentSegments)
        layout = FileLayout(root: configuration.downloadRoot)
        diskGate = configuration.diskSpace.map { policy in
            DiskGate(policy: policy, paths: [configuration.downloadRoot] + (cache.map { [$0.directory] } ?? []))
        }
        networkStatus = configuration.networkMonitor?.currentStatus ?? .online
        let hub = self.hub
        let logger = configuration.logger
        writer = StoreWriter(store: store, interval: configuration.storeInterval) { error in
            logger.error("store write failed: \(error)")
            hub.emit(.notice(DownloadNotice(kind: .diskSpaceCritical, message: "the store could not be written: \(error.message)")))
        }
    }

    // MARK: - Operations

    /// Applies one operation.
    @discardableResult
    public func perform(_ operation: DownloadOperation) async throws(DownloadError) -> DownloadOperationResult {
        commandEpoch += 1
        startWatchers()
        switch operation.command {
        case .add(let entity): return .task(try add(entity, mode: .download, start: false))
        case .start(let entity): return .task(try add(entity, mode: .download))
        case .startCache(let entity): return .task(try add(entity, mode: .cacheOnly))
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

    /// Adds the entity's task (or finds the known one) and queues it.
    @discardableResult
    public func start(_ entity: DownloadBaseEntity) throws(DownloadError) -> DownloadTaskInfo {
        try add(entity, mode: .download)
    }

    /// Adds the entity's task in cache-only mode: its segments are fetched into the segment
    /// cache and no output is written.
    @discardableResult
    public func startCache(_ entity: DownloadBaseEntity) throws(DownloadError) -> DownloadTaskInfo {
        try add(entity, mode: .cacheOnly)
    }

    /// Queues a known task again, ahead of the others.
    @discardableResult
    public func resume(_ id: DownloadTaskID) throws(DownloadError) -> DownloadTaskInfo {
        guard let task = tasks[id] else { throw DownloadError(.invalidState, "there is no task \(id)") }
        if [.paused, .failed, .invalid, .idle, .interrupted].contains(task.state.kind) {
            enqueue(task, jumpAhead: true)
            schedule()
        }
        return info(task)
    }

    /// Pauses a task; its finished segments and the bytes of its in-flight ones are kept.
    @discardableResult
    public func stop(_ id: DownloadTaskID) -> DownloadTaskInfo? {
        guard let task = tasks[id] else { return nil }
        if [.idle, .waiting, .resolving, .downloading, .interrupted].contains(task.state.kind) {
            halt(task)
            transition(task, to: .paused)
            schedule()
        }
        return info(task)
    }

    /// Removes a task and its partial files; with `deletingFiles`, its finished outputs too.
    @discardableResult
    public func remove(_ id: DownloadTaskID, deletingFiles: Bool = false) -> DownloadTaskInfo? {
        guard let task = tasks[id] else { return nil }
        halt(task)
        transition(task, to: .removed)
        let snapshot = info(task)
        tasks[id] = nil
        task.isRemoved = true
        releaseClaims(of: task)
        leaveGroup(task)
        writer.enqueue(.remove(id))
        hub.emit(.taskRemoved(id))
        // Delete once the runner has let go of the files.
        let runner = task.runner
        let layout = self.layout
        let entity = task.entity
        let manifest = task.manifest
        Task.detached {
            await runner?.value
            layout.removeWork(of: id)
            for output in manifest?.outputs ?? [] {
                let path = layout.outputPath(entity: entity, output: output)
                FileOperations.remove(FileLayout.partPath(path))
                if deletingFiles {
                    output.assembly == .separateFiles ? FileOperations.removeTree(path) : FileOperations.remove(path)
                }
            }
        }
        schedule()
        return snapshot
    }

    /// A snapshot of one task.
    public func check(_ id: DownloadTaskID) -> DownloadTaskInfo? {
        tasks[id].map(info)
    }

    /// Snapshots of every task, in the order they were added.
    public func checkAll() -> [DownloadTaskInfo] {
        liveTasks.map(info)
    }

    /// The tasks in the order they were added.
    private var liveTasks: [ManagedTask] {
        if addedOrder.count > tasks.count * 2 { addedOrder.removeAll(where: \.isRemoved) }
        return addedOrder.filter { !$0.isRemoved }
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
        commandEpoch += 1
        let epoch = commandEpoch
        let candidates = liveTasks.filter { [.paused, .failed, .invalid, .idle].contains($0.state.kind) }
        var started: [DownloadTaskInfo] = []
        for (index, task) in candidates.enumerated() {
            if index > 0, index % 256 == 0 {
                schedule()
                await Task.yield()
            }
            guard !task.isRemoved, task.touchedAt < epoch, [.paused, .failed, .invalid, .idle].contains(task.state.kind)
            else { continue }
            enqueue(task, jumpAhead: false)
            started.append(info(task))
        }
        schedule()
        return started
    }

    /// Pauses every task that is not finished.
    @discardableResult
    public func stopAll() -> [DownloadTaskInfo] {
        let candidates = liveTasks.filter { [.idle, .waiting, .resolving, .downloading, .interrupted].contains($0.state.kind) }
        for task in candidates {
            halt(task)
            transition(task, to: .paused)
        }
        return candidates.map(info)
    }

    /// Every event from now on, in order. Each call returns a new stream; it ends when the
    /// subscriber stops iterating.
    public nonisolated func events() -> AsyncStream<DownloadEvent> {
        hub.subscribe()
    }

    /// Returns when every store write made so far is done.
    public func flushStore() async {
        await writer.flush()
    }

    // MARK: - Adding and queueing

    private func add(_ entity: DownloadBaseEntity, mode: DownloadTaskMode, start: Bool = true) throws(DownloadError)
        -> DownloadTaskInfo
    {
        startWatchers()
        guard entity is any DownloadParserProtocol else {
            throw DownloadError(.invalidRequest, "\(type(of: entity).entityType) entities have no parser (conform to DownloadParserProtocol)")
        }
        if !entity.destinationDirectory.isEmpty { _ = try SafePath.relative(entity.destinationDirectory) }
        if mode == .cacheOnly, cache == nil {
            throw DownloadError(.invalidState, "startCache needs a segment cache, and this manager has none")
        }
        let id = entity.taskID
        if let task = tasks[id] {
            if !start || task.state.isRunning || task.state == .waiting { return info(task) }
            if task.state == .completed, task.mode == mode { return info(task) }
            if task.mode != mode {
                // Cached segments are in the cache, not in place (and the other way round).
                task.segments.removeAll()
                writer.enqueue(.resetSegments(id))
            }
            task.mode = mode
            enqueue(task, jumpAhead: true)
            schedule()
            return info(task)
        }
        let record: EntityRecord
        do {
            record = try entity.record()
        } catch {
            throw DownloadError(.invalidRequest, "the \(type(of: entity).entityType) entity \(entity.entityKey) cannot be stored: \(error)")
        }
        nextSequence += 1
        let task = ManagedTask(entity: entity, mode: mode, sequence: nextSequence)
        tasks[id] = task
        addedOrder.append(task)
        joinGroup(task)
        writer.enqueue(.insert(StoredTask(entity: record, task: task.record)))
        if hub.hasSubscribers { hub.emit(.taskAdded(info(task))) }
        guard start else { return info(task) }
        enqueue(task, jumpAhead: false)
        schedule()
        return info(task)
    }

    /// Moves a task to `waiting`; `jumpAhead` gives it the highest weight so far (a re-started
    /// task runs before the ones that never ran, as in ZZDownloader).
    private func enqueue(_ task: ManagedTask, jumpAhead: Bool) {
        task.touchedAt = commandEpoch
        if jumpAhead {
            topWeight += 1
            task.weight = topWeight
        }
        task.lastError = nil
        transition(task, to: .waiting)
        task.queueVersion += 1
        queue.push(QueueEntry(weight: task.weight, sequence: task.sequence, id: task.id, version: task.queueVersion))
    }

    /// Starts waiting tasks, heaviest first, while slots are free.
    private func schedule() {
        guard diskLevel != .critical else { return }
        while running.count < max(1, configuration.maxConcurrentTasks), let entry = queue.pop() {
            guard let task = tasks[entry.id], task.state == .waiting, task.queueVersion == entry.version else { continue }
            if networkStatus.isOnline, networkStatus.isMetered {
                let allowed = configuration.allowsMeteredNetwork
                hub.emit(.notice(DownloadNotice(
                    kind: .meteredNetwork,
                    message: allowed ? "\(task.id) started on a metered network (\(networkStatus))"
                        : "\(task.id) waits for an unmetered network (\(networkStatus))",
                    taskID: task.id)))
                if !allowed {
                    transition(task, to: .interrupted(.meteredNetwork))
                    continue
                }
            }
            launch(task)
        }
    }

    private func launch(_ task: ManagedTask) {
        transition(task, to: .resolving)
        running.insert(task.id)
        task.generation += 1
        let run = TaskRun(
            manager: self, id: task.id, generation: task.generation, entity: task.entity, mode: task.mode,
            counter: task.counter, engine: engine, limiter: limiter, broker: broker, cache: cache, diskGate: diskGate,
            layout: layout, configuration: configuration)
        let previous = task.runner
        task.runner = Task {
            // A stopped runner may still be recording its last checkpoints: let it finish first.
            await previous?.value
            await run.run()
        }
        startTicker()
    }

    /// Cancels a task's runner and gives its slot back.
    private func halt(_ task: ManagedTask) {
        task.touchedAt = commandEpoch
        task.generation += 1
        task.runner?.cancel()
        running.remove(task.id)
        task.speed.reset()
    }

    // MARK: - State and events

    private func transition(_ task: ManagedTask, to next: DownloadTaskState) {
        let previous: DownloadTaskState
        do {
            previous = try task.machine.transition(to: next)
        } catch {
            configuration.logger.error("refused transition", metadata: ["task": "\(task.id)", "error": "\(error)"])
            return
        }
        if next != .removed { writer.enqueue(.update(task.record)) }
        if hub.hasSubscribers {
            hub.emit(.taskStateChanged(info(task), previous: previous))
            if let key = task.groupKey { emitGroup(key) }
        }
    }

    private func emitGroup(_ key: String) {
        if let group = groupInfo(key) {
            hub.emit(.groupUpdated(group))
        } else {
            hub.emit(.groupRemoved(key: key))
        }
    }

    private func joinGroup(_ task: ManagedTask) {
        guard let key = task.groupKey else { return }
        if groups[key] == nil {
            groups[key] = GroupEntry(group: type(of: task.entity).groupType.init(key: key))
        }
        groups[key]?.children.insert(task.id)
    }

    private func leaveGroup(_ task: ManagedTask) {
        guard let key = task.groupKey, var entry = groups[key] else { return }
        entry.children.remove(task.id)
        groups[key] = entry.children.isEmpty ? nil : entry
        if hub.hasSubscribers { emitGroup(key) }
    }

    private func groupInfo(_ key: String) -> DownloadGroupInfo? {
        guard let entry = groups[key] else { return nil }
        let children = entry.children.compactMap { tasks[$0] }.sorted { $0.sequence < $1.sequence }.map(info)
        return DownloadGroupInfo(
            key: key, groupType: type(of: entry.group).groupType, title: entry.group.title(children: children),
            rollUp: entry.group.rollUp(children: children), children: children)
    }

    func info(_ task: ManagedTask) -> DownloadTaskInfo {
        let bytes = task.counter.bytes
        let total = task.totalBytes
        let remaining = total.map { $0 - bytes }
        let outputs = task.workingOutputs.map { index, output in
            DownloadTaskInfo.OutputInfo(
                name: output.name, path: layout.outputPath(entity: task.entity, output: output),
                expectedSize: output.knownSize, isComplete: task.completedOutputs.contains(index))
        }
        return DownloadTaskInfo(
            id: task.id, title: task.manifest?.title ?? task.entity.title, groupKey: task.groupKey, state: task.state,
            mode: task.mode, bytesDone: bytes, bytesTotal: total, bytesTotalIsEstimate: total != nil && task.unknownSizes > 0,
            segmentsDone: task.counter.doneSegments,
            segmentsTotal: task.segmentCount, bytesPerSecond: task.state.isRunning ? task.speed.bytesPerSecond : 0,
            eta: task.state.isRunning ? task.speed.eta(remaining: remaining) : nil, outputs: outputs,
            error: task.lastError, resolveCount: task.resolveCount, weight: task.weight)
    }

    // MARK: - Progress ticker

    private func startTicker() {
        guard ticker == nil else { return }
        let interval = configuration.progressInterval
        ticker = Task { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: interval)
                guard let self, await self.tick() else { return }
            }
        }
    }

    /// Samples speeds, emits progress, checkpoints in-flight segments. Returns whether to go on.
    private func tick() -> Bool {
        let now = ContinuousClock.now
        dirtyGroups.removeAll()
        for id in running {
            guard let task = tasks[id] else { continue }
            let bytes = task.counter.bytes
            task.speed.sample(bytes: bytes, at: now)
            for (key, checkpoint) in task.counter.inFlight where checkpoint.bytesWritten > 0 {
                writer.record(SegmentProgress(
                    taskID: id, outputIndex: key.output, segmentIndex: key.segment, isDone: false,
                    bytesWritten: checkpoint.bytesWritten, validator: checkpoint.validator))
            }
            guard bytes != task.lastReportedBytes, hub.hasSubscribers else { continue }
            task.lastReportedBytes = bytes
            hub.emit(.taskProgress(info(task)))
            if let key = task.groupKey { dirtyGroups.insert(key) }
        }
        for key in dirtyGroups { emitGroup(key) }
        if running.isEmpty {
            ticker = nil
            return false
        }
        return true
    }

    // MARK: - Runner callbacks

    /// What a runner starts from, or `nil` when the task moved on (stopped, removed).
    func runnerStart(_ id: DownloadTaskID, generation: Int) -> RunStart? {
        guard let task = tasks[id], task.generation == generation, task.state == .resolving else { return nil }
        return RunStart(manifest: task.manifest, resolveCount: task.resolveCount)
    }

    /// A runner is resolving again (stale URLs, expiry).
    func runnerReResolving(_ id: DownloadTaskID, generation: Int, because error: DownloadError) -> Bool {
        guard let task = tasks[id], task.generation == generation else { return false }
        task.lastError = error
        hub.emit(.taskError(id, error, willRetry: true))
        if task.state == .downloading { transition(task, to: .resolving) }
        return true
    }

    /// A runner has its manifest: keep it, match the stored progress to it and start
    /// downloading. Returns the segments still to fetch, or `nil` when the task moved on.
    func runnerBeginDownloading(
        _ id: DownloadTaskID, generation: Int, manifest: DownloadManifest, resolved: Bool
    ) -> RunPlan? {
        guard let task = tasks[id], task.generation == generation, task.state == .resolving else { return nil }
        if resolved { task.resolveCount += 1 }
        let manifest = resolved ? assignOutputNames(task, manifest) : manifest
        if let previous = task.manifest, !previous.hasSameSegments(as: manifest) {
            // The content is not the one the progress describes.
            task.segments.removeAll()
            writer.enqueue(.resetSegments(id))
        }
        task.manifest = manifest
        task.completedOutputs.removeAll()
        let plan = task.plan()
        task.counter.reset(doneBytes: plan.doneBytes, doneSegments: plan.doneSegments)
        task.lastReportedBytes = -1
        transition(task, to: .downloading)
        return plan
    }

    // MARK: - Output names

    /// Gives a new manifest's outputs places no other task's output and no existing file holds,
    /// by inserting `.1`, `.2`, … before the extension (as aria2c does); names given to the
    /// same outputs before are kept, so a re-resolve finds its progress again.
    private func assignOutputNames(_ task: ManagedTask, _ fresh: DownloadManifest) -> DownloadManifest {
        var manifest = fresh
        let previous = task.manifest
        releaseClaims(of: task)
        for index in manifest.outputs.indices {
            let original = manifest.outputs[index].name
            let key = "tessera.originalName.\(index)"
            if let previous, index < previous.outputs.count {
                let earlierOriginal = previous.metadata[key] ?? previous.outputs[index].name
                if earlierOriginal == original {
                    manifest.outputs[index].name = previous.outputs[index].name
                    if manifest.outputs[index].name != original { manifest.metadata[key] = original }
                    continue
                }
            }
            guard manifest.outputs[index].isSelected || task.mode == .cacheOnly else { continue }
            var candidate = original
            var number = 0
            while isTaken(candidate, output: manifest.outputs[index], by: task) {
                number += 1
                candidate = Self.numbered(original, number)
            }
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
        if let owner = claims[path], owner != task.id { return true }
        return FileOperations.exists(path) || FileOperations.exists(FileLayout.partPath(path))
    }

    /// `name.ext` → `name.1.ext` (in the last path component).
    static func numbered(_ name: String, _ number: Int) -> String {
        let slash = name.lastIndex(of: "/").map { name.index(after: $0) } ?? name.startIndex
        let file = name[slash...]
        if let dot = file.lastIndex(of: "."), dot != file.startIndex {
            return String(name[..<dot]) + ".\(number)" + String(name[dot...])
        }
        return name + ".\(number)"
    }

    private func claim(_ manifest: DownloadManifest, for task: ManagedTask) {
        for output in manifest.outputs where output.isSelected || task.mode == .cacheOnly {
            claims[layout.outputPath(entity: task.entity, output: output)] = task.id
        }
    }

    private func releaseClaims(of task: ManagedTask) {
        for output in task.manifest?.outputs ?? [] {
            let path = layout.outputPath(entity: task.entity, output: output)
            if claims[path] == task.id { claims[path] = nil }
        }
    }

    /// A segment is done (recorded even when the task was stopped meanwhile: the bytes are there).
    func runnerSegmentDone(_ progress: SegmentProgress) {
        guard let task = tasks[progress.taskID] else { return }
        task.segments[SegmentKey(output: progress.outputIndex, segment: progress.segmentIndex)] = progress
        writer.record(progress)
    }

    /// An interrupted segment's checkpoint.
    func runnerSegmentCheckpoint(_ progress: SegmentProgress) {
        guard let task = tasks[progress.taskID] else { return }
        let key = SegmentKey(output: progress.outputIndex, segment: progress.segmentIndex)
        if task.segments[key]?.isDone == true { return }
        task.segments[key] = progress
        writer.record(progress)
    }

    /// Forgets an output's progress (its checksum failed, its content changed); returns the new
    /// plan, or `nil` when the task moved on.
    func runnerResetOutput(_ id: DownloadTaskID, generation: Int, output: Int) -> RunPlan? {
        guard let task = tasks[id], task.generation == generation else { return nil }
        let keys = task.segments.keys.filter { $0.output == output }
        for key in keys {
            let reset = SegmentProgress(taskID: id, outputIndex: key.output, segmentIndex: key.segment, isDone: false, bytesWritten: 0)
            task.segments[key] = nil
            writer.record(reset)
        }
        let plan = task.plan()
        task.counter.reset(doneBytes: plan.doneBytes, doneSegments: plan.doneSegments)
        return plan
    }

    /// An output is assembled and verified.
    func runnerOutputCompleted(_ id: DownloadTaskID, output: Int) {
        tasks[id]?.completedOutputs.insert(output)
    }

    /// An error the runner will retry.
    func runnerError(_ id: DownloadTaskID, generation: Int, _ error: DownloadError) {
        guard let task = tasks[id], task.generation == generation else { return }
        task.lastError = error
        hub.emit(.taskError(id, error, willRetry: true))
    }

    /// The runner's end.
    func runnerFinished(_ id: DownloadTaskID, generation: Int, error: DownloadError?) {
        guard let task = tasks[id], task.generation == generation, task.state.isRunning else { return }
        running.remove(id)
        task.speed.reset()
        if let error, error.code == .diskFull {
            // Never a failure: wait for space (the write left no corrupt file behind).
            task.lastError = error
            hub.emit(.taskError(id, error, willRetry: true))
            transition(task, to: .interrupted(.diskSpace))
            if diskLevel != .critical {
                if error.systemErrno != nil { diskGate?.markFull() }
                enterCriticalDiskLevel(free: diskGate?.freeBytes(), message: error.message)
            }
            return
        }
        if let error {
            task.lastError = error
            hub.emit(.taskError(id, error, willRetry: false))
            transition(task, to: error.isPermanent ? .invalid : .failed)
        } else {
            task.lastReportedBytes = task.counter.bytes
            transition(task, to: .completed)
        }
        schedule()
    }

    /// Every mirror of a segment (or the manifest) was unreachable: wait for the network.
    func runnerLostNetwork(_ id: DownloadTaskID, generation: Int, _ error: DownloadError) {
        guard let task = tasks[id], task.generation == generation, task.state.isRunning else { return }
        running.remove(id)
        task.speed.reset()
        task.lastError = error
        task.probeURL = error.url.flatMap(URL.init(string:))
        hub.emit(.taskError(id, error, willRetry: true))
        transition(task, to: .interrupted(.network))
        task.networkWaits += 1
        if let limit = configuration.maxNetworkWait {
            let wait = task.networkWaits
            Task { [weak self] in
                try? await Task.sleep(for: limit)
                await self?.networkWaitExpired(id, wait: wait, after: limit)
            }
        }
        startProber()
        schedule()
    }

    /// ``Configuration/maxNetworkWait`` ran out: a task still waiting since then fails.
    private func networkWaitExpired(_ id: DownloadTaskID, wait: Int, after limit: Duration) {
        guard let task = tasks[id], task.networkWaits == wait, task.state == .interrupted(.network) else { return }
        let last = task.lastError ?? DownloadError(.networkUnreachable, "the host could not be reached")
        var error = last
        error.message = "\(last.message) (gave up after waiting \(limit) for the host)"
        task.lastError = error
        hub.emit(.taskError(id, error, willRetry: false))
        transition(task, to: .failed)
        schedule()
    }

    // MARK: - Disk space

    private func startWatchers() {
        guard !watchersStarted else { return }
        watchersStarted = true
        if let policy = configuration.diskSpace {
            let interval = policy.checkInterval
            watchers.append(Task { [weak self] in
                while !Task.isCancelled {
                    guard let self else { return }
                    await self.checkDiskSpace()
                    try? await Task.sleep(for: interval)
                }
            })
        }
        if let monitor = configuration.networkMonitor {
            let updates = monitor.statusUpdates()
            watchers.append(Task { [weak self] in
                for await status in updates {
                    guard let self else { return }
                    await self.networkChanged(status)
                }
            })
        }
    }

    /// Checks free space now: warns when low, interrupts running tasks when critical, resumes
    /// the ones it interrupted when space is back above the warning threshold.
    public func checkDiskSpace() {
        guard let diskGate else { return }
        let (level, free) = diskGate.level(after: diskLevel)
        guard level != diskLevel else { return }
        let previous = diskLevel
        let freeText = free.map { "\($0 / 1_000_000) MB free" } ?? "free space unknown"
        switch level {
        case .critical:
            enterCriticalDiskLevel(free: free, message: freeText)
        case .low:
            diskLevel = .low
            if previous == .critical { leaveCriticalDiskLevel(freeText) }
            hub.emit(.notice(DownloadNotice(kind: .diskSpaceLow, message: "disk space is low: \(freeText)")))
        case .ample:
            diskLevel = .ample
            if previous == .critical { leaveCriticalDiskLevel(freeText) }
        }
    }

    private func enterCriticalDiskLevel(free: Int64?, message: String) {
        diskLevel = .critical
        hub.emit(.notice(DownloadNotice(kind: .diskSpaceCritical, message: "downloads stop for lack of disk space: \(message)")))
        for id in running {
            guard let task = tasks[id] else { continue }
            halt(task)
            transition(task, to: .interrupted(.diskSpace))
        }
    }

    private func leaveCriticalDiskLevel(_ freeText: String) {
        diskGate?.clearFull()
        hub.emit(.notice(DownloadNotice(kind: .diskSpaceRecovered, message: "downloads resume: \(freeText)")))
        resumeInterrupted(.diskSpace)
    }

    /// Queues the tasks interrupted for `reason` (and only those).
    private func resumeInterrupted(_ reason: DownloadTaskState.InterruptionReason, host: String? = nil) {
        for task in liveTasks where task.state == .interrupted(reason) {
            if let host, task.probeURL?.host != host { continue }
            enqueue(task, jumpAhead: false)
        }
        schedule()
    }

    // MARK: - Network

    private func networkChanged(_ status: NetworkStatus) {
        let previous = networkStatus
        networkStatus = status
        if previous.isOnline, !status.isOnline {
            hub.emit(.notice(DownloadNotice(kind: .networkLost, message: "the network is gone; waiting for it")))
        } else if !previous.isOnline, status.isOnline {
            hub.emit(.notice(DownloadNotice(kind: .networkRestored, message: "the network is back (\(status))")))
        }
        if status.isOnline {
            resumeInterrupted(.network)
            if !status.isMetered || configuration.allowsMeteredNetwork { resumeInterrupted(.meteredNetwork) }
        }
    }

    /// While tasks wait for the network, probes their hosts with backoff (a monitor may not
    /// see a server's own network coming back); a host that answers anything resumes its tasks.
    private func startProber() {
        guard prober == nil else { return }
        let backoff = configuration.networkProbeBackoff
        prober = Task { [weak self] in
            var delay = backoff.initial
            while !Task.isCancelled {
                try? await Task.sleep(for: delay)
                guard let self, let targets = await self.probeTargets() else { return }
                var reached = false
                for url in targets where await self.probe(url) {
                    await self.hostReachable(url.host ?? "")
                    reached = true
                }
                delay = reached ? backoff.initial : min(delay * 2, backoff.maximum)
            }
        }
    }

    /// The URLs to probe; `nil` ends the prober (no task waits any more).
    private func probeTargets() -> [URL]? {
        let waiting = liveTasks.filter { $0.state == .interrupted(.network) }
        guard !waiting.isEmpty else {
            prober = nil
            return nil
        }
        // While the monitor says offline, there is nothing to probe.
        guard networkStatus.isOnline else { return [] }
        var seen = Set<String>()
        return waiting.compactMap(\.probeURL).filter { seen.insert("\($0.host ?? ""):\($0.port ?? 0)").inserted }
    }

    private nonisolated func probe(_ url: URL) async -> Bool {
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
        resumeInterrupted(.network, host: host)
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
    /// their partial files (or, with `resuming` false, wait paused for a command, as a command
    /// line that runs only what it is asked for wants); paused, completed, failed and invalid
    /// tasks stay so. Entities are rebuilt through the registry. Call it once, before other
    /// operations.
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
        startWatchers()
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
            let task = ManagedTask(entity: entity, mode: item.task.mode, sequence: item.task.sequence)
            task.weight = item.task.weight
            task.resolveCount = item.task.resolveCount
            task.lastError = item.task.lastError.map(DownloadError.init(stored:))
            task.manifest = item.task.manifest
            task.manifestRevision = item.task.manifestRevision
            for progress in item.segments {
                task.segments[SegmentKey(output: progress.outputIndex, segment: progress.segmentIndex)] = progress
            }
            if task.manifest != nil {
                let plan = task.plan()
                task.counter.reset(doneBytes: plan.doneBytes, doneSegments: plan.doneSegments)
            }
            switch item.task.state {
            case .waiting, .resolving, .downloading, .interrupted:
                if resuming {
                    resumable.append(task)
                } else {
                    task.machine = DownloadTaskStateMachine(.paused)
                }
            case .completed:
                task.machine = DownloadTaskStateMachine(.completed)
                task.completedOutputs = Set(task.workingOutputs.map(\.index))
            case .idle, .paused, .failed, .invalid, .removed:
                task.machine = DownloadTaskStateMachine(item.task.state == .removed ? .paused : item.task.state)
            }
            nextSequence = max(nextSequence, task.sequence)
            topWeight = max(topWeight, task.weight)
            tasks[id] = task
            addedOrder.append(task)
            joinGroup(task)
            if let manifest = task.manifest { claim(manifest, for: task) }
            if hub.hasSubscribers { hub.emit(.taskAdded(info(task))) }
        }
        addedOrder.sort { $0.sequence < $1.sequence }
        for task in resumable { enqueue(task, jumpAhead: false) }
        schedule()
        return RestoreReport(restored: liveTasks.map(info), skipped: skipped)
    }

}

// MARK: - Internal types

/// A task as the manager holds it; touched only on the manager's actor.
final class ManagedTask {
    let entity: DownloadBaseEntity
    let id: DownloadTaskID
    let sequence: Int
    let addedAt = Date()
    var machine = DownloadTaskStateMachine()
    var weight = 0
    var queueVersion = 0
    var generation = 0
    var resolveCount = 0
    var lastError: DownloadError?
    var manifest: DownloadManifest? {
        didSet {
            manifestRevision += 1
            summarize()
        }
    }
    /// Increases with every manifest; restored from the store so revisions never repeat.
    var manifestRevision = 0
    var segments: [SegmentKey: SegmentProgress] = [:]
    var completedOutputs: Set<Int> = []
    let counter = ProgressCounter()
    var speed = SpeedMeter()
    var lastReportedBytes: Int64 = -1
    var runner: Task<Void, Never>?
    var isRemoved = false
    /// For a task waiting for the network: a URL whose host the prober tries.
    var probeURL: URL?
    /// How many times the task went to `interrupted(network)`: tells a wait's deadline whether
    /// it is still the same wait.
    var networkWaits = 0
    /// The last command that changed the task (see `commandEpoch`).
    var touchedAt = 0

    init(entity: DownloadBaseEntity, mode: DownloadTaskMode, sequence: Int) {
        self.entity = entity
        self.id = entity.taskID
        self.mode = mode
        self.sequence = sequence
    }

    var mode: DownloadTaskMode { didSet { summarize() } }
    /// The outputs this task fetches: the selected ones, or all of them in cache-only mode.
    private(set) var workingOutputs: [(index: Int, output: DownloadOutput)] = []
    private(set) var segmentCount = 0
    private var knownBytes: Int64 = 0
    private(set) var unknownSizes = 0

    /// Recomputes what snapshots need from the manifest, once per manifest or mode change.
    private func summarize() {
        workingOutputs = (manifest?.outputs ?? []).enumerated().filter { mode == .cacheOnly || $0.element.isSelected }
            .map { ($0.offset, $0.element) }
        segmentCount = 0
        knownBytes = 0
        unknownSizes = 0
        for (_, output) in workingOutputs {
            segmentCount += output.segments.count
            for segment in output.segments {
                if let size = segment.knownSize { knownBytes += size } else { unknownSizes += 1 }
            }
        }
    }

    var state: DownloadTaskState { machine.state }
    var groupKey: String? { entity.aggregationKey }

    var record: TaskRecord {
        TaskRecord(
            id: id, state: state, mode: mode, weight: weight, sequence: sequence, resolveCount: resolveCount,
            lastError: lastError.map(StoredError.init), manifest: manifest, manifestRevision: manifestRevision,
            addedAt: addedAt)
    }

    /// The total size of the working outputs; an estimate from the finished segments when
    /// some sizes are unknown.
    var totalBytes: Int64? {
        guard manifest != nil else { return nil }
        if unknownSizes == 0 { return knownBytes }
        // Too few finished segments (the first are often small initialization segments) make
        // a poor guess: none until a tenth, and at least three, are done.
        let done = counter.doneSegments
        guard done >= 3, done * 10 >= segmentCount else { return nil }
        return max(counter.bytes, knownBytes + counter.bytes / Int64(done) * Int64(unknownSizes))
    }

    /// The segments still to fetch, with their checkpoints.
    func plan() -> RunPlan {
        var pending: [PlannedSegment] = []
        var doneBytes: Int64 = 0
        var doneSegments = 0
        for (outputIndex, output) in workingOutputs {
            for (segmentIndex, segment) in output.segments.enumerated() {
                let key = SegmentKey(output: outputIndex, segment: segmentIndex)
                let progress = segments[key]
                if let progress, progress.isDone {
                    doneBytes += progress.bytesWritten
                    doneSegments += 1
                    continue
                }
                pending.append(PlannedSegment(
                    key: key, output: output, segment: segment,
                    location: SegmentLocation(outputIndex: outputIndex, segmentIndex: segmentIndex, outputName: output.name, segment: segment),
                    checkpoint: progress?.checkpoint))
            }
        }
        return RunPlan(manifest: manifest!, pending: pending, doneBytes: doneBytes, doneSegments: doneSegments,
                       outputs: workingOutputs.map(\.index))
    }
}

/// Where a runner starts.
struct RunStart: Sendable {
    var manifest: DownloadManifest?
    var resolveCount: Int
}

/// What a runner has to do.
struct RunPlan: Sendable {
    var manifest: DownloadManifest
    var pending: [PlannedSegment]
    var doneBytes: Int64
    var doneSegments: Int
    /// The outputs to produce (or fill the cache for), by index.
    var outputs: [Int]
}

/// One segment to fetch.
struct PlannedSegment: Sendable {
    var key: SegmentKey
    var output: DownloadOutput
    var segment: DownloadSegment
    var location: SegmentLocation
    var checkpoint: TransferCheckpoint?
}

struct GroupEntry {
    var group: DownloadTaskGroup
    var children: Set<DownloadTaskID> = []
}

struct QueueEntry: Comparable {
    var weight: Int
    var sequence: Int
    var id: DownloadTaskID
    var version: Int

    /// Higher weight first; among equals, the earlier added.
    static func < (lhs: QueueEntry, rhs: QueueEntry) -> Bool {
        lhs.weight != rhs.weight ? lhs.weight < rhs.weight : lhs.sequence > rhs.sequence
    }
}

/// A binary max-heap.
struct PriorityQueue<Element: Comparable> {
    private var heap: [Element] = []

    var isEmpty: Bool { heap.isEmpty }
    var count: Int { heap.count }

    mutating func push(_ element: Element) {
        heap.append(element)
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[parent] < heap[child] else { break }
            heap.swapAt(parent, child)
            child = parent
        }
    }

    mutating func pop() -> Element? {
        guard !heap.isEmpty else { return nil }
        heap.swapAt(0, heap.count - 1)
        let top = heap.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1, right = left + 1
            var largest = parent
            if left < heap.count, heap[largest] < heap[left] { largest = left }
            if right < heap.count, heap[largest] < heap[right] { largest = right }
            guard largest != parent else { break }
            heap.swapAt(parent, largest)
            parent = largest
        }
        return top
    }
}

extension DownloadError {
    /// Whether the failure means the task cannot succeed as it is (→ `invalid`) rather than
    /// that it ran out of attempts (→ `failed`).
    var isPermanent: Bool {
        switch code {
        case .manifestInvalid, .manifestTooLarge, .unsafeInput, .unsafePath, .checksumMismatch, .unsupportedScheme,
            .invalidRequest, .noMatchingEntity, .unsupportedContent:
            return true
        case .httpStatus:
            return [404, 410].contains(httpStatus ?? 0)
        default:
            return false
        }
    }
}

extension DownloadManifest {
    /// Whether progress recorded against `self` still describes `other`: the same outputs with
    /// the same segments (sizes, ranges, checksums); URLs may differ (fresh signatures).
    func hasSameSegments(as other: DownloadManifest) -> Bool {
        guard outputs.count == other.outputs.count else { return false }
        for (mine, theirs) in zip(outputs, other.outputs) {
            guard mine.name == theirs.name, mine.assembly == theirs.assembly, mine.segments.count == theirs.segments.count
            else { return false }
            for (a, b) in zip(mine.segments, theirs.segments) {
                // Header fields count: an If-Match names the version the pieces belong to.
                guard a.range == b.range, a.expectedSize == b.expectedSize, a.checksum == b.checksum, a.offset == b.offset,
                    a.name == b.name, a.headers == b.headers
                else { return false }
            }
        }
        return true
    }
}
