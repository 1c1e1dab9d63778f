import Foundation
import Logging
import NIOPosix
import Tessera

/// The download daemon behind `tessera serve`: a ``DownloadTaskManager`` with what aria2's RPC
/// and the native API need around it (GIDs, removed results, options, metrics).
///
/// Transport-free: the HTTP server (``TesseraServer``) hands it decoded calls, and tests call it
/// directly. Whoever creates it calls ``start()`` once and ``shutdown()`` at the end; the daemon
/// does not shut the manager down (its owner does).
public actor TesseraDaemon {
    /// What the daemon is set up with.
    public struct Configuration: Sendable {
        /// Where downloads go (absolute); RPC `dir` options must stay under it.
        public var downloadRoot: String
        /// `--rpc-secret`; `nil` for none (every call is accepted).
        public var secret: String?
        /// Where `aria2.addMetalink` documents are kept, so their tasks can fetch them again
        /// (`<state dir>/rpc-documents`).
        public var documentDirectory: String
        /// Calls in one `system.multicall` or one batch at most.
        public var maxBatch = 100
        /// What ``globalOptions()`` reports besides the live values (aria2's spelling).
        public var reportedOptions: [String: String] = [:]
        /// What `aria2.shutdown` and `aria2.forceShutdown` do (the command stops the process as
        /// SIGTERM does); `nil` refuses them.
        public var shutdownRequest: (@Sendable () -> Void)?
        /// Where added downloads go instead of this daemon's manager (a fleet's queue, from which
        /// any worker may claim them): called with the entities and whether they are added
        /// paused. `nil`: the manager starts them.
        public var enqueue: (@Sendable (_ entities: [DownloadBaseEntity], _ paused: Bool) async throws -> Void)?
        /// The fleet this daemon is a worker of: its RPC then shows and acts on every task of the
        /// fleet, not only those its manager runs. `nil`: a daemon of its own.
        public var fleet: (any DaemonFleet)?

        /// Creates a configuration.
        public init(downloadRoot: String, secret: String? = nil, documentDirectory: String) {
            self.downloadRoot = downloadRoot
            self.secret = secret
            self.documentDirectory = documentDirectory
        }
    }

    /// Turns an input (what `tessera get` accepts) into entities, with outputs under
    /// `destinationDirectory` (relative to the root): the CLI's resolver (registry, probe,
    /// plugin arguments, format).
    public typealias Resolver = @Sendable (_ input: String, _ destinationDirectory: String) async throws -> [DownloadBaseEntity]

    /// The manager.
    public let manager: DownloadTaskManager
    /// The configuration.
    public let configuration: Configuration
    let resolver: Resolver
    let logger: Logger
    /// Counters for `/metrics`.
    public nonisolated let metrics: DaemonMetrics
    /// Where the daemon's documents are served (`http://127.0.0.1:PORT`), once the server runs.
    private var documentBaseURL: String?
    /// What tasks were added from (aria2's `uris`), by task; kept while the daemon runs.
    private var inputs: [DownloadTaskID: [String]] = [:]
    /// Each task's directory, as added.
    private var directories: [DownloadTaskID: String] = [:]
    /// Downloads removed over RPC: aria2 lists them as `removed` until their result is purged.
    private var removed: [(gid: String, status: Aria2Mapping.Status)] = []
    private var taskByGID: [String: DownloadTaskID] = [:]
    /// The GIDs of the fleet's tasks this daemon has seen (every task's at the fleet watch's
    /// first reading, then each changed one's): a GID is looked up by the task's key.
    private var fleetTaskByGID: [String: DownloadTaskID] = [:]
    private var groupByGID: [String: String] = [:]
    private var pump: Task<Void, Never>?
    /// Reads the fleet's changes for the notifications (with a fleet only).
    private var fleetWatch: Task<Void, Never>?
    /// Who receives the fleet's notifications (WebSocket connections), by a number of their own.
    private nonisolated let fleetListeners = Locked<(next: Int, all: [Int: AsyncStream<RPCValue>.Continuation])>((0, [:]))
    /// Who receives the fleet's `/events` objects (its other workers' tasks, the workers).
    private nonisolated let fleetEventListeners = Locked<(next: Int, all: [Int: AsyncStream<RPCValue>.Continuation])>((0, [:]))
    /// How often the fleet's changes are read for the notifications.
    static let fleetWatchInterval: Duration = .seconds(1)
    /// A random identifier of this run (`aria2.getSessionInfo`).
    public nonisolated let sessionID: String = (0..<20).map { _ in String(UInt8.random(in: 0...255), radix: 16) }.joined()

    /// Creates the daemon; nothing runs until ``start()``. `metrics` is where `/metrics` comes
    /// from: pass the one whose ``DaemonMetrics/factory`` the manager's engine and cache report to.
    public init(
        manager: DownloadTaskManager, configuration: Configuration, logger: Logger = Logger(label: "tessera.serve"),
        metrics: DaemonMetrics = DaemonMetrics(), resolver: @escaping Resolver
    ) {
        self.manager = manager
        self.metrics = metrics
        self.configuration = configuration
        self.resolver = resolver
        self.logger = logger
    }

    /// Starts counting events for the metrics. The count ends when the manager shuts down.
    public func start() {
        guard pump == nil else { return }
        let events = manager.events()
        let metrics = self.metrics
        pump = Task {
            for await event in events { metrics.record(event) }
        }
        if let fleet = configuration.fleet {
            let listeners = fleetListeners, eventListeners = fleetEventListeners, logger = self.logger
            fleetWatch = Task {
                var notifier = Aria2FleetNotifier()
                var cursor: Double?
                while !Task.isCancelled {
                    do {
                        // (Read again from a little before the last reading: a write that
                        // committed late is not missed; one read twice changes nothing.)
                        if cursor == nil { self.learn(try await fleet.taskIDs()) }
                        let (tasks, now) = try await fleet.changes(since: cursor.map { $0 - 2 })
                        self.learn(tasks.map(\.info.id))
                        let first = cursor == nil
                        cursor = now
                        let notifications = notifier.read(tasks.map { (Aria2GID.of($0.info.id), Aria2Mapping.status(of: $0.info.state)) })
                        Self.broadcast(notifications, to: listeners)
                        // `/events`: the tasks this worker does not run (its manager's events
                        // tell those, live) and the workers' health, once a second.
                        var events = first ? [] : tasks.filter { $0.worker != fleet.worker }.map { EventJSON.task("task", $0.info, worker: $0.worker) }
                        if let workers = try? await fleet.workers() { events.append(EventJSON.workers(workers)) }
                        Self.broadcast(events, to: eventListeners)
                    } catch {
                        logger.debug("the fleet's changes could not be read", metadata: ["error": "\(error)"])
                    }
                    try? await Task.sleep(for: Self.fleetWatchInterval)
                }
            }
        }
    }

    /// aria2's notifications for every task of the fleet (whichever worker runs it), read once a
    /// second from the fleet's database; `nil` for a daemon of its own (its notifications come
    /// from its manager's events). The stream ends at ``shutdown()``.
    public nonisolated func fleetNotifications() -> AsyncStream<RPCValue>? {
        guard configuration.fleet != nil else { return nil }
        return Self.subscribe(fleetListeners)
    }

    /// `/events` objects of the fleet read once a second from its database: every change of a
    /// task this worker does not run (`task`, with the worker running it) and the workers with
    /// their health (`workers`); `nil` for a daemon of its own. The stream ends at
    /// ``shutdown()``.
    public nonisolated func fleetEvents() -> AsyncStream<RPCValue>? {
        guard configuration.fleet != nil else { return nil }
        return Self.subscribe(fleetEventListeners)
    }

    private static func subscribe(_ listeners: Locked<(next: Int, all: [Int: AsyncStream<RPCValue>.Continuation])>) -> AsyncStream<RPCValue> {
        let (stream, continuation) = AsyncStream.makeStream(of: RPCValue.self, bufferingPolicy: .bufferingNewest(4096))
        let key = listeners.withLock { listeners in
            defer { listeners.next += 1 }
            listeners.all[listeners.next] = continuation
            return listeners.next
        }
        continuation.onTermination = { _ in _ = listeners.withLock { $0.all.removeValue(forKey: key) } }
        return stream
    }

    private static func broadcast(_ values: [RPCValue], to listeners: Locked<(next: Int, all: [Int: AsyncStream<RPCValue>.Continuation])>) {
        guard !values.isEmpty else { return }
        for listener in listeners.withLock({ Array($0.all.values) }) {
            for value in values { listener.yield(value) }
        }
    }

    /// Waits for the event count to end (call after the manager's shutdown).
    public func shutdown() async {
        pump?.cancel()
        await pump?.value
        pump = nil
        fleetWatch?.cancel()
        await fleetWatch?.value
        fleetWatch = nil
        for listener in fleetListeners.withLock({ Array($0.all.values) }) { listener.finish() }
        for listener in fleetEventListeners.withLock({ Array($0.all.values) }) { listener.finish() }
    }

    /// Tells the daemon where its server listens, for the documents it serves to its own tasks.
    public func setBaseURL(_ url: String) {
        documentBaseURL = url
    }

    // MARK: - Authorization

    /// Whether `token` (the first parameter without its `token:` prefix) is the secret, compared
    /// in constant time; `true` when no secret is set.
    public nonisolated func authorizes(_ token: String?) -> Bool {
        guard let secret = configuration.secret else { return true }
        guard let token else { return false }
        return ConstantTime.equal(token, secret)
    }

    // MARK: - Adding

    /// The options of `addUri` and `addMetalink` Tessera uses.
    public struct AddOptions: Sendable {
        /// `dir`: relative to the root after ``confine(directory:)``.
        public var directory = ""
        /// `out`: the file name (plain URLs only).
        public var fileName: String?
        /// `pause`: added without being queued.
        public var paused = false

        /// No options.
        public init() {}
    }

    /// Parses aria2's option object, refusing a `dir` outside the root and an `out` with a path.
    public func addOptions(_ object: [String: RPCValue]) throws -> AddOptions {
        var options = AddOptions()
        if let dir = object["dir"] {
            guard let text = dir.stringValue else { throw Aria2Error("dir must be a string") }
            options.directory = try confine(directory: text)
        }
        if let out = object["out"] {
            guard let text = out.stringValue, !text.isEmpty else { throw Aria2Error("out must be a file name") }
            guard !text.contains("/"), text != ".", text != "..", (try? SafePath.relative(text)) != nil else {
                throw Aria2Error("out \(UntrustedText.quoted(text, limit: 80)) is not a plain file name (use dir for a directory)")
            }
            options.fileName = text
        }
        if let pause = object["pause"] {
            options.paused = pause == .bool(true) || pause.stringValue == "true"
        }
        return options
    }

    /// `dir` relative to the download root: an absolute path must be the root or inside it,
    /// a relative one is taken from the root; `..` that would leave it is refused, and so is a
    /// component Tessera refuses as a file name (Tessera keeps every output under its root:
    /// there is no option to allow more).
    public nonisolated func confine(directory: String) throws -> String {
        let root = URL(fileURLWithPath: configuration.downloadRoot).standardizedFileURL.path
        let candidate = directory.hasPrefix("/") ? directory : root + "/" + directory
        let path = URL(fileURLWithPath: candidate).standardizedFileURL.path
        if path == root { return "" }
        let prefix = root.hasSuffix("/") ? root : root + "/"
        guard path.hasPrefix(prefix) else {
            throw Aria2Error(
                "dir \(UntrustedText.quoted(directory, limit: 120)) is outside the download root \(root): tessera serve writes only under it")
        }
        let relative = String(path.dropFirst(prefix.count))
        for component in relative.split(separator: "/") {
            do {
                _ = try SafePath.relative(String(component))
            } catch {
                throw Aria2Error("dir \(UntrustedText.quoted(directory, limit: 120)) cannot be used: \(error.message)")
            }
        }
        return relative
    }

    /// `aria2.addUri`: resolves the input (any input `tessera get` takes; the first URI, the
    /// others of aria2's mirror list are not used) and starts its tasks. Returns the task's GID,
    /// or the group's when the input stands for several tasks of one group.
    public func addURI(_ uris: [String], options: AddOptions) async throws -> String {
        guard let input = uris.first, !input.isEmpty else { throw Aria2Error("no URI to add") }
        var entities: [DownloadBaseEntity]
        do {
            entities = try await resolver(input, options.directory)
        } catch let error as DownloadError {
            throw Aria2Error(UntrustedText.printable(error.message, limit: 500))
        }
        if let name = options.fileName {
            guard entities.count == 1, let direct = entities.first as? DirectEntity else {
                throw Aria2Error("out names the file of a plain URL; this input stands for \(entities.count == 1 ? "a manifest" : "\(entities.count) downloads")")
            }
            entities = [DirectEntity(url: direct.payload.url, fileName: name, destinationDirectory: options.directory)]
        }
        guard !entities.isEmpty else { throw Aria2Error("the input stands for no download") }
        let infos = try await add(entities, options: options, uris: uris)
        let groups = Set(infos.map(\.groupKey))
        if infos.count > 1, groups.count == 1, let key = groups.first ?? nil {
            return Aria2GID.of(group: key)
        }
        return Aria2GID.of(infos[0].id)
    }

    /// `aria2.addMetalink`: keeps the document under the state directory, serves it to the
    /// daemon's own tasks and adds one task per file. Returns their GIDs.
    public func addMetalink(_ document: Data, options: AddOptions) async throws -> [String] {
        guard let base = documentBaseURL else { throw Aria2Error("the server does not run yet") }
        guard !document.isEmpty else { throw Aria2Error("the Metalink document is empty") }
        let name = SHA256Hex.of(document) + ".meta4"
        let directory = configuration.documentDirectory
        // (File work off the cooperative pool.)
        try await NIOThreadPool.singleton.runIfActive {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let path = directory + "/" + name
            if !FileManager.default.fileExists(atPath: path) {
                guard FileManager.default.createFile(atPath: path, contents: document) else {
                    throw Aria2Error("cannot keep the Metalink document in \(directory)")
                }
            }
        }
        let url = base + "/rpc-documents/" + name
        let entities: [DownloadBaseEntity]
        do {
            entities = try await resolver(url, options.directory)
        } catch let error as DownloadError {
            throw Aria2Error(UntrustedText.printable(error.message, limit: 500))
        }
        let infos = try await add(entities, options: options, uris: [url])
        return infos.map { Aria2GID.of($0.id) }
    }

    /// What `tessera get` would add for `input` (`/api/resolve`): each entity's ID, GID, title,
    /// plugin and group, without adding anything.
    public func resolve(_ input: String) async throws -> [RPCValue] {
        let entities: [DownloadBaseEntity]
        do {
            entities = try await resolver(input, "")
        } catch let error as DownloadError {
            throw Aria2Error(UntrustedText.printable(error.message, limit: 500))
        }
        return entities.map { entity in
            var object: [String: RPCValue] = [
                "id": .string(entity.taskID.description), "gid": .string(Aria2GID.of(entity.taskID)),
                "title": .string(entity.title), "plugin": .string(entity.taskID.entityType),
            ]
            if let key = entity.aggregationKey { object["group"] = .string(key) }
            return .object(object)
        }
    }

    /// A document ``addMetalink(_:options:)`` kept, by its name (`<sha256>.meta4`), read off
    /// the cooperative pool; `nil` for any other name.
    public nonisolated func document(named name: String) async -> Data? {
        guard name.hasSuffix(".meta4"), name.utf8.count == 64 + 6,
            name.utf8.dropLast(6).allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
        else { return nil }
        let path = configuration.documentDirectory + "/" + name
        return try? await NIOThreadPool.singleton.runIfActive { FileOperations.contents(path).map { Data($0) } }
    }

    /// A task an RPC call added.
    struct Added {
        var id: DownloadTaskID
        var groupKey: String?
    }

    private func add(_ entities: [DownloadBaseEntity], options: AddOptions, uris: [String]) async throws -> [Added] {
        var infos: [Added] = []
        if let enqueue = configuration.enqueue {
            do {
                try await enqueue(entities, options.paused)
            } catch {
                throw Aria2Error(UntrustedText.printable("\(error)", limit: 500))
            }
        }
        for entity in entities {
            let info: Added
            if configuration.enqueue != nil {
                info = Added(id: entity.taskID, groupKey: entity.aggregationKey)
            } else {
                do {
                    let added = options.paused ? try await manager.add(entity) : try await manager.start(entity)
                    info = Added(id: added.id, groupKey: added.groupKey)
                } catch {
                    throw Aria2Error(UntrustedText.printable(error.message, limit: 500))
                }
            }
            infos.append(info)
            let gid = Aria2GID.of(info.id)
            taskByGID[gid] = info.id
            removed.removeAll { $0.gid == gid }
            inputs[info.id] = uris
            directories[info.id] = entity.destinationDirectory
            if let key = info.groupKey { groupByGID[Aria2GID.of(group: key)] = key }
        }
        metrics.added(infos.count)
        return infos
    }

    // MARK: - Looking up

    /// What a GID names.
    enum Target {
        case task(DownloadTaskInfo)
        case group(DownloadGroupInfo)
        /// A task of the fleet that another worker runs or the queue keeps.
        case fleet(DaemonFleetTask)
    }

    func target(_ gid: String) async throws -> Target {
        guard Aria2GID.isValid(gid) else { throw Aria2Error.notFound(gid) }
        if let id = taskByGID[gid], let info = await manager.check(id) { return .task(info) }
        if let key = groupByGID[gid], let group = await manager.checkGroup(key) { return .group(group) }
        await reindex()
        if let id = taskByGID[gid], let info = await manager.check(id) { return .task(info) }
        if let key = groupByGID[gid], let group = await manager.checkGroup(key) { return .group(group) }
        if let fleet = configuration.fleet {
            if let id = fleetTaskByGID[gid], let task = try? await fleet.task(id) { return .fleet(task) }
            // (Added by another worker since the last reading of the changes.)
            let tasks = await fleetTasks()
            learn(tasks.map(\.info.id))
            if let task = tasks.first(where: { Aria2GID.of($0.info.id) == gid }) { return .fleet(task) }
        }
        throw Aria2Error.notFound(gid)
    }

    /// Learns the GIDs of tasks of the fleet.
    private func learn(_ ids: [DownloadTaskID]) {
        for id in ids { fleetTaskByGID[Aria2GID.of(id)] = id }
    }

    /// The fleet's tasks this daemon's manager does not run (none without a fleet, or while its
    /// database cannot be read: the RPC then shows what this worker runs).
    func fleetTasks() async -> [DaemonFleetTask] {
        await readFleet("tasks", otherwise: []) { try await $0.tasks() }
    }

    /// The fleet's unfinished tasks this daemon's manager does not run, then its `last` finished
    /// ones (oldest first): what `/events` and `/api/tasks` start with.
    func fleetTasksShown(lastFinished last: Int = 100) async -> [DaemonFleetTask] {
        let unfinished = await fleetTasks()
        return await readFleet("finished tasks", otherwise: unfinished) {
            unfinished + (try await $0.stoppedTasks(offset: -1, count: last)).reversed()
        }
    }

    /// The fleet's workers with their health (none without a fleet, or while its database
    /// cannot be read).
    func fleetWorkers() async -> [DaemonFleetWorker] {
        await readFleet("workers", otherwise: []) { try await $0.workers() }
    }

    /// What `read` gets from the fleet's database; `fallback` without a fleet, or (with a
    /// warning naming `what`) when the database cannot be read.
    private func readFleet<Value>(_ what: String, otherwise fallback: Value, _ read: (any DaemonFleet) async throws -> Value) async -> Value {
        guard let fleet = configuration.fleet else { return fallback }
        do {
            return try await read(fleet)
        } catch {
            logger.warning("the fleet's \(what) could not be read", metadata: ["error": "\(error)"])
            return fallback
        }
    }

    /// The aria2 status of a task of the fleet, with the worker that runs it.
    func status(of task: DaemonFleetTask) -> Aria2Mapping.Status {
        var status = Aria2Mapping.status(of: task.info, dir: directory(of: task.info), uris: uris(of: task.info), connections: 0)
        status.worker = task.worker
        return status
    }

    /// Runs a command of the fleet, with the fleet's failure as the RPC's error.
    private func fleetCommand(_ gid: String, _ body: (any DaemonFleet) async throws -> Bool) async throws {
        guard let fleet = configuration.fleet else { throw Aria2Error.notFound(gid) }
        let known: Bool
        do {
            known = try await body(fleet)
        } catch {
            throw Aria2Error("the fleet's database: " + UntrustedText.printable("\(error)", limit: 300))
        }
        guard known else { throw Aria2Error("GID \(gid) cannot be changed now") }
    }

    /// Learns the GIDs of tasks and groups the daemon did not add (restored ones).
    private func reindex() async {
        for info in await manager.checkAll() {
            taskByGID[Aria2GID.of(info.id)] = info.id
            if let key = info.groupKey { groupByGID[Aria2GID.of(group: key)] = key }
        }
    }

    /// The directory a task's outputs go to (absolute).
    func directory(of info: DownloadTaskInfo) -> String {
        if let relative = directories[info.id] {
            return relative.isEmpty ? configuration.downloadRoot : configuration.downloadRoot + "/" + relative
        }
        if let first = info.outputs.first {
            return (first.path as NSString).deletingLastPathComponent
        }
        return configuration.downloadRoot
    }

    /// What a task was added from: the RPC's URIs, or for a plain URL task its URL.
    func uris(of info: DownloadTaskInfo) -> [String] {
        if let uris = inputs[info.id] { return uris }
        if info.id.entityType == "direct" { return [info.id.entityKey] }
        return []
    }

    /// The aria2 status of a task (complete outputs of unknown size as ``measureOutputs(of:)``
    /// found them).
    public func status(of info: DownloadTaskInfo) -> Aria2Mapping.Status {
        var status = Aria2Mapping.status(
            of: info, dir: directory(of: info), uris: uris(of: info), connections: info.state.isRunning ? 1 : 0,
            sizeOnDisk: { path in self.measuredSizes[path] })
        status.worker = configuration.fleet?.worker
        return status
    }

    /// Sizes of complete outputs whose manifest gave none (DASH, HLS), measured once.
    private var measuredSizes: [String: Int64] = [:]

    /// Measures, off the cooperative pool, the complete outputs of `infos` whose size the
    /// manifest did not give and that were not measured yet.
    func measureOutputs(of infos: [DownloadTaskInfo]) async {
        let paths = infos.flatMap { info in
            info.outputs.filter { $0.isComplete && $0.expectedSize == nil && measuredSizes[$0.path] == nil }.map(\.path)
        }
        guard !paths.isEmpty else { return }
        let sizes = (try? await NIOThreadPool.singleton.runIfActive {
            paths.compactMap { path -> (String, Int64)? in
                var status = stat()
                guard stat(path, &status) == 0, status.st_mode & S_IFMT == S_IFREG else { return nil }
                return (path, Int64(status.st_size))
            }
        }) ?? []
        for (path, size) in sizes { measuredSizes[path] = size }
    }

    /// The aria2 status of what `gid` names (a task, a group, or a removed download).
    public func status(gid: String) async throws -> Aria2Mapping.Status {
        if let entry = removed.first(where: { $0.gid == gid }) { return entry.status }
        switch try await target(gid) {
        case .task(let info):
            await measureOutputs(of: [info])
            return status(of: info)
        case .group(let group):
            await measureOutputs(of: group.children)
            return Aria2Mapping.status(of: group, dir: configuration.downloadRoot, sizeOnDisk: { self.measuredSizes[$0] })
        case .fleet(let task):
            return status(of: task)
        }
    }

    /// aria2's `tellStopped` window: with a fleet, its finished tasks (the fleet's database keeps
    /// every task's result; this worker's too) as the database windows them; without one, the
    /// finished among ``allStatuses()``.
    public func stoppedStatuses(offset: Int, count: Int) async -> [Aria2Mapping.Status] {
        guard let fleet = configuration.fleet else {
            return Aria2RPC.window(await allStatuses().filter { Self.stoppedStatuses.contains($0.status) }, offset: offset, count: count)
        }
        do {
            let tasks = try await fleet.stoppedTasks(offset: offset, count: count)
            learn(tasks.map(\.info.id))
            return tasks.map(status(of:))
        } catch {
            logger.warning("the fleet's finished tasks could not be read", metadata: ["error": "\(error)"])
            return []
        }
    }

    /// aria2's statuses of finished downloads.
    static let stoppedStatuses: Set<String> = ["complete", "error", "removed"]

    /// Every download in aria2's terms: tasks in the order they were added, then groups, then
    /// the removed ones. With a fleet, the fleet's unfinished tasks (its finished ones come
    /// from ``stoppedStatuses(offset:count:)``).
    public func allStatuses() async -> [Aria2Mapping.Status] {
        let tasks = await manager.checkAll()
        let groups = await manager.checkAllGroups()
        for info in tasks { taskByGID[Aria2GID.of(info.id)] = info.id }
        for group in groups { groupByGID[Aria2GID.of(group: group.key)] = group.key }
        await measureOutputs(of: tasks)
        let local = Set(tasks.map(\.id))
        let fleet = await fleetTasks().filter { !local.contains($0.info.id) }
        return tasks.map(status(of:)) + fleet.map(status(of:))
            + groups.map { Aria2Mapping.status(of: $0, dir: configuration.downloadRoot, sizeOnDisk: { self.measuredSizes[$0] }) }
            + removed.map(\.status)
    }

    // MARK: - Commands

    /// `aria2.pause`: pauses a task, or every unfinished task of a group.
    public func pause(_ gid: String) async throws -> String {
        switch try await target(gid) {
        case .task(let info):
            guard !info.state.isFinal, info.state != .paused, info.state != .idle else {
                throw Aria2Error("GID \(gid) cannot be paused now")
            }
            await manager.stop(info.id)
        case .group(let group):
            for child in group.children where !child.state.isFinal && child.state != .paused { await manager.stop(child.id) }
        case .fleet(let task):
            guard !task.info.state.isFinal, task.info.state != .paused else { throw Aria2Error("GID \(gid) cannot be paused now") }
            try await fleetCommand(gid) { try await $0.pause(task.info.id) }
        }
        return gid
    }

    /// `aria2.unpause`: queues a paused task (or a group's paused tasks) again.
    public func unpause(_ gid: String) async throws -> String {
        switch try await target(gid) {
        case .task(let info):
            guard info.state == .paused || info.state == .idle else { throw Aria2Error("GID \(gid) cannot be unpaused now") }
            do { _ = try await manager.resume(info.id) } catch { throw Aria2Error(error.message) }
        case .group(let group):
            for child in group.children where child.state == .paused || child.state == .idle {
                _ = try? await manager.resume(child.id)
            }
        case .fleet(let task):
            guard task.info.state == .paused else { throw Aria2Error("GID \(gid) cannot be unpaused now") }
            try await fleetCommand(gid) { try await $0.unpause(task.info.id) }
        }
        return gid
    }

    /// `aria2.pauseAll`.
    public func pauseAll() async {
        await manager.stopAll()
        guard let fleet = configuration.fleet else { return }
        for task in await fleetTasks() where !task.info.state.isFinal && task.info.state != .paused {
            _ = try? await fleet.pause(task.info.id)
        }
    }

    /// `aria2.unpauseAll`: queues every paused task (not the failed ones, unlike Tessera's
    /// `startAll`).
    public func unpauseAll() async {
        for info in await manager.checkAll() where info.state == .paused || info.state == .idle {
            _ = try? await manager.resume(info.id)
        }
        guard let fleet = configuration.fleet else { return }
        for task in await fleetTasks() where task.info.state == .paused {
            _ = try? await fleet.unpause(task.info.id)
        }
    }

    /// `aria2.remove`: removes a task that is not finished (its partial files go; aria2 keeps
    /// them), or a group's tasks; listed as `removed` until its result is purged.
    public func remove(_ gid: String) async throws -> String {
        switch try await target(gid) {
        case .task(let info):
            guard !info.state.isFinal else { throw Aria2Error("Active Download not found for GID \(gid)") }
            var snapshot = status(of: info)
            await manager.remove(info.id)
            snapshot.status = "removed"
            snapshot.errorCode = 31
            snapshot.errorMessage = nil
            snapshot.downloadSpeed = 0
            snapshot.connections = 0
            keepRemoved(gid, snapshot)
            forget(info.id)
            metrics.removedByRPC()
        case .group(let group):
            var snapshot = Aria2Mapping.status(of: group, dir: configuration.downloadRoot)
            for child in group.children {
                var childStatus = status(of: child)
                await manager.remove(child.id)
                childStatus.status = "removed"
                childStatus.errorCode = 31
                childStatus.downloadSpeed = 0
                keepRemoved(childStatus.gid, childStatus)
                forget(child.id)
            }
            snapshot.status = "removed"
            snapshot.errorCode = 31
            snapshot.downloadSpeed = 0
            keepRemoved(gid, snapshot)
        case .fleet(let task):
            guard !task.info.state.isFinal else { throw Aria2Error("Active Download not found for GID \(gid)") }
            // (The fleet keeps the task as removed: its row is the result aria2 lists.)
            try await fleetCommand(gid) { try await $0.remove(task.info.id, deletingFiles: false) }
            forget(task.info.id)
            metrics.removedByRPC()
        }
        return gid
    }

    /// aria2 keeps at most `max-download-result` (1000) stopped results; so does the daemon
    /// for removed ones (the oldest go first).
    static let maxRemovedResults = 1000

    private func keepRemoved(_ gid: String, _ status: Aria2Mapping.Status) {
        removed.removeAll { $0.gid == gid }
        removed.append((gid, status))
        if removed.count > Self.maxRemovedResults { removed.removeFirst(removed.count - Self.maxRemovedResults) }
    }

    /// Drops what the daemon remembered of a task that is gone.
    private func forget(_ id: DownloadTaskID) {
        inputs[id] = nil
        directories[id] = nil
        taskByGID[Aria2GID.of(id)] = nil
    }

    /// `aria2.removeDownloadResult`: forgets a stopped download (complete, error or removed); a
    /// complete task's files stay.
    public func removeResult(_ gid: String) async throws {
        if let index = removed.firstIndex(where: { $0.gid == gid }) {
            removed.remove(at: index)
            return
        }
        switch try await target(gid) {
        case .task(let info):
            guard info.state.isFinal else { throw Aria2Error("Could not remove download result of GID \(gid)") }
            await manager.remove(info.id, deletingFiles: false)
            forget(info.id)
        case .group(let group):
            guard group.state == .completed || group.state == .failed else {
                throw Aria2Error("Could not remove download result of GID \(gid)")
            }
            for child in group.children where child.state.isFinal {
                await manager.remove(child.id, deletingFiles: false)
                forget(child.id)
            }
        case .fleet:
            throw Aria2Error("Could not remove download result of GID \(gid): the fleet keeps its tasks' results")
        }
    }

    /// `aria2.purgeDownloadResult`: forgets every stopped download.
    public func purgeResults() async {
        removed.removeAll()
        for info in await manager.checkAll() where info.state.isFinal {
            await manager.remove(info.id, deletingFiles: false)
            forget(info.id)
        }
    }

    /// `aria2.shutdown`: asks the owner to stop (after this answer is sent), when it allows it.
    public func requestShutdown() throws {
        guard let request = configuration.shutdownRequest else { throw Aria2Error("this daemon cannot be shut down over RPC") }
        request()
    }

    /// `aria2.saveSession`: the store holds the session; this writes what it has not been told.
    public func saveSession() async {
        await manager.flushStore()
    }

    // MARK: - Options

    /// `aria2.changeGlobalOption`: `max-overall-download-limit` (aria2's sizes: `0`, `512K`,
    /// `2M`) and `max-concurrent-downloads`; any other option is refused by name.
    public func changeGlobalOptions(_ options: [String: RPCValue]) async throws {
        var rate: Int64??
        var tasks: Int?
        for (key, value) in options {
            let text = value.stringValue ?? value.intValue.map(String.init) ?? ""
            switch key {
            case "max-overall-download-limit":
                guard let bytes = Aria2Size.parse(text) else { throw Aria2Error("max-overall-download-limit: \(UntrustedText.quoted(text, limit: 40)) is no size") }
                rate = .some(bytes == 0 ? nil : bytes)
            case "max-concurrent-downloads":
                guard let count = Int(text), (1...10_000).contains(count) else {
                    throw Aria2Error("max-concurrent-downloads: \(UntrustedText.quoted(text, limit: 40)) is not a number from 1 to 10000")
                }
                tasks = count
            default:
                throw Aria2Error("the option \(UntrustedText.quoted(key, limit: 60)) cannot be changed in tessera serve")
            }
        }
        if let rate { manager.engine.setGlobalRateLimit(rate) }
        if let tasks { await manager.setMaxConcurrentTasks(tasks) }
    }

    /// `aria2.getGlobalOption`: the options in aria2's spelling, values as strings.
    public func globalOptions() async -> [String: String] {
        var options = configuration.reportedOptions
        options["dir"] = configuration.downloadRoot
        options["max-concurrent-downloads"] = String(await manager.maxConcurrentTasks)
        options["max-overall-download-limit"] = String(manager.engine.globalRateLimit ?? 0)
        return options
    }

    /// `aria2.getOption` of one download.
    public func options(of gid: String) async throws -> [String: String] {
        let status = try await status(gid: gid)
        var options = ["dir": status.dir]
        if status.files.count == 1, !status.files[0].path.isEmpty {
            options["out"] = (status.files[0].path as NSString).lastPathComponent
        }
        return options
    }

    /// `aria2.getGlobalStat`.
    public func globalStat() async -> [String: String] {
        let all = await allStatuses().filter { !$0.tesseraID.hasPrefix("group:") }
        let active = all.filter { $0.status == "active" }
        let waiting = all.filter { $0.status == "waiting" || $0.status == "paused" }
        var stopped = all.count - active.count - waiting.count
        if let fleet = configuration.fleet {
            // (The fleet's database counts its finished tasks, this worker's included.)
            do {
                stopped = try await fleet.stoppedCount()
            } catch {
                logger.warning("the fleet's finished tasks could not be counted", metadata: ["error": "\(error)"])
            }
        }
        let speed = active.reduce(Int64(0)) { $0.addingReportingOverflow($1.downloadSpeed).overflow ? Int64.max : $0 + $1.downloadSpeed }
        return [
            "downloadSpeed": String(speed), "uploadSpeed": "0", "numActive": String(active.count),
            "numWaiting": String(waiting.count), "numStopped": String(stopped), "numStoppedTotal": String(stopped),
        ]
    }
}
