/// Decides what runs: which task starts next, which task gets a freed segment slot, what a
/// command, a run's ending or a change of disk and network does to every task's state.
///
/// A plain value, like async-http-client's connection-pool state machine: it takes an
/// ``Event`` and returns the ``Action``s to perform, and touches nothing else: no network, no
/// clock, no files, no actor. ``DownloadTaskManager`` holds one, feeds it and applies what it
/// returns; the tests in `SchedulerTests` drive it alone.
///
/// The rules, in one place:
/// - **Queue.** Waiting tasks start heaviest first, then in the order they were added. A task
///   started or resumed by a command jumps ahead of every task that never ran (it gets the
///   highest weight so far), as in ZZDownloader.
/// - **Task slots (`-j`).** At most ``Limits/tasks`` tasks are *active*: resolving, or downloading
///   with segments still waiting for a slot. A task whose remaining segments are all in flight
///   no longer holds its task slot, so a list of small files flows through the segment slots
///   instead of waiting for each file's last byte.
/// - **Segment slots (`-N`).** At most ``Limits/segments`` segment transfers over all tasks, and
///   ``Limits/segmentsPerHost`` to one host. A running task may hold at most
///   `segments - (tasks wanting slots - 1)`; a freed slot goes to the task holding the fewest,
///   the heavier first among equals, then the earlier added. A host may have a limit of its own
///   below that (``Event/hostLimit(_:_:)``, a fleet's share of a fleet-wide limit), and hosts
///   without one a common limit (``Event/unlistedHostLimit(_:)``); every grant reads
///   ``hostCap(_:)``. Lowering a limit stops nothing: transfers above it run to their end.
/// - **State.** Every change follows ``DownloadTaskState/transitions``; a refused one is reported,
///   never applied.
/// - **Environment.** A critical disk stops every running task (`interrupted(diskSpace)`) and
///   starts none; space back above the warning level resumes them. Tasks that lost the network
///   wait (`interrupted(network)`), resume when the monitor or a probe of their host says it is
///   back, and fail after ``Limits/maxNetworkWait``. A metered network holds tasks back unless
///   allowed.
struct Scheduler: Sendable {
    /// The limits a manager's configuration gives.
    struct Limits: Sendable, Hashable {
        /// Active tasks at once (`-j`).
        var tasks: Int
        /// Segment transfers at once, over all tasks (`-N`).
        var segments: Int
        /// Segment transfers at once to one host.
        var segmentsPerHost: Int
        /// Whether tasks may start on a metered network.
        var allowsMeteredNetwork = true
        /// How long a task waits for the network before it fails; `nil` for as long as it takes.
        var maxNetworkWait: Duration?
    }

    /// How a run ended.
    enum RunEnding: Sendable, Equatable {
        /// Every output is complete and verified.
        case completed
        /// The run gave up; `permanent` when the task cannot succeed as it is (→ `invalid`).
        case failed(permanent: Bool)
        /// A write found the disk full.
        case diskFull
        /// Every host of a segment (or the manifest) was unreachable; `host` is the one to probe.
        case networkLost(host: String?)
        /// The run was cancelled (a command, a shutdown): the state stays as the command set it.
        case stopped
    }

