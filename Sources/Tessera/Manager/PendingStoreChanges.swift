/// What the store has not been told yet, in order (a value: the manager writes it once per
/// tick). An update of a task whose last pending change it can be merged into (see
/// ``StoreChange/merged(with:)``) replaces that change instead of following it, so a task that
/// reports progress every tick costs one write per batch.
///
/// A task whose record changed is only *touched* (its handle noted once): its record is read
/// once, when the batch is taken, however many times it changed during the tick (a small file
/// goes from waiting to completed within one tick: one record instead of five).
///
/// Changes are filed by the task's handle, a small integer, not by its identity (a URL's whole
/// text for a plain file): hashing it at every change cost more than the change.
struct PendingStoreChanges {
    private var changes: [StoreChange] = []
    /// The index of each task's last pending change, by its handle.
    private var last: [TaskHandle: Int] = [:]
    /// The size of the last batch: the next one starts with room for as many.
    private var lastBatchSize = 0

    /// The tasks whose record changed, in the order they first did.
    private var touched = HandleSet()

    /// Whether nothing is pending.
    var isEmpty: Bool { changes.isEmpty && touched.isEmpty }

    /// How many changes and touched records wait (a change and a touch of the same task count
    /// twice: a bound, not an exact count).
    var count: Int { changes.count + touched.count }

    /// Adds `change`, about the task with `handle`, after the others (or merges it into that
    /// task's last one). A task added again after a remove has a new handle.
    mutating func add(_ change: StoreChange, handle: TaskHandle) {
        if case .update = change, let index = last[handle], let merged = changes[index].merged(with: change) {
            changes[index] = merged
        } else {
            if changes.isEmpty { changes.reserveCapacity(lastBatchSize) }
            last[handle] = changes.count
            changes.append(change)
        }
    }

    /// Notes that the record of the task with `handle` changed: an update with its record as it
    /// is when the batch is taken follows the changes added before.
    mutating func touch(_ handle: TaskHandle) {
        touched.insert(handle)
    }

    /// Everything pending, in order: the changes added, then an update for each touched task
    /// that `record` still gives a record for (merged into its task's last change when it can
    /// be); nothing is pending afterwards.
    mutating func take(records record: (TaskHandle) -> TaskRecord? = { _ in nil }) -> [StoreChange] {
        for handle in touched {
            if let record = record(handle) { add(.update(record), handle: handle) }
        }
        touched.removeAll()
        // (Not keeping the capacity: the batch still holds the buffer, so a kept capacity would
        // be a new buffer as large as the largest batch ever, at every write.)
        let batch = changes
        changes = []
        last = [:]
        lastBatchSize = batch.count
        return batch
    }
}
