extension ManagedTask {
    /// What a snapshot of the task reports in `state`: bytes done, the total and whether it is
    /// an estimate. An exact total is remembered (and stored, see ``exactTotal(_:)``): a plain
    /// file's size is known from its first response only, so a run that resumes it, a restart,
    /// or a completed task has no other way to tell it. A completed task is done to its total.
    /// A live recording has no total (the stream grows).
    func amounts(_ snapshot: TaskProgress.Snapshot, state: DownloadTaskState) -> (done: Int64, total: Int64?, isEstimate: Bool) {
        guard hasManifest, !isLive else { return (snapshot.bytes, nil, false) }
        if let total = exactTotal(snapshot) {
            return (state == .completed ? total : snapshot.bytes, total, false)
        }
        return (snapshot.bytes, snapshot.totalBytes, snapshot.totalBytes != nil)
    }

    /// The snapshot's total when it is exact (remembered), else the last exact one for this
    /// manifest; `nil` while only an estimate can be made.
    func exactTotal(_ snapshot: TaskProgress.Snapshot) -> Int64? {
        guard hasManifest, !isLive else { return nil }
        if let total = snapshot.totalBytes, !snapshot.totalIsEstimate {
            knownTotal = total
            return total
        }
        return knownTotal
    }
}
