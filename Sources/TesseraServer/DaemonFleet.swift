import Tessera

/// The fleet a daemon is one worker of (`tessera serve --fleet`), as its RPC needs it: the
/// tasks the other workers run or the queue keeps, and commands that reach a task wherever it
/// runs. With one, `tellStatus`, `tellActive`, `tellWaiting`, `tellStopped`, `getGlobalStat`
/// and `/api/tasks` cover the whole fleet, `pause`, `unpause` and `remove` act on a task held by
/// another worker, and the WebSocket's notifications come from ``changes(since:)`` for every
/// task of the fleet (`/events`, hence the dashboard, still follow this worker's manager).
///
/// What every implementation must do:
/// - ``tasks()`` leaves out the tasks this daemon's manager runs (the daemon shows those from
///   its manager, live) and gives the others in the order they were added.
/// - A command on a task another worker runs reaches that worker (at its next heartbeat at the
///   latest); on a task nobody runs it takes effect at once. It returns whether the fleet knows
///   the task in a state the command applies to.
public protocol DaemonFleet: Sendable {
    /// This worker's name in the fleet (`host:pid`), shown beside the tasks it runs.
    var worker: String { get }
    /// The fleet's tasks that this daemon's manager does not run.
    func tasks() async throws -> [DaemonFleetTask]
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
