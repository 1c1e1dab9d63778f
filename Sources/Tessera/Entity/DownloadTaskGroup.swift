/// Rolls up the tasks that share an aggregation key: the cids of one video, the files of one
/// Metalink.
///
/// Subclass it to change the roll-up rules or the title, and name the subclass in the
/// entity's ``DownloadBaseEntity/groupType``. Groups hold no state of their own: the manager
/// asks ``rollUp(children:)`` each time a child changes.
open class DownloadTaskGroup: @unchecked Sendable {
    /// The name the registry knows the class by.
    open class var groupType: String { TypeNames.name(of: self) }

    /// The aggregation key shared by the children.
    public let key: String

    /// Creates a group for an aggregation key.
    public required init(key: String) {
        self.key = key
    }

    /// Whether ``title(children:)`` and ``rollUp(children:)`` are given the children.
    ///
    /// The base class answers `false`: its title is the key and its roll-up needs only the
    /// ``DownloadGroupTally`` the manager keeps up to date child by child, so an update of a
    /// group of 100,000 tasks costs what one of two costs. A subclass answers `true` by default
    /// and is given every child's snapshot on every update; answer `false` in a subclass whose
    /// rules need no more than the tally (override ``rollUp(tally:)`` then).
    open class var needsChildren: Bool { self != DownloadTaskGroup.self }

    /// The group's title, from its children; the default is the key. Given an empty list when
    /// ``needsChildren`` is `false`.
    open func title(children: [DownloadTaskInfo]) -> String { key }

    /// The group's state, bytes, speed and ETA from its children's snapshots: by default, the
    /// rules of ``rollUp(tally:)`` applied to their tally.
    open func rollUp(children: [DownloadTaskInfo]) -> DownloadGroupInfo.RollUp {
        rollUp(tally: DownloadGroupTally(children: children))
    }

    /// The group's state, bytes, speed and ETA from the tally of its children.
    ///
    /// Default rules: any child recording a live stream -> recording; else any child
    /// downloading or resolving -> downloading; else any waiting ->
    /// waiting; all completed -> completed; any invalid or failed and the rest finished ->
    /// failed; any interrupted -> interrupted; else paused. Bytes and speeds are sums; the ETA
    /// is the remaining bytes over the summed speed.
    open func rollUp(tally: DownloadGroupTally) -> DownloadGroupInfo.RollUp {
        let state: DownloadGroupInfo.State
        let finished = tally.count(where: { $0 == .completed || $0 == .failed || $0 == .invalid })
        if tally.recording > 0 {
            state = .recording
        } else if tally.count(where: \.isRunning) > 0 {
            state = .downloading
        } else if tally.count(where: { $0 == .waiting }) > 0 {
            state = .waiting
        } else if tally.count > 0, tally.count(where: { $0 == .completed }) == tally.count {
            state = .completed
        } else if tally.count(where: { $0 == .failed || $0 == .invalid }) > 0, finished == tally.count {
            state = .failed
        } else if tally.count(where: \.isInterrupted) > 0 {
            state = .interrupted
        } else {
            state = .paused
        }
        let done = tally.bytesDone, total = tally.bytesTotal, speed = tally.bytesPerSecond
        let eta = total.flatMap { Duration.estimate(remaining: $0 - done, bytesPerSecond: speed) }
        return DownloadGroupInfo.RollUp(state: state, bytesDone: done, bytesTotal: total, bytesPerSecond: speed, eta: eta)
    }
}
