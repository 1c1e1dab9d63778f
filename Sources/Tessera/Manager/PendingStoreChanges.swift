/// What the store has not been told yet, in order (a value: the manager writes it once per
/// tick). An update of a task whose last pending change it can be merged into (see
/// ``StoreChange/merged(with:)``) replaces that change instead of following it, so a task that
/// reports progress every tick costs one write per batch.
struct PendingStoreChanges {
    private var changes: [StoreChange] = []
    /// The index of each task's last pending change.
    private var last: [DownloadTaskID: Int] = [:]

    /// Whether nothing is pending.
    var isEmpty: Bool { changes.isEmpty }

    /// Adds `change` after the others (or merges it into its task's last one).
    mutating func add(_ change: StoreChange) {
        let id = change.taskID
        if case .update = change, let index = last[id], let merged = changes[index].merged(with: change) {
            changes[index] = merged
        } else {
            last[id] = changes.count
            changes.append(change)
        }
    }

    /// Everything pending, in order; nothing is pending afterwards.
    mutating func take() -> [StoreChange] {
        // (Not keeping the capacity: the batch still holds the buffer, so a kept capacity would
        // be a new buffer as large as the largest batch ever, at every write.)
        let batch = changes
        changes = []
        last = [:]
        return batch
    }
}
