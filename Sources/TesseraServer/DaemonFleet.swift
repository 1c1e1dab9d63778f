import Tessera

/// The fleet a daemon is one worker of (`tessera serve --fleet`), as its RPC needs it: the
/// tasks the other workers run or the queue keeps, and commands that reach a task wherever it
/// runs. With one, `tellStatus`, `tellActive`, `tellWaiting`, `tellStopped`, `getGlobalStat`
/// and `/api/tasks` cover the whole fleet, `pause`, `unpause` and `remove` act on a task held by
/// another worker, and the WebSocket's notifications and `/events` (hence the dashboard) come
/// from ``changes(since:)`` for every task of the fleet, `/events` with the workers' health
/// (``workers()``).
///
/// What every implementation must do:
/// - ``tasks()`` gives the unfinished tasks (waiting, running, paused) in the order they were
///   added, leaving out those this daemon's manager runs (the daemon shows those from its
///   manager, live); finished ones come by windows (``stoppedTasks(offset:count:)``) and counts
///   (``stoppedCount()``), so that no status call reads every finished task of the fleet.
/// - A command on a task another worker runs reaches that worker (at its next heartbeat at the
///   latest); on a task nobody runs it takes effect at once. It returns whether the fleet knows
///   the task in a state the command applies to.
public protocol DaemonFleet: Sendable {
    /// This worker's name in the fleet (`host:pid`), shown beside the tasks it runs.
    var worker: String { get }
    /// The fleet's unfinished tasks that this daemon's manager does not run.
    func tasks() async throws -> [DaemonFleetTask]
    /// The fleet's finished tasks in the order they finished: `count` from `offset` (a negative
    /// offset counts from the last backwards), as aria2's `tellStopped` asks.
    func stoppedTasks(offset: Int, count: Int) async throws -> [DaemonFleetTask]
    /// How many tasks of the fleet are finished.
    func stoppedCount() async throws -> Int
    /// One task of the fleet, whatever its state.
    func task(_ id: DownloadTaskID) async throws -> DaemonFleetTask?
    /// Every task's ID (read once, to know the GIDs of tasks finished before the daemon started).
    func taskIDs() async throws -> [DownloadTaskID]
    /// The fleet's tasks, this worker's included, whose state may have changed since `cursor`
    /// (every task when `nil`), and the cursor to ask with next (a task may come again
    /// unchanged).
    func changes(since cursor: Double?) async throws -> (tasks: [DaemonFleetTask], cursor: Double)
    /// Pauses a task wherever it runs (a queued one at once).
    func pause(_ id: DownloadTaskID) async throws -> Bool
    /// Queues a paused, failed or invalid task again, for any worker.
    func unpause(_ id: DownloadTaskID) async throws -> Bool
    /// Removes a task wherever it runs; its owner deletes its partial files (and with
    /// `deletingFiles` its outputs).
    func remove(_ id: DownloadTaskID, deletingFiles: Bool) async throws -> Bool
    /// The fleet's workers with their health (the active ones and those that left or died
    /// lately).
    func workers() async throws -> [DaemonFleetWorker]
}

extension DaemonFleet {
    /// No workers to show.
    public func workers() async throws -> [DaemonFleetWorker] { [] }

    /// The finished tasks among ``tasks()`` (a fleet whose ``tasks()`` gives them).
    public func stoppedTasks(offset: Int, count: Int) async throws -> [DaemonFleetTask] {
        Aria2RPC.window(try await tasks().filter { $0.info.state.isFinal }, offset: offset, count: count)
    }

    /// The finished tasks among ``tasks()``, counted.
    public func stoppedCount() async throws -> Int {
        try await tasks().count { $0.info.state.isFinal }
    }

    /// The task among ``tasks()``.
    public func task(_ id: DownloadTaskID) async throws -> DaemonFleetTask? {
        try await tasks().first { $0.info.id == id }
    }

    /// The IDs of ``tasks()``.
    public func taskIDs() async throws -> [DownloadTaskID] {
        try await tasks().map(\.info.id)
    }
}

/// A task of the fleet that another worker runs or the queue keeps.
public struct DaemonFleetTask: Sendable, Equatable {
    /// The task, as its record in the fleet tells it.
    public var info: DownloadTaskInfo
    /// The worker running it (`host:pid`), if any.
    public var worker: String?

    /// A task of the fleet.
    public init(info: DownloadTaskInfo, worker: String?) {
        self.info = info
        self.worker = worker
    }
}