    /// Something that happened.
    enum Event: Sendable {
        /// A new task, `idle`; queued at once when `start`.
        case added(TaskHandle, sequence: Int, start: Bool)
        /// A task as the store had it: its state, weight and place (nothing is launched until
        /// the manager sends ``schedule``).
        case restored(TaskHandle, sequence: Int, weight: Int, state: DownloadTaskState)
        /// `start` of a known task: queued again, ahead of the others, unless it is running or
        /// waiting, or completed (and `redo` false: a completed task runs again when its mode
        /// changed or an output is gone).
        case start(TaskHandle, redo: Bool)
        /// `resume`: a paused, failed, invalid, idle or interrupted task is queued ahead.
        case resume(TaskHandle)
        /// `startAll`, for one task: queued (not ahead) unless a command touched it since `epoch`.
        case startIfUntouched(TaskHandle, since: Int)
        /// `stop`: paused, wherever it is.
        case stop(TaskHandle)
        /// `stopAll`: every one paused first, then nothing waiting is left to launch (stopping one
        /// at a time would launch the next waiting task each time, only to stop it).
        case stopMany([TaskHandle])
        /// `remove`: stopped and forgotten.
        case remove(TaskHandle)
        /// Launch what can be launched (after a batch of events).
        case schedule
        /// The run of `generation` has its manifest and downloads; `demand` is the segment slots
        /// it wants at once, by host (given here, not after, so the task never looks idle between).
        case resolved(TaskHandle, generation: Int, demand: [String: Int])
        /// The run of `generation` resolves again (stale URLs).
        case reResolving(TaskHandle, generation: Int)
        /// The run wants `count` more segment slots for `host`.
        case demand(TaskHandle, generation: Int, host: String, count: Int)
        /// The run of `generation` wants at most `slots` segment slots from now on (`nil`: as many
        /// as its share): under a rate limit, more transfers in flight add no speed, only bytes a
        /// server writes ahead.
        case cap(TaskHandle, generation: Int, slots: Int?)
        /// The run gives back `count` slots of `host` (transfers ended) and withdraws `withdrawn`
        /// of its demand for it (segments it no longer needs a slot for).
        case returned(TaskHandle, generation: Int, host: String, count: Int, withdrawn: Int = 0)
        /// The run of `generation` ended.
        case ended(TaskHandle, generation: Int, RunEnding)
        /// Free space moved to another level.
        case diskLevel(DiskSpaceLevel, free: String)
        /// The network monitor reported.
        case network(NetworkStatus)
        /// A probe reached `host`: the tasks waiting for it go again.
        case hostReachable(String)
        /// A task's network wait number `wait` ran out.
        case networkWaitExpired(TaskHandle, wait: Int)
        /// At most `limit` transfers to `host` from now on, below ``Limits/segmentsPerHost``;
        /// `nil` clears the host's own limit (it falls back to ``unlistedHostLimit``).
        case hostLimit(String, Int?)
        /// The limit of every host without one of its own (`nil`: none but
        /// ``Limits/segmentsPerHost``). Under a fleet-wide limit it is 0: a host not yet leased
        /// gets no transfer until its worker holds slots for it.
        case unlistedHostLimit(Int?)
    }

    /// What the manager does.
    enum Action: Sendable, Equatable {
        /// Start a run of the task with this generation.
        case launch(TaskHandle, generation: Int)
        /// Cancel the task's run.
        case cancel(TaskHandle)
        /// The task's run may hold at most `limit` segment slots from now on: it gives back slots
        /// above it as their transfers end, instead of starting its next segment on them.
        case share(TaskHandle, generation: Int, limit: Int)
        /// The task's state changed: persist it and tell subscribers.
        case changed(TaskHandle, from: DownloadTaskState, to: DownloadTaskState)
        /// The task's run may start `count` more segment transfers to `host`.
        case grant(TaskHandle, generation: Int, host: String, count: Int)
        /// Arm a timer: after `after`, send ``Event/networkWaitExpired(_:wait:)``.
        case armNetworkWait(TaskHandle, wait: Int, after: Duration)
        /// Probe the hosts of tasks waiting for the network until none waits.
        case startProbing
        /// Tell subscribers about the environment.
        case notice(DownloadNotice)
        /// Tell subscribers that the task starts on a metered network (`allowed`), or waits for
        /// an unmetered one.
        case meteredNetwork(TaskHandle, allowed: Bool)
        /// A transition the table forbids was asked for (a bug): log it.
        case refused(TaskHandle, from: DownloadTaskState, to: DownloadTaskState)
    }

    /// One task, as scheduling sees it.
    struct Entry: Sendable, Hashable {
        var state: DownloadTaskState
        var weight = 0
        let sequence: Int
        /// Counts runs; reports of an older run are ignored.
        var generation = 0
        /// Counts queue entries; an entry of an older version is stale.
        var queueVersion = 0
        /// The last command that touched the task (see ``startIfUntouched``).
        var touchedAt = 0
        /// Segments waiting for a slot, by host.
        var demand: HostCounts = [:]
        /// Slots held, by host.
        var held: HostCounts = [:]
        var heldTotal = 0
        var demandTotal = 0
        /// How many times the task went to `interrupted(network)`.
        var networkWaits = 0
        /// The host a probe tries for a task waiting for the network.
        var probeHost: String?
        /// The share last told to the task's run.
        var sentShare: Int?
        /// The most slots its run wants at once (``Event/cap(_:generation:slots:)``).
        var cap: Int?
        /// Whether the task is counted in ``Scheduler/activeCount`` (running and active).
        var countedActive = false
        /// Whether the task is counted in ``Scheduler/manyWanting`` (running, wanting more than
        /// one slot in all).
        var countedMany = false
        /// Whether the task is in ``Scheduler/oneSlotWaiting`` (running, wanting one slot in all
        /// and waiting for it).
        var inOneSlotWaiting = false
        /// Whether the task is in ``Scheduler/shareDue`` (running, wanting one slot in all, not
        /// yet told its share of one).
        var inShareDue = false

        var isRunning: Bool { state.isRunning }
        /// Slots it wants in all: held and waited for.
        var wantsInAll: Int { heldTotal + demandTotal }
        /// Wants one slot in all and has not been told its share of one (when it runs).
        var isOwedShareOfOne: Bool { wantsInAll == 1 && sentShare != 1 }
        /// Resolving, or downloading with segments waiting: holds a task slot.
        var isActive: Bool { state == .resolving || (state == .downloading && demandTotal > 0) }
    }

