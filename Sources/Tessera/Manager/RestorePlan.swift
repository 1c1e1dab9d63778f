/// How a stored task comes back when a manager restores its store (a value, tested without a
/// store or an actor): the state it is restored in and whether it is queued again.
///
/// A task that was waiting, resolving, downloading or interrupted when the last process ended
/// comes back paused and, when the restore resumes, is queued again (behind the others, in the
/// store's order) to continue from what its journal says is on disk. A removed one (its removal
/// never reached the files) comes back paused. Paused, completed, failed, invalid and idle tasks
/// stay so.
struct RestorePlan: Equatable {
    /// The state the task is restored in.
    var state: DownloadTaskState
    /// Whether the task is queued again once every task is restored.
    var requeues: Bool

    /// The plan for a task stored in `stored`; `resuming` is ``DownloadTaskManager/restore(resuming:)``'s.
    init(stored: DownloadTaskState, resuming: Bool) {
        switch stored {
        case .waiting, .resolving, .downloading, .interrupted:
            // Queued again after the restore, or left paused for a command.
            state = .paused
            requeues = resuming
        case .removed:
            state = .paused
            requeues = false
        case .idle, .paused, .completed, .failed, .invalid:
            state = stored
            requeues = false
        }
    }
}
