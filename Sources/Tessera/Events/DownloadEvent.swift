/// Something that happened in a ``DownloadTaskManager``, delivered to every subscriber of
/// ``DownloadTaskManager/events(_:)`` whose ``DownloadEventFilter`` includes it.
///
/// Every state change is delivered (to the subscribers told of changes into that state);
/// progress at most once per task per ``DownloadTaskManager/Configuration/progressInterval``.
///
/// Its cases are kept in a box (`indirect`): an event is one reference, so handing it to every
/// subscriber and down their streams copies a pointer, not a task's whole snapshot (545 bytes
/// and a dozen references inline).
public indirect enum DownloadEvent: Sendable {
    /// A task was added.
    case taskAdded(DownloadTaskInfo)
    /// A task changed state.
    case taskStateChanged(DownloadTaskInfo, previous: DownloadTaskState)
    /// A running task made progress.
    case taskProgress(DownloadTaskInfo)
    /// A task was removed.
    case taskRemoved(DownloadTaskID)
    /// A group's roll-up changed (a child changed state or made progress).
    case groupUpdated(DownloadGroupInfo)
    /// A group lost its last child.
    case groupRemoved(key: String)
    /// A task met an error: `willRetry` when the manager tries again (another attempt, mirror
    /// or resolve), `false` when the task failed or became invalid because of it.
    case taskError(DownloadTaskID, DownloadError, willRetry: Bool)
    /// A condition of the environment worth telling (disk space low, network lost or back,
    /// a task started on a metered network).
    case notice(DownloadNotice)
    /// A completed task's files are being merged into one, were merged, or were not (see
    /// ``MergePolicy``); with the task's snapshot after the step (once merged, its one output is
    /// the merged file).
    case taskMerge(DownloadTaskInfo, MergeStatus)

    /// The task the event is about, if it is about one.
    public var taskID: DownloadTaskID? {
        switch self {
        case .taskAdded(let info), .taskStateChanged(let info, _), .taskProgress(let info), .taskMerge(let info, _): info.id
        case .taskRemoved(let id), .taskError(let id, _, _): id
        case .groupUpdated, .groupRemoved, .notice: nil
        }
    }
}

/// An environmental condition.
public struct DownloadNotice: Sendable, Hashable {
    /// What kind of condition.
    public enum Kind: String, Sendable, Hashable {
        case diskSpaceLow, diskSpaceCritical, diskSpaceRecovered
        case networkLost, networkRestored, meteredNetwork
        /// The store could not be written: tasks go on, but what they did may not survive a restart.
        case storeFailure
    }

    /// The condition.
    public var kind: Kind
    /// A sentence for people.
    public var message: String
    /// The task concerned, if one.
    public var taskID: DownloadTaskID?

    /// Creates a notice.
    public init(kind: Kind, message: String, taskID: DownloadTaskID? = nil) {
        self.kind = kind
        self.message = message
        self.taskID = taskID
    }
}

/// A step of a completed task's merge (``DownloadEvent/taskMerge(_:_:)``).
public enum MergeStatus: Sendable, Equatable {
    /// ffmpeg runs the plan.
    case started(MergePlan)
    /// The merged file is in place and stands for the task's outputs; the merged ones are gone.
    case merged(MergeResult)
    /// No merged file: the task's files are kept. ``MergeError/cancelled`` when it was
    /// interrupted (the manager shut down, or the task was removed): the merge runs again when
    /// the manager next restores the task.
    case failed(MergeError)
    /// Not attempted, with the reason (no ffmpeg): the task's files are kept.
    case skipped(reason: String)
}
