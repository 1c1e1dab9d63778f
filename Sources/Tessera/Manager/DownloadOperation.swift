/// What a ``DownloadTaskManager`` is asked to do (ZZDownloader's commands).
public enum DownloadCommand: Sendable {
    /// Add the entity's task without starting it (`idle`); ``startAll`` or ``resume(_:)``
    /// starts it later. Adding many tasks this way and then starting them all keeps the
    /// manager free for the first transfers.
    case add(DownloadBaseEntity)
    /// Add the entity's task if new and queue it (a paused, failed or invalid task is queued
    /// again, ahead of the others); a known running or completed task is left as it is.
    case start(DownloadBaseEntity)
    /// Like ``start(_:)``, but only fill the segment cache; no output is written.
    case startCache(DownloadBaseEntity)
    /// Queue a known task again (by ID, as a command line has it).
    case resume(DownloadTaskID)
    /// Pause a task, wherever it is (waiting, resolving, downloading, interrupted).
    case stop(DownloadTaskID)
    /// Remove a task, its partial files, and with `deletingFiles` its outputs too.
    case remove(DownloadTaskID, deletingFiles: Bool)
    /// A snapshot of one task.
    case check(DownloadTaskID)
    /// A snapshot of one group.
    case checkGroup(String)
    /// Snapshots of every group.
    case checkAllGroups
    /// Queue every task that is not running or complete.
    case startAll
    /// Pause every task that is not finished.
    case stopAll
}

/// A command and when it was made; operations are applied in the order received.
public struct DownloadOperation: Sendable {
    /// The command.
    public var command: DownloadCommand

    /// Creates an operation.
    public init(_ command: DownloadCommand) {
        self.command = command
    }

    /// `add`.
    public static func add(_ entity: DownloadBaseEntity) -> DownloadOperation { .init(.add(entity)) }
    /// `start`.
    public static func start(_ entity: DownloadBaseEntity) -> DownloadOperation { .init(.start(entity)) }
    /// `startCache`.
    public static func startCache(_ entity: DownloadBaseEntity) -> DownloadOperation { .init(.startCache(entity)) }
    /// `resume`.
    public static func resume(_ id: DownloadTaskID) -> DownloadOperation { .init(.resume(id)) }
    /// `stop`.
    public static func stop(_ id: DownloadTaskID) -> DownloadOperation { .init(.stop(id)) }
    /// `remove`.
    public static func remove(_ id: DownloadTaskID, deletingFiles: Bool = false) -> DownloadOperation {
        .init(.remove(id, deletingFiles: deletingFiles))
    }
    /// `check`.
    public static func check(_ id: DownloadTaskID) -> DownloadOperation { .init(.check(id)) }
    /// `checkGroup`.
    public static func checkGroup(_ key: String) -> DownloadOperation { .init(.checkGroup(key)) }
    /// `checkAllGroups`.
    public static var checkAllGroups: DownloadOperation { .init(.checkAllGroups) }
    /// `startAll`.
    public static var startAll: DownloadOperation { .init(.startAll) }
    /// `stopAll`.
    public static var stopAll: DownloadOperation { .init(.stopAll) }
}

/// What an operation returns.
public enum DownloadOperationResult: Sendable {
    /// The task concerned (`nil` when there is no such task).
    case task(DownloadTaskInfo?)
    /// The tasks concerned (`startAll`, `stopAll`).
    case tasks([DownloadTaskInfo])
    /// One group (`nil` when there is no such group).
    case group(DownloadGroupInfo?)
    /// Every group.
    case groups([DownloadGroupInfo])

    /// The task, for task results.
    public var task: DownloadTaskInfo? {
        if case .task(let info) = self { return info }
        return nil
    }
}