    private(set) var limits: Limits
    private(set) var entries = HandleTable<Entry>()
    private var queue = PriorityQueue<QueueEntry>()
    /// How many tasks wait in the queue to be launched, at most. (An entry a later command made
    /// stale counts until the queue reaches it.)
    var queuedCount: Int { queue.count }
    /// Tasks with a live run (resolving or downloading).
    private(set) var running = HandleSet()
    /// Whether slots are handed out by ``grantSingleSlots(into:)`` when every running task wants
    /// one (tests turn it off to compare it with the general rule).
    var singleSlotFastPath = true
    /// Running tasks that want more than one slot in all (held and waiting): while there is one,
    /// slots go by the general rule.
    private(set) var manyWanting = 0
    /// Running tasks that want one slot in all and wait for it, in the order they get it:
    /// heaviest first, then the earlier added. Kept as their counts change (``reindex(_:)``), so
    /// an event costs what it grants, not a walk over every running task.
    private(set) var oneSlotWaiting: [OneSlotWaiting] = []
    /// Running tasks that want one slot in all and may not have been told their share of one
    /// (each once; a task whose share was told since is passed over).
    private var shareDue: [TaskHandle] = []
    /// ``grantSingleSlots(into:)``'s lists, kept with their capacity between events.
    private var scratch = SingleSlotLists()

    /// The order tasks are served in, among equals of the rule at hand (a place in the queue, a
    /// slot): the heavier first, then the earlier added.
    static func isServedFirst(weight: Int, sequence: Int, before other: (weight: Int, sequence: Int)) -> Bool {
        weight != other.weight ? weight > other.weight : sequence < other.sequence
    }

    /// A task in ``oneSlotWaiting``: its place (its weight does not change while it runs).
    struct OneSlotWaiting: Sendable, Hashable {
        var weight: Int
        var sequence: Int
        var id: TaskHandle

        /// Whether it gets a slot before `other`.
        func comesBefore(_ other: OneSlotWaiting) -> Bool {
            Scheduler.isServedFirst(weight: weight, sequence: sequence, before: (other.weight, other.sequence))
        }
    }

    private struct SingleSlotLists: Sendable, Hashable {
        var shares: [Pair] = []
        var granted: [Granted] = []

        struct Pair: Sendable, Hashable { var sequence: Int; var id: TaskHandle }
        struct Granted: Sendable, Hashable { var sequence: Int; var id: TaskHandle; var host: String }

        mutating func clear() {
            shares.removeAll(keepingCapacity: true)
            granted.removeAll(keepingCapacity: true)
        }
    }
    private(set) var segmentsInUse = 0
    /// The most segment slots ever held at once.
    private(set) var peakSegmentsInUse = 0
    private var hostsInUse: [String: Int] = [:]
    /// Limits of single hosts below ``Limits/segmentsPerHost`` (``Event/hostLimit(_:_:)``).
    private(set) var hostLimits: [String: Int] = [:]
    /// The limit of hosts not in ``hostLimits`` (``Event/unlistedHostLimit(_:)``).
    private(set) var unlistedHostLimit: Int?
    private var topWeight = 0
    /// Counts commands (see ``Entry/touchedAt``).
    private(set) var epoch = 0
    private(set) var disk = DiskSpaceLevel.ample
    private(set) var network: NetworkStatus

    init(limits: Limits, network: NetworkStatus = .online) {
        self.limits = Limits(
            tasks: max(1, limits.tasks), segments: max(1, limits.segments),
            segmentsPerHost: max(1, limits.segmentsPerHost), allowsMeteredNetwork: limits.allowsMeteredNetwork,
            maxNetworkWait: limits.maxNetworkWait)
        self.network = network
    }

    /// Changes how many tasks may be active at once (at least 1). Fewer does not stop running
    /// tasks: the next ones wait until the active count is under the new limit.
    mutating func setTaskLimit(_ tasks: Int) {
        limits.tasks = max(1, tasks)
    }

    /// The task's state, if it is known.
    func state(of id: TaskHandle) -> DownloadTaskState? { entries[id]?.state }

    /// The task's scheduling entry.
    func entry(_ id: TaskHandle) -> Entry? { entries[id] }

    /// The task's weight (0 when unknown).
    func weight(of id: TaskHandle) -> Int { entries[id]?.weight ?? 0 }

    /// The generation of the task's current (or last) run, if the task is known.
    func generation(of id: TaskHandle) -> Int? { entries[id]?.generation }

    /// Tasks holding a task slot now.
    private(set) var activeCount = 0

