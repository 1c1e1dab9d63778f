import Foundation
import Logging
import NIOPosix
import PostgresNIO
import Tessera

/// One `tessera serve --fleet` worker: it joins the fleet, claims tasks from the queue in
/// PostgreSQL, runs them on its own ``DownloadTaskManager`` (whose store is ``store`` and whose
/// write fence is ``fence``), renews its lease, takes over the tasks of workers whose leases
/// expired, and hands its tasks back on a graceful stop.
///
/// What to do and when is ``FleetLeasePolicy``'s decision; this actor carries it out. Each
/// database call runs in a task the worker owns (a slow claim never delays a heartbeat), and
/// reports back here.
///
/// ```swift
/// let connection = try await FleetConnection.open(database, logger: logger)
/// let worker = FleetWorker(connection: connection, settings: settings)
/// var configuration = DownloadTaskManager.Configuration(downloadRoot: root)
/// configuration.writeFence = worker.fence
/// let manager = DownloadTaskManager(configuration: configuration, engine: engine, store: worker.store, registry: registry)
/// let running = Task { await worker.run(manager: manager) }
/// ...
/// await worker.stop()       // hands the tasks back
/// await running.value
/// ```
public actor FleetWorker {
    /// How a worker runs.
    public struct Settings: Sendable {
        /// The lease's timing.
        public var timing: FleetLeasePolicy.Timing
        /// Tasks held at once (`-j`).
        public var maxTasks: Int
        /// The shared download root (the same path on every worker).
        public var downloadRoot: String
        /// This host's name, for the status.
        public var host: String
        /// This process.
        public var pid: Int32
        /// The RPC port, for the status.
        public var port: Int?
        /// At most this many transfers at once to one `host:port` over the whole fleet
        /// (`--fleet-host-connections`); `nil`: each worker's own per-host limit only. With it, the
        /// worker's manager must be configured with an unlisted-host limit of 0 (a host gets
        /// transfers once the worker holds slots for it).
        public var hostConnections: Int?
        /// The worker's own per-host limit (its manager's): it never asks the fleet for more.
        public var localHostLimit: Int

        /// Settings.
        public init(
            timing: FleetLeasePolicy.Timing, maxTasks: Int, downloadRoot: String, host: String, pid: Int32, port: Int? = nil,
            hostConnections: Int? = nil, localHostLimit: Int = 16
        ) {
            self.timing = timing
            self.maxTasks = maxTasks
            self.downloadRoot = downloadRoot
            self.host = host
            self.pid = pid
            self.port = port
            self.hostConnections = hostConnections
            self.localHostLimit = localHostLimit
        }
    }

    /// The fence the worker's manager must be configured with.
    public nonisolated let fence: FleetWriteFence
    /// The store the worker's manager must be configured with.
    public nonisolated let store: FleetStore
    /// The settings.
    public nonisolated let settings: Settings
    /// The fleet's clients.
    public nonisolated let connection: FleetConnection
    let logger: Logger

    private var policy: FleetLeasePolicy
    /// This worker's share of the fleet-wide per-host limit (``Settings/hostConnections``).
    private var hostSlots: FleetHostSlots?
    /// A heartbeat's per-host work is under way (one at a time: at most one per heartbeat).
    private var hostSlotsBusy = false
    private var manager: DownloadTaskManager?
    /// This worker's id in the fleet (a new one after each rejoin).
    public private(set) var worker: Int64?
    private var claimedAt: [DownloadTaskID: FleetInstant] = [:]
    private var commanded: Set<DownloadTaskID> = []
    private var owned: [UUID: Task<Void, Never>] = [:]
    private var finished = false
    private var finishWaiters: [CheckedContinuation<Void, Never>] = []
    /// What the worker did, for the status line and the tests (takeovers, losses, rejoins).
    public private(set) var counters = Counters()

    /// Counts of what happened.
    public struct Counters: Sendable, Equatable {
        /// Tasks claimed.
        public var claimed = 0
        /// Tasks found taken over (a fenced write or a heartbeat said so).
        public var lost = 0
        /// Times the fleet declared this worker dead (it then joined again).
        public var droppedAll = 0
        /// Tasks finished here (completed, failed, invalid, paused or removed).
        public var released = 0
    }

    /// A worker on `connection`; nothing runs until ``run(manager:)``.
    public init(connection: FleetConnection, settings: Settings, logger: Logger = Logger(label: "tessera.fleet")) {
        self.connection = connection
        self.settings = settings
        self.logger = logger
        policy = FleetLeasePolicy(timing: settings.timing, capacity: settings.maxTasks)
        hostSlots = settings.hostConnections.map { FleetHostSlots(fleetLimit: $0, localLimit: settings.localHostLimit) }
        fence = FleetWriteFence(patience: settings.timing.lease)
        store = FleetStore(queue: connection.queue, logger: logger)
    }

    /// Runs the worker until ``stop()`` has handed its tasks back.
    public func run(manager: DownloadTaskManager) async {
        self.manager = manager
        let listener = listen()
        let notices = store.noticeStream
        let noticeReader = Task { [weak self] in
            for await notice in notices {
                guard let self else { return }
                await self.storeNotice(notice)
            }
        }
        while !finished {
            let now = FleetInstant.now()
            perform(policy.handle(.tick(at: now)))
            let nap = min(policy.nextDeadline().map { $0.since(now) } ?? .milliseconds(100), .milliseconds(100))
            try? await Task.sleep(for: max(nap, .milliseconds(5)))
        }
        listener.cancel()
        noticeReader.cancel()
        for task in Array(owned.values) { await task.value }
        owned.removeAll()
        await listener.value
    }

    /// Leaves the fleet gracefully: the runs stop (keeping their bytes and journals), the tasks go
    /// back to the queue at once, and ``run(manager:)`` returns.
    public func stop() async {
        guard !finished else { return }
        perform(policy.handle(.stopRequested(at: .now())))
        guard !finished else { return }
        await withCheckedContinuation { finishWaiters.append($0) }
    }

    /// The tasks this worker holds, with their epochs.
    public nonisolated var heldTasks: [DownloadTaskID: Int64] { fence.held }

    // MARK: - Carrying out the policy's actions

    private func event(_ event: FleetLeasePolicy.Event) {
        perform(policy.handle(event))
    }

    private func perform(_ actions: [FleetLeasePolicy.Action]) {
        for action in actions {
            switch action {
            case .join: join()
            case .heartbeat(let sentAt): heartbeat(sentAt: sentAt)
            case .rescue: rescue()
            case .claim(let count): claim(count)
            case .suspendRuns: suspendRuns()
            case .resumeRuns: resumeRuns()
            case .dropAll: dropAll()
            case .handBack: handBack()
            case .finish: finish()
            }
        }
        // The fence trusts what the policy trusts, from now on.
        fence.trust(until: policy.phase == .active || policy.phase == .stopping ? policy.trustedUntil : nil)
    }

    private func join() {
        let settings = self.settings, queue = connection.beats, logger = self.logger
        own { [weak self] in
            let sentAt = FleetInstant.now()
            do {
                let id = try await queue.join(
                    host: settings.host, pid: settings.pid, port: settings.port, maxTasks: settings.maxTasks, lease: settings.timing.lease)
                await self?.joined(id, sentAt: sentAt)
            } catch {
                logger.warning("cannot join the fleet; trying again", metadata: ["error": "\(FleetQueue.describe(error))"])
                await self?.event(.joinFailed(at: .now()))
            }
        }
    }

    private func joined(_ id: Int64, sentAt: FleetInstant) {
        worker = id
        store.setWorker(id)
        logger.notice("joined the fleet", metadata: ["worker": "\(id)", "database": "\(connection.database)"])
        event(.joined(sentAt: sentAt, at: .now()))
    }

    private func heartbeat(sentAt: FleetInstant) {
        guard let worker else { return }
        let queue = connection.beats, lease = settings.timing.lease
        own { [weak self] in
            do {
                let beat = try await queue.heartbeat(worker: worker, lease: lease)
                await self?.heard(beat, worker: worker, sentAt: sentAt)
            } catch {
                await self?.heartbeatFailed(error, worker: worker, sentAt: sentAt)
            }
        }
    }

    private func heartbeatFailed(_ error: any Error, worker: Int64, sentAt: FleetInstant) {
        guard worker == self.worker else { return }
        logger.warning("heartbeat failed", metadata: ["worker": "\(worker)", "error": "\(FleetQueue.describe(error))"])
        event(.heartbeatFailed(sentAt: sentAt, at: .now()))
    }

    private func heard(_ beat: FleetQueue.Heartbeat, worker: Int64, sentAt: FleetInstant) {
        guard worker == self.worker else { return }
        if !beat.alive {
            logger.warning("the fleet declared this worker dead (its lease expired): its tasks are taken over; joining again", metadata: [
                "worker": "\(worker)",
            ])
        }
        event(.heartbeatAnswered(sentAt: sentAt, alive: beat.alive, at: .now()))
        guard beat.alive else { return }
        // Held here but not there (claimed before this beat was sent): taken over.
        // (A task the store already let go of, finished, is told by the store's own notice.)
        for (id, epoch) in fence.held
        where (claimedAt[id].map { $0 < sentAt } ?? true) && beat.held[id.description] != epoch && store.epoch(of: id) != nil {
            letGo(id, lost: true, state: nil, epoch: epoch)
        }
        for (key, command) in beat.commands {
            guard let (id, _) = fence.held.first(where: { $0.key.description == key }), !commanded.contains(id) else { continue }
            commanded.insert(id)
            obey(command, id)
        }
        let store = self.store
        own { await store.flushPending() }
        beatHostSlots(worker: worker)
    }

    // MARK: - Per-host slots across the fleet

    /// Once per answered heartbeat: the manager's per-host transfers go to ``FleetHostSlots``,
    /// and its actions are carried out in order, in one task (a limit is set in the scheduler
    /// before the next step reads the transfers again).
    private func beatHostSlots(worker: Int64) {
        guard hostSlots != nil, !hostSlotsBusy, let manager else { return }
        hostSlotsBusy = true
        own { [weak self] in
            let transfers = await manager.hostTransfers()
            await self?.carryOut(.beat(transfers), worker: worker)
            await self?.hostSlotsDone()
        }
    }

    private func hostSlotsDone() { hostSlotsBusy = false }

    private func carryOut(_ event: FleetHostSlots.Event, worker: Int64) async {
        guard worker == self.worker, var slots = hostSlots, let manager else { return }
        let actions = slots.handle(event)
        hostSlots = slots
        let queue = connection.beats, limit = slots.fleetLimit
        for action in actions {
            switch action {
            case .setLimit(let host, let count):
                // (0 is the unlisted hosts' limit under a fleet limit: the host's own entry goes.)
                await manager.setHostLimit(count == 0 ? nil : count, for: host)
            case .acquire(let host, let want):
                do {
                    let answer = try await queue.acquireHostSlots(host: host, worker: worker, want: want, limit: limit)
                    await carryOut(
                        .acquired(host, slots: answer.slots, fairShare: answer.fairShare, othersWaiting: answer.othersWaiting),
                        worker: worker)
                } catch {
                    logger.debug("acquiring host slots failed", metadata: ["error": "\(FleetQueue.describe(error))"])
                    await carryOut(.failed(host), worker: worker)
                }
            case .release(let host, let count):
                do {
                    try await queue.releaseHostSlots(host: host, worker: worker, to: count)
                    await carryOut(.released(host, to: count), worker: worker)
                } catch {
                    await carryOut(.failed(host), worker: worker)
                }
            }
        }
    }

    private func obey(_ command: String, _ id: DownloadTaskID) {
        guard let manager else { return }
        logger.info("a command from the fleet", metadata: ["task": "\(id)", "command": "\(command)"])
        own {
            switch command {
            case "pause": await manager.stop(id)
            case "remove": await manager.remove(id, deletingFiles: false)
            case "remove-files": await manager.remove(id, deletingFiles: true)
            default: break
            }
        }
    }

    private func rescue() {
        let queue = connection.beats, logger = self.logger
        let prune = hostSlots != nil
        own {
            if prune { try? await queue.pruneHostSlots() }
            do {
                let taken = try await queue.rescue()
                if !taken.isEmpty { logger.notice("took back the tasks of workers whose leases expired", metadata: ["tasks": "\(taken.count)"]) }
            } catch {
                logger.debug("rescue failed", metadata: ["error": "\(FleetQueue.describe(error))"])
            }
        }
    }

    private func claim(_ count: Int) {
        guard let worker else {
            event(.claimFailed(at: .now()))
            return
        }
        let queue = connection.queue
        own { [weak self] in
            do {
                let claims = try await queue.claim(worker: worker, count: count)
                await self?.accept(claims, worker: worker, asked: count)
            } catch {
                await self?.event(.claimFailed(at: .now()))
            }
        }
    }

    private func accept(_ claims: [FleetQueue.Claim], worker: Int64, asked: Int) async {
        // Lost meanwhile: the rescue queues these again (their owner is dead).
        guard worker == self.worker, let manager else { return }
        let decoder = JSONDecoder()
        var accepted = 0
        for claim in claims {
            guard let entity = try? decoder.decode(EntityRecord.self, from: Data(claim.entity.utf8)), entity.taskID.description == claim.key
            else {
                await markInvalid(claim, worker: worker, reason: "the task's entity could not be read")
                continue
            }
            let id = entity.taskID
            var record = claim.record.flatMap { try? decoder.decode(TaskRecord.self, from: Data($0.utf8)) }
                ?? TaskRecord(id: id, state: .waiting, mode: .download, weight: 0, sequence: 0)
            // A completed task whose merge is pending stays completed: the manager's restore merges it
            // (again: the last holder died or stopped during the merge). Any other runs from its journal.
            if !(record.state == .completed && record.manifest?.mergeIsPending == true) { record.state = .waiting }
            record.sequence = Int(clamping: claim.sequence)
            record.lastError = nil
            // The journal of the last holder becomes this epoch's (before anything runs).
            await Self.inheritJournal(root: settings.downloadRoot, id: id, epoch: claim.epoch)
            guard worker == self.worker else { return }
            fence.hold(id, epoch: claim.epoch)
            store.hold(StoredTask(entity: entity, task: record), epoch: claim.epoch)
            claimedAt[id] = .now()
            commanded.remove(id)
            accepted += 1
        }
        counters.claimed += accepted
        event(.claimed(count: accepted, asked: asked, at: .now()))
        guard accepted > 0 else { return }
        logger.info("claimed tasks", metadata: ["count": "\(accepted)", "worker": "\(worker)"])
        do {
            let report = try await manager.restore(resuming: true)
            for (id, error) in report.skipped where fence.isHeld(id) {
                // No plugin here for it (or its payload does not decode): another worker may do better.
                logger.warning("a claimed task cannot run here", metadata: ["task": "\(id)", "error": "\(error.message)"])
                if let epoch = fence.held[id] {
                    letGo(id, lost: false, state: nil, epoch: epoch)
                    let queue = connection.queue
                    own { _ = try? await queue.release(id.description, worker: worker, epoch: epoch) }
                }
            }
        } catch {
            logger.error("the claimed tasks could not be started", metadata: ["error": "\(error.message)"])
        }
    }

    private func markInvalid(_ claim: FleetQueue.Claim, worker: Int64, reason: String) async {
        logger.error("a claimed task is unreadable", metadata: ["task": "\(UntrustedText.printable(claim.key, limit: 200))"])
        _ = try? await connection.queue.write(
            key: claim.key, worker: worker, epoch: claim.epoch, state: "invalid", record: claim.record ?? "{}", title: "", lastError: reason)
    }

    private func suspendRuns() {
        guard let manager else { return }
        let ids = Array(fence.held.keys)
        logger.warning("the lease may have expired: runs suspended until it is renewed", metadata: ["tasks": "\(ids.count)"])
        store.setSuspended(ids, true)
        own { for id in ids { await manager.stop(id) } }
    }

    private func resumeRuns() {
        guard let manager else { return }
        let ids = Array(fence.held.keys)
        logger.notice("the lease was renewed: runs resume", metadata: ["tasks": "\(ids.count)"])
        let store = self.store
        own {
            for id in ids { _ = try? await manager.resume(id) }
            store.setSuspended(ids, false)
        }
    }

    private func dropAll() {
        if var slots = hostSlots, let manager {
            // The lease ended: its slots count no more; nothing new starts to a limited host.
            let actions = slots.handle(.leaseLost)
            hostSlots = slots
            own { for case .setLimit(let host, _) in actions { await manager.setHostLimit(nil, for: host) } }
        }
        let ids = fence.releaseAll()
        store.forgetAll()
        store.setWorker(nil)
        worker = nil
        claimedAt.removeAll()
        commanded.removeAll()
        counters.droppedAll += 1
        counters.lost += ids.count
        guard let manager else { return }
        own { for id in ids { await manager.remove(id) } }
    }

    /// A task is no longer held here: nothing more is written for it, and the manager forgets it
    /// (its files stay: the fence refuses the deletion).
    private func letGo(_ id: DownloadTaskID, lost: Bool, state: String?, epoch: Int64) {
        guard fence.release(id) else { return }
        store.forget(id)
        claimedAt[id] = nil
        commanded.remove(id)
        if lost {
            counters.lost += 1
            logger.warning("a task was taken over by another worker: dropped here without writing", metadata: ["task": "\(id)"])
        } else {
            counters.released += 1
        }
        event(.released(count: 1, at: .now()))
        guard let manager else { return }
        let root = settings.downloadRoot
        own {
            await manager.remove(id)
            if state == "completed" { await Self.removeOlderJournals(root: root, id: id, before: epoch) }
        }
    }

    private func storeNotice(_ notice: FleetStore.Notice) {
        switch notice {
        case .released(let id, let state, let epoch):
            letGo(id, lost: false, state: state, epoch: epoch)
        case .lost(let id):
            letGo(id, lost: true, state: nil, epoch: fence.held[id] ?? 0)
        }
    }

    private func handBack() {
        let manager = self.manager, ids = Array(fence.held.keys), store = self.store, fence = self.fence
        let worker = self.worker, queue = connection.queue, logger = self.logger
        store.setSuspended(ids, true)
        own { [weak self] in
            if let manager {
                for id in ids { await manager.stop(id) }
                for id in ids { _ = await manager.wait(for: id) }
            }
            _ = fence.releaseAll()
            store.forgetAll()
            if let worker {
                do {
                    let keys = try await queue.handBack(worker: worker)
                    logger.notice("left the fleet; tasks handed back", metadata: ["worker": "\(worker)", "tasks": "\(keys.count)"])
                } catch {
                    logger.warning("could not hand the tasks back: the others take them when the lease expires", metadata: [
                        "error": "\(FleetQueue.describe(error))",
                    ])
                }
            }
            await self?.event(.handedBack(at: .now()))
        }
    }

    private func finish() {
        finished = true
        for waiter in finishWaiters { waiter.resume() }
        finishWaiters.removeAll()
    }

    // MARK: - Wake-ups

    /// A NOTIFY: claim now.
    func woken() {
        guard !finished else { return }
        event(.woken(at: .now()))
    }

    private func listen() -> Task<Void, Never> {
        let client = connection.beatsClient, channel = FleetQueue.channel
        return Task { [weak self] in
            while !Task.isCancelled {
                do {
                    try await client.withConnection { connection in
                        try await connection.listen(on: channel) { notifications in
                            // (Listening again after a drop: a wake-up may have been missed.)
                            await self?.woken()
                            for try await _ in notifications { await self?.woken() }
                        }
                    }
                } catch {}
                try? await Task.sleep(for: .milliseconds(250))
            }
        }
    }

    // MARK: - Owned tasks

    private func own(_ body: @escaping @Sendable () async -> Void) {
        let key = UUID()
        owned[key] = Task { [weak self] in
            await body()
            await self?.disown(key)
        }
    }

    private func disown(_ key: UUID) {
        owned[key] = nil
    }

    // MARK: - Journals on the shared root

    /// Copies the newest journal of an earlier holder (`epoch - 1` down to 1, then the unnamed one
    /// of a single process) to this epoch's name, unless this epoch has one. Blocking file work, on
    /// NIO's thread pool.
    static func inheritJournal(root: String, id: DownloadTaskID, epoch: Int64) async {
        _ = try? await NIOThreadPool.singleton.runIfActive {
            let mine = TaskJournalFiles.basePath(root: root, id: id, epoch: UInt64(clamping: epoch))
            let manager = FileManager.default
            guard !manager.fileExists(atPath: mine + ".a"), !manager.fileExists(atPath: mine + ".b") else { return }
            var source: String?
            var earlier = epoch - 1
            while earlier >= 1, source == nil {
                let base = TaskJournalFiles.basePath(root: root, id: id, epoch: UInt64(earlier))
                if manager.fileExists(atPath: base + ".a") || manager.fileExists(atPath: base + ".b") { source = base }
                earlier -= 1
            }
            if source == nil {
                let base = TaskJournalFiles.basePath(root: root, id: id, epoch: nil)
                if manager.fileExists(atPath: base + ".a") || manager.fileExists(atPath: base + ".b") { source = base }
            }
            guard let source else { return }
            for suffix in TaskJournalFiles.suffixes {
                guard let bytes = manager.contents(atPath: source + suffix) else { continue }
                let temporary = mine + suffix + ".tmp"
                guard manager.createFile(atPath: temporary, contents: bytes) else { continue }
                if rename(temporary, mine + suffix) != 0 { unlink(temporary) }
            }
        }
    }

    /// Deletes the journals of the epochs before `epoch` (the task completed under it).
    static func removeOlderJournals(root: String, id: DownloadTaskID, before epoch: Int64) async {
        _ = try? await NIOThreadPool.singleton.runIfActive {
            var bases = [TaskJournalFiles.basePath(root: root, id: id, epoch: nil)]
            var earlier = epoch - 1
            while earlier >= 1 {
                bases.append(TaskJournalFiles.basePath(root: root, id: id, epoch: UInt64(earlier)))
                earlier -= 1
            }
            for base in bases {
                for suffix in TaskJournalFiles.suffixes { unlink(base + suffix) }
            }
        }
    }
}
