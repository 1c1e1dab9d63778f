/// The groups a manager's tasks roll up into (a value, touched only on the manager's actor):
/// which tasks each group holds, each child's part of its group's tally as last counted, and
/// which children changed since subscribers were last told.
///
/// A group appears with its first child and disappears with its last. A child's part is counted
/// again only when it is marked changed (a few per tick: the running ones, never every sibling).
///
/// Children are known by their ``TaskHandle`` (8 bytes), not their ``DownloadTaskID`` (three
/// strings, 48 bytes): a group of 100,000 children keeps each in two tables.
struct TaskGroups {
    /// One group.
    struct Entry {
        var group: DownloadTaskGroup
        var children: Set<TaskHandle> = []
        /// The roll-up's inputs, kept child by child, and each child's part as last counted.
        var tally = DownloadGroupTally()
        var counted: [TaskHandle: DownloadGroupTally.Entry] = [:]
    }

    private(set) var entries: [String: Entry] = [:]
    /// The groups to tell subscribers about, each with the children whose part changed.
    private var changed: [String: Set<TaskHandle>] = [:]

    /// The keys of every group, in order.
    var keys: [String] { entries.keys.sorted() }

    /// Whether a group changed since ``takeChanged(part:)``.
    var hasChanges: Bool { !changed.isEmpty }

    /// `id` joins the group `key` (made by `makeGroup` when it has no child yet).
    mutating func join(_ id: TaskHandle, key: String, makeGroup: () -> DownloadTaskGroup) {
        if entries[key] == nil { entries[key] = Entry(group: makeGroup()) }
        entries[key]?.children.insert(id)
        markChanged(id, key: key)
    }

    /// `id`'s snapshot changed: its part of group `key` is counted again at the next ``takeChanged(part:)``.
    mutating func markChanged(_ id: TaskHandle, key: String) {
        changed[key, default: []].insert(id)
    }

    /// `id` leaves the group `key` (which disappears with its last child).
    mutating func leave(_ id: TaskHandle, key: String) {
        guard var entry = entries[key] else { return }
        entry.children.remove(id)
        if let counted = entry.counted.removeValue(forKey: id) { entry.tally.remove(counted) }
        entries[key] = entry.children.isEmpty ? nil : entry
        changed[key, default: []].remove(id)
    }

    /// Counts the changed children again (`part` gives a child's part, `nil` for a child that
    /// is gone) and returns the keys of the groups that changed, in order; nothing is marked
    /// changed afterwards.
    mutating func takeChanged(part: (TaskHandle) -> DownloadGroupTally.Entry?) -> [String] {
        for (key, ids) in changed {
            guard var entry = entries[key] else { continue }
            entries[key] = nil  // (no copy of the entry while it changes)
            for id in ids where entry.children.contains(id) {
                guard let counted = part(id) else { continue }
                if let old = entry.counted.updateValue(counted, forKey: id) { entry.tally.remove(old) }
                entry.tally.add(counted)
            }
            entries[key] = entry
        }
        let keys = changed.keys.sorted()
        changed.removeAll()
        return keys
    }

    /// Group `key` with `children` (every child's snapshot, in the order they were added).
    func info(_ key: String, children: [DownloadTaskInfo]) -> DownloadGroupInfo? {
        guard let entry = entries[key] else { return nil }
        let group = entry.group
        let needsChildren = type(of: group).needsChildren
        return DownloadGroupInfo(
            key: key, groupType: type(of: group).groupType, title: group.title(children: needsChildren ? children : []),
            rollUp: group.rollUp(children: children), childCount: children.count, children: children)
    }

    /// Group `key` for an event: from its tally, without its children unless its class needs
    /// them (then `children` gives them).
    func update(_ key: String, children: () -> [DownloadTaskInfo]) -> DownloadGroupInfo? {
        guard let entry = entries[key] else { return nil }
        guard !type(of: entry.group).needsChildren else { return info(key, children: children()) }
        return DownloadGroupInfo(
            key: key, groupType: type(of: entry.group).groupType, title: entry.group.title(children: []),
            rollUp: entry.group.rollUp(tally: entry.tally), childCount: entry.children.count, children: [])
    }
}