    /// How many transfers `host` may have at once: the least of ``Limits/segmentsPerHost`` and
    /// the host's own limit (or the limit of unlisted hosts). The one rule both grant paths read.
    func hostCap(_ host: String) -> Int {
        min(limits.segmentsPerHost, hostLimits[host] ?? unlistedHostLimit ?? .max)
    }

    /// Sets a host limit (`nil`: none; below 0: 0); whether it changed.
    private static func change(_ current: inout Int?, to limit: Int?) -> Bool {
        let limit = limit.map { max(0, $0) }
        guard current != limit else { return false }
        current = limit
        return true
    }

    /// Segment slots held now, by host (transfers in flight or about to start).
    var transfersByHost: [String: Int] { hostsInUse }

    /// Segment slots running tasks wait for, by host.
    var demandByHost: [String: Int] {
        var demand: [String: Int] = [:]
        for id in running {
            guard let entry = entries[id], entry.demandTotal > 0 else { continue }
            for (host, count) in entry.demand where count > 0 { demand[host, default: 0] += count }
        }
        return demand
    }

    /// Counts the task in ``activeCount`` and ``manyWanting``, and places it in
    /// ``oneSlotWaiting`` and ``shareDue``, or not, as it stands now: called after every change
    /// of its state, its demand, its held slots or its place among the running tasks (and with
    /// `removing`, before it is forgotten).
    private mutating func reindex(_ id: TaskHandle, removing: Bool = false) {
        guard let entry = entries[id] else { return }
        let isRunning = !removing && running.contains(id)
        let active = isRunning && entry.isActive
        let many = isRunning && entry.wantsInAll > 1
        let waitsForOne = isRunning && entry.wantsInAll == 1 && entry.demandTotal == 1
        let shareDue = isRunning && entry.isOwedShareOfOne
        if active != entry.countedActive {
            entries[id]!.countedActive = active
            activeCount += active ? 1 : -1
        }
        if many != entry.countedMany {
            entries[id]!.countedMany = many
            manyWanting += many ? 1 : -1
        }
        if waitsForOne != entry.inOneSlotWaiting {
            entries[id]!.inOneSlotWaiting = waitsForOne
            if waitsForOne {
                let place = OneSlotWaiting(weight: entry.weight, sequence: entry.sequence, id: id)
                // (Most tasks come last: the queue launches them in this order.)
                var index = oneSlotWaiting.endIndex
                while index > 0, place.comesBefore(oneSlotWaiting[index - 1]) { index -= 1 }
                oneSlotWaiting.insert(place, at: index)
            } else if let index = oneSlotWaiting.firstIndex(where: { $0.id == id }) {
                oneSlotWaiting.remove(at: index)
            }
        }
        if shareDue, !entry.inShareDue {
            entries[id]!.inShareDue = true
            self.shareDue.append(id)
        }
    }

    /// Starts a new command; events it causes carry this epoch.
    mutating func beginCommand() -> Int {
        epoch += 1
        return epoch
    }

    // MARK: - Events

