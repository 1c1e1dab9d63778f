/// Who may write a task's files under a download root that several processes share (a fleet of
/// `tessera serve` workers on one shared file system, each holding the tasks it runs by a lease).
///
/// A manager with a fence (``DownloadTaskManager/Configuration/writeFence``) asks it right before
/// each commit of a task's journal, each move of an output into place and each deletion of a
/// task's files; without one, every write is allowed. A process that froze (SIGSTOP, a laptop
/// asleep) and lost its leases meanwhile must not write after the task was taken over: the fence
/// says no from the moment the holder can no longer be sure of its lease.
///
/// A check and the write after it are not atomic (a process can stop in between), so a fence may
/// also name each holder's journal by its lease epoch (``journalEpoch(of:)``): a late commit of a
/// holder that lost the task lands in its own epoch's file, which the next holder has copied
/// before writing and never reads again (see ``TaskJournalFiles``).
///
/// Implementations are called from any thread, the engine's included: ``permitsWrite(to:)`` and
/// ``journalEpoch(of:)`` must be fast and never block.
package protocol TaskWriteFence: Sendable {
    /// Whether this process may write task `id`'s journal and files now.
    func permitsWrite(to id: DownloadTaskID) -> Bool

    /// Waits, blocking the calling thread (a blocking executor's, never the cooperative pool),
    /// until ``permitsWrite(to:)`` holds, and returns `true`; `false` when it cannot any more
    /// (the task is no longer held) or does not within the fence's own bound. Called before an
    /// output is moved into place, where a short freeze should delay the move, not fail it.
    func awaitWritePermission(for id: DownloadTaskID) -> Bool

    /// The epoch naming task `id`'s journal files (`<name>.e<epoch>.a`), or `nil` for the
    /// unnamed journal of a process that owns its root alone.
    func journalEpoch(of id: DownloadTaskID) -> UInt64?
}

extension TaskWriteFence {
    /// Does not wait: whether ``permitsWrite(to:)`` holds now.
    package func awaitWritePermission(for id: DownloadTaskID) -> Bool { permitsWrite(to: id) }
}

/// Where a task's journal lives under a download root, for code outside the manager that hands a
/// task from one holder to the next (the fleet copies the newest earlier epoch's journal to its
/// own epoch's name before the task runs).
package enum TaskJournalFiles {
    /// The suffixes of a journal's files: two snapshots and the size log.
    package static let suffixes = [".a", ".b", ".sizes"]

    /// The directory of every task's journal under `root`.
    package static func workDirectory(root: String) -> String {
        FileLayout(root: root).workDirectory
    }

    /// The journal's files of task `id` under `root`, without their suffixes; with an `epoch`,
    /// that epoch's (`<name>.e<epoch>`).
    package static func basePath(root: String, id: DownloadTaskID, epoch: UInt64?) -> String {
        FileLayout(root: root).journalBase(of: id, epoch: epoch)
    }
}