    mutating func handle(_ event: Event) -> [Action] {
        // (Room for an event's usual few actions at once, not grown one by one.)
        var actions: [Action] = []
        actions.reserveCapacity(4)
        switch event {
        case .added(let id, let sequence, let start):
            guard entries[id] == nil else { return [] }
            entries[id] = Entry(state: .idle, sequence: sequence, touchedAt: epoch)
            if start {
                enqueue(id, jumpAhead: false, into: &actions)
                launchWaiting(into: &actions)
            }

        case .restored(let id, let sequence, let weight, let state):
            guard entries[id] == nil else { return [] }
            var entry = Entry(state: state, weight: weight, sequence: sequence)
            entry.touchedAt = 0
            entries[id] = entry
            topWeight = max(topWeight, weight)
            if state == .waiting {
                entries[id]!.queueVersion += 1
                queue.push(QueueEntry(weight: weight, sequence: sequence, id: id, version: entries[id]!.queueVersion))
            }

        case .start(let id, let redo):
            guard let entry = entries[id] else { return [] }
            entries[id]!.touchedAt = epoch
            if entry.isRunning || entry.state == .waiting { return [] }
            if entry.state == .completed, !redo { return [] }
            enqueue(id, jumpAhead: true, into: &actions)
            launchWaiting(into: &actions)

        case .resume(let id):
            guard let entry = entries[id] else { return [] }
            entries[id]!.touchedAt = epoch
            guard [.paused, .failed, .invalid, .idle, .interrupted].contains(entry.state.kind) else { return [] }
            enqueue(id, jumpAhead: true, into: &actions)
            launchWaiting(into: &actions)

        case .startIfUntouched(let id, let since):
            guard let entry = entries[id], entry.touchedAt < since,
                [.paused, .failed, .invalid, .idle].contains(entry.state.kind)
            else { return [] }
            enqueue(id, jumpAhead: false, into: &actions)

        case .stop(let id):
            guard let entry = entries[id] else { return [] }
            entries[id]!.touchedAt = epoch
            guard [.idle, .waiting, .resolving, .downloading, .interrupted].contains(entry.state.kind) else { return [] }
            halt(id, into: &actions)
            transition(id, to: .paused, into: &actions)
            launchWaiting(into: &actions)

        case .stopMany(let ids):
            for id in ids {
                guard let entry = entries[id] else { continue }
                entries[id]!.touchedAt = epoch
                guard [.idle, .waiting, .resolving, .downloading, .interrupted].contains(entry.state.kind) else { continue }
                halt(id, into: &actions)
                transition(id, to: .paused, into: &actions)
            }
            launchWaiting(into: &actions)

        case .remove(let id):
            guard entries[id] != nil else { return [] }
            halt(id, into: &actions)
            transition(id, to: .removed, into: &actions)
            reindex(id, removing: true)
            entries[id] = nil
            launchWaiting(into: &actions)

        case .schedule:
            launchWaiting(into: &actions)

        case .resolved(let id, let generation, let demand):
            guard isCurrent(id, generation), entries[id]?.state == .resolving else { return [] }
            transition(id, to: .downloading, into: &actions)
            for (host, count) in demand where count > 0 {
                entries[id]!.demand[host, default: 0] += count
                entries[id]!.demandTotal += count
            }
            reindex(id)
            grantSlots(into: &actions)
            launchWaiting(into: &actions)

        case .reResolving(let id, let generation):
            guard isCurrent(id, generation), entries[id]?.state == .downloading else { return [] }
            transition(id, to: .resolving, into: &actions)

        case .demand(let id, let generation, let host, let count):
            guard isCurrent(id, generation), entries[id]?.isRunning == true, count > 0 else { return [] }
            entries[id]!.demand[host, default: 0] += count
            entries[id]!.demandTotal += count
            reindex(id)
            grantSlots(into: &actions)

        case .cap(let id, let generation, let slots):
            guard isCurrent(id, generation), entries[id]?.isRunning == true else { return [] }
            entries[id]!.cap = slots.map { max(1, $0) }
            grantSlots(into: &actions)

        case .returned(let id, let generation, let host, let count, let withdrawn):
            guard isCurrent(id, generation), entries[id]?.isRunning == true else { return [] }
            release(id, host: host, count: count)
            withdraw(id, host: host, count: withdrawn)
            grantSlots(into: &actions)
            launchWaiting(into: &actions)

        case .ended(let id, let generation, let ending):
            guard isCurrent(id, generation), let entry = entries[id], entry.isRunning else { return [] }
            stopRunning(id)
            switch ending {
            case .completed:
                transition(id, to: .completed, into: &actions)
            case .failed(let permanent):
                transition(id, to: permanent ? .invalid : .failed, into: &actions)
            case .stopped:
                // The run went away without a command (the manager shuts down): as if paused.
                transition(id, to: .paused, into: &actions)
            case .diskFull:
                transition(id, to: .interrupted(.diskSpace), into: &actions)
                if disk != .critical { enterCriticalDisk("a write found the disk full", into: &actions) }
            case .networkLost(let host):
                entries[id]!.networkWaits += 1
                entries[id]!.probeHost = host
                transition(id, to: .interrupted(.network), into: &actions)
                if let limit = limits.maxNetworkWait {
                    actions.append(.armNetworkWait(id, wait: entries[id]!.networkWaits, after: limit))
                }
                actions.append(.startProbing)
            }
            grantSlots(into: &actions)
            launchWaiting(into: &actions)

        case .diskLevel(let level, let free):
            guard level != disk else { return [] }
            let previous = disk
            switch level {
            case .critical:
                enterCriticalDisk(free, into: &actions)
            case .low, .ample:
                disk = level
                if previous == .critical {
                    actions.append(.notice(DownloadNotice(kind: .diskSpaceRecovered, message: "downloads resume: \(free)")))
                    resumeInterrupted(.diskSpace, into: &actions)
                }
                if level == .low {
                    actions.append(.notice(DownloadNotice(kind: .diskSpaceLow, message: "disk space is low: \(free)")))
                }
            }
            launchWaiting(into: &actions)

        case .network(let status):
            let previous = network
            network = status
            if previous.isOnline, !status.isOnline {
                actions.append(.notice(DownloadNotice(kind: .networkLost, message: "the network is gone; waiting for it")))
            } else if !previous.isOnline, status.isOnline {
                actions.append(.notice(DownloadNotice(kind: .networkRestored, message: "the network is back (\(status))")))
            }
            if status.isOnline {
                resumeInterrupted(.network, into: &actions)
                if !status.isMetered || limits.allowsMeteredNetwork { resumeInterrupted(.meteredNetwork, into: &actions) }
            }
            launchWaiting(into: &actions)

        case .hostReachable(let host):
            for id in ids(where: { $0.state == .interrupted(.network) && $0.probeHost == host }) {
                enqueue(id, jumpAhead: false, into: &actions)
            }
            launchWaiting(into: &actions)

        case .networkWaitExpired(let id, let wait):
            guard let entry = entries[id], entry.networkWaits == wait, entry.state == .interrupted(.network) else { return [] }
            transition(id, to: .failed, into: &actions)
            launchWaiting(into: &actions)

        case .hostLimit(let host, let limit):
            guard Self.change(&hostLimits[host], to: limit) else { return [] }
            grantSlots(into: &actions)

        case .unlistedHostLimit(let limit):
            guard Self.change(&unlistedHostLimit, to: limit) else { return [] }
            grantSlots(into: &actions)
        }
        return actions
    }

    /// The hosts to probe for tasks waiting for the network; empty when none waits.
    var hostsToProbe: [String] {
        var seen = Set<String>()
        return entries.values.sorted { $0.sequence < $1.sequence }
            .compactMap { $0.state == .interrupted(.network) ? $0.probeHost : nil }
            .filter { seen.insert($0).inserted }
    }

    /// Whether any task waits for the network.
    var anyWaitsForNetwork: Bool { entries.values.contains { $0.state == .interrupted(.network) } }

    // MARK: - Rules

    private func isCurrent(_ id: TaskHandle, _ generation: Int) -> Bool {
        entries[id]?.generation == generation
    }

    private func ids(where predicate: (Entry) -> Bool) -> [TaskHandle] {
        entries.pairs.filter { predicate($0.value) }.sorted { $0.value.sequence < $1.value.sequence }.map(\.key)
    }

    private mutating func transition(_ id: TaskHandle, to next: DownloadTaskState, into actions: inout [Action]) {
        guard let current = entries[id]?.state else { return }
        guard current.canTransition(to: next) else {
            actions.append(.refused(id, from: current, to: next))
            return
        }
        entries[id]!.state = next
        reindex(id)
        actions.append(.changed(id, from: current, to: next))
    }

    /// Moves a task to `waiting`; `jumpAhead` gives it the highest weight so far.
    private mutating func enqueue(_ id: TaskHandle, jumpAhead: Bool, into actions: inout [Action]) {
        guard entries[id] != nil else { return }
        if jumpAhead {
            topWeight += 1
            entries[id]!.weight = topWeight
        }
        transition(id, to: .waiting, into: &actions)
        guard entries[id]!.state == .waiting else { return }
        entries[id]!.queueVersion += 1
        let entry = entries[id]!
        queue.push(QueueEntry(weight: entry.weight, sequence: entry.sequence, id: id, version: entry.queueVersion))
    }

    /// Starts waiting tasks, heaviest first, while task slots are free.
    private mutating func launchWaiting(into actions: inout [Action]) {
        guard disk != .critical, !queue.isEmpty else { return }
        while activeCount < limits.tasks, let next = queue.pop() {
            guard let entry = entries[next.id], entry.state == .waiting, entry.queueVersion == next.version else { continue }
            if network.isOnline, network.isMetered {
                let allowed = limits.allowsMeteredNetwork
                actions.append(.meteredNetwork(next.id, allowed: allowed))
                if !allowed {
                    transition(next.id, to: .interrupted(.meteredNetwork), into: &actions)
                    continue
                }
            }
            entries[next.id]!.generation += 1
            transition(next.id, to: .resolving, into: &actions)
            running.insert(next.id)
            reindex(next.id)
            actions.append(.launch(next.id, generation: entries[next.id]!.generation))
        }
    }

    /// Cancels a running task's run and gives its slots back.
    private mutating func halt(_ id: TaskHandle, into actions: inout [Action]) {
        guard let entry = entries[id] else { return }
        entries[id]!.generation += 1
        if entry.isRunning {
            actions.append(.cancel(id))
            stopRunning(id)
            grantSlots(into: &actions)
        }
    }

    private mutating func stopRunning(_ id: TaskHandle) {
        guard let entry = entries[id] else { return }
        entries[id]!.sentShare = nil
        entries[id]!.cap = nil
        for (host, count) in entry.held { release(id, host: host, count: count) }
        entries[id]!.demand.removeAll()
        entries[id]!.demandTotal = 0
        running.remove(id)
        reindex(id)
    }

    private mutating func release(_ id: TaskHandle, host: String, count: Int) {
        guard count > 0, let held = entries[id]?.held[host] else { return }
        let freed = min(count, held)
        entries[id]!.held[host] = held - freed == 0 ? nil : held - freed
        entries[id]!.heldTotal -= freed
        segmentsInUse -= freed
        let inUse = (hostsInUse[host] ?? 0) - freed
        hostsInUse[host] = inUse <= 0 ? nil : inUse
        reindex(id)
    }

    private mutating func withdraw(_ id: TaskHandle, host: String, count: Int) {
        guard count > 0, let demand = entries[id]?.demand[host] else { return }
        let withdrawn = min(count, demand)
        entries[id]!.demand[host] = demand - withdrawn == 0 ? nil : demand - withdrawn
        entries[id]!.demandTotal -= withdrawn
        reindex(id)
    }

    /// Hands free segment slots to running tasks that want them, fairest first.
    private mutating func grantSlots(into actions: inout [Action]) {
        if singleSlotFastPath, grantSingleSlots(into: &actions) { return }
        defer { clearShareDue() }
        // One look at each running task (hashing an identity is the expensive part).
        struct Contender {
            let id: TaskHandle
            let sequence: Int
            let weight: Int
            let generation: Int
            var held: Int
            var demand: Int
            var cap: Int?
            var hosts: HostCounts
            /// The hosts it wants slots for, by name (the order they are served in).
            var hostOrder: [String] = []
            var sentShare: Int?
            var share = 0
            var granted: [String: Int] = [:]
        }
        var contenders: [Contender] = []
        contenders.reserveCapacity(running.count)
        var anyDemand = false
        for id in running {
            guard let entry = entries[id], entry.demandTotal > 0 || entry.heldTotal > 0 else { continue }
            anyDemand = anyDemand || entry.demandTotal > 0
            contenders.append(Contender(
                id: id, sequence: entry.sequence, weight: entry.weight, generation: entry.generation, held: entry.heldTotal,
                demand: entry.demandTotal, cap: entry.cap, hosts: entry.demand, sentShare: entry.sentShare))
        }
        guard !contenders.isEmpty else { return }
        contenders.sort { $0.sequence < $1.sequence }
        // Max-min fair shares: tasks that want less than an equal share get what they want, the
        // rest is split equally among the others (at least one slot each).
        var left = limits.segments
        func share(rank: Int, index: Int) {
            let equal = max(1, left / (contenders.count - rank))
            let share = max(1, min(contenders[index].held + contenders[index].demand, equal, contenders[index].cap ?? .max))
            contenders[index].share = share
            left = max(0, left - share)
        }
        let firstWant = contenders[0].held + contenders[0].demand
        if contenders.allSatisfy({ $0.held + $0.demand == firstWant }) {
            // All want as much (a list of small files: one slot each): in order already.
            for index in contenders.indices { share(rank: index, index: index) }
        } else {
            let byWant = contenders.indices.sorted {
                contenders[$0].held + contenders[$0].demand < contenders[$1].held + contenders[$1].demand
            }
            for (rank, index) in byWant.enumerated() { share(rank: rank, index: index) }
        }
        // Tell runs their share when it changes: one over it gives slots back as transfers end.
        for contender in contenders where contender.sentShare != contender.share {
            entries[contender.id]!.sentShare = contender.share
            actions.append(.share(contender.id, generation: contender.generation, limit: contender.share))
        }
        guard anyDemand, segmentsInUse < limits.segments else { return }
        for index in contenders.indices where contenders[index].demand > 0 {
            contenders[index].hostOrder = contenders[index].hosts.count == 1
                ? Array(contenders[index].hosts.keys) : contenders[index].hosts.keys.sorted()
        }
        while segmentsInUse < limits.segments {
            var best: Int?
            var bestHost = ""
            for index in contenders.indices {
                let contender = contenders[index]
                guard contender.demand > 0, contender.held < contender.share else { continue }
                guard let host = contender.hostOrder.first(where: {
                    (contender.hosts[$0] ?? 0) > 0 && (hostsInUse[$0] ?? 0) < hostCap($0)
                })
                else { continue }
                if let current = best {
                    let other = contenders[current]
                    let better = contender.held != other.held ? contender.held < other.held
                        : Self.isServedFirst(weight: contender.weight, sequence: contender.sequence, before: (other.weight, other.sequence))
                    guard better else { continue }
                }
                best = index
                bestHost = host
            }
            guard let index = best else { break }
            contenders[index].held += 1
            contenders[index].demand -= 1
            contenders[index].hosts[bestHost, default: 0] -= 1
            contenders[index].granted[bestHost, default: 0] += 1
            segmentsInUse += 1
            peakSegmentsInUse = max(peakSegmentsInUse, segmentsInUse)
            hostsInUse[bestHost, default: 0] += 1
        }
        for contender in contenders where !contender.granted.isEmpty {
            func grant(_ host: String, _ count: Int) {
                withdraw(contender.id, host: host, count: count)
                entries[contender.id]!.held[host, default: 0] += count
                entries[contender.id]!.heldTotal += count
                reindex(contender.id)
                actions.append(.grant(contender.id, generation: contender.generation, host: host, count: count))
            }
            if contender.granted.count == 1, let (host, count) = contender.granted.first {
                grant(host, count)
            } else {
                for (host, count) in contender.granted.sorted(by: { $0.key < $1.key }) { grant(host, count) }
            }
        }
    }

    /// ``grantSlots(into:)`` when every running task with slots or demand wants one slot in all
    /// (a list of small files): each one's fair share is then that slot, and the tasks waiting
    /// for one get it by weight, then age, while slots and their hosts' slots last. The same
    /// actions in the same order as the general rule, from the indexes ``reindex(_:)`` keeps
    /// (``manyWanting``, ``oneSlotWaiting``, ``shareDue``) instead of a look at every running
    /// task at every event. Returns `false`, having done nothing, when some task wants more.
    private mutating func grantSingleSlots(into actions: inout [Action]) -> Bool {
        guard manyWanting == 0 else { return false }
        // (The lists live in `scratch` between events: an event allocates nothing.)
        var lists = scratch
        scratch = SingleSlotLists()
        defer {
            lists.clear()
            scratch = lists
        }
        if !shareDue.isEmpty {
            for id in shareDue {
                guard let entry = entries[id], entry.inShareDue else { continue }
                entries[id]!.inShareDue = false
                // (Due when it was listed; passed over if it runs no more, wants otherwise, or was told.)
                guard entry.isOwedShareOfOne, running.contains(id) else { continue }
                lists.shares.append(.init(sequence: entry.sequence, id: id))
            }
            shareDue.removeAll(keepingCapacity: true)
            if lists.shares.count > 1 { lists.shares.sort { $0.sequence < $1.sequence } }
            for pair in lists.shares {
                let id = pair.id
                entries[id]!.sentShare = 1
                actions.append(.share(id, generation: entries[id]!.generation, limit: 1))
            }
        }
        guard !oneSlotWaiting.isEmpty, segmentsInUse < limits.segments else { return true }
        for candidate in oneSlotWaiting {
            let id = candidate.id
            guard segmentsInUse < limits.segments else { break }
            // (Hosts only fill up here: one passed over stays full for the rest of the list.)
            guard let host = entries[id]!.demand.first?.key, (hostsInUse[host] ?? 0) < hostCap(host) else { continue }
            lists.granted.append(.init(sequence: candidate.sequence, id: id, host: host))
            segmentsInUse += 1
            peakSegmentsInUse = max(peakSegmentsInUse, segmentsInUse)
            hostsInUse[host, default: 0] += 1
        }
        if lists.granted.count > 1 { lists.granted.sort { $0.sequence < $1.sequence } }
        for grant in lists.granted {
            let (id, host) = (grant.id, grant.host)
            withdraw(id, host: host, count: 1)
            entries[id]!.held[host, default: 0] += 1
            entries[id]!.heldTotal += 1
            reindex(id)
            actions.append(.grant(id, generation: entries[id]!.generation, host: host, count: 1))
        }
        return true
    }

    /// Forgets the tasks listed in ``shareDue``: the general rule tells every running task its
    /// share itself.
    private mutating func clearShareDue() {
        for id in shareDue where entries[id] != nil { entries[id]!.inShareDue = false }
        shareDue.removeAll(keepingCapacity: true)
    }

    private mutating func enterCriticalDisk(_ message: String, into actions: inout [Action]) {
        disk = .critical
        actions.append(.notice(DownloadNotice(kind: .diskSpaceCritical, message: "downloads stop for lack of disk space: \(message)")))
        for id in ids(where: \.isRunning) {
            halt(id, into: &actions)
            transition(id, to: .interrupted(.diskSpace), into: &actions)
        }
    }

    /// Queues the tasks interrupted for `reason`.
    private mutating func resumeInterrupted(_ reason: DownloadTaskState.InterruptionReason, into actions: inout [Action]) {
        for id in ids(where: { $0.state == .interrupted(reason) }) {
            enqueue(id, jumpAhead: false, into: &actions)
        }
    }
}

/// A waiting task's place in the queue.
struct QueueEntry: Comparable, Sendable {
    var weight: Int
    var sequence: Int
    var id: TaskHandle
    var version: Int

    /// The top of the heap is the entry served first (``Scheduler/isServedFirst(weight:sequence:before:)``).
    static func < (lhs: QueueEntry, rhs: QueueEntry) -> Bool {
        Scheduler.isServedFirst(weight: rhs.weight, sequence: rhs.sequence, before: (lhs.weight, lhs.sequence))
    }
}

/// A binary max-heap.
struct PriorityQueue<Element: Comparable & Sendable>: Sendable {
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
