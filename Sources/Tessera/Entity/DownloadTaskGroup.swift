/// Rolls up the tasks that share an aggregation key: the cids of one video, the files of one
/// Metalink.
///
/// Subclass it to change the roll-up rules or the title, and name the subclass in the
/// entity's ``DownloadBaseEntity/groupType``. Groups hold no state of their own: the manager
/// asks ``rollUp(children:)`` each time a child changes.
open class DownloadTaskGroup: @unchecked Sendable {
    /// The name the registry knows the class by.
    open class var groupType: String { String(describing: self) }

    /// The aggregation key shared by the children.
    public let key: String

    /// Creates a group for an aggregation key.
    public required init(key: String) {
        self.key = key
    }

    /// The group's title, from its children; the default is the key.
    open func title(children: [DownloadTaskInfo]) -> String { key }

    /// The group's state, bytes, speed and ETA from its children's snapshots.
    ///
    /// Default rules: any child downloading or resolving -> downloading; else any waiting ->
    /// waiting; all completed -> completed; any invalid or failed and the rest finished ->
    /// failed; any interrupted -> interrupted; else paused. Bytes and speeds are sums; the ETA
    /// is the remaining bytes over the summed speed.
    open func rollUp(children: [DownloadTaskInfo]) -> DownloadGroupInfo.RollUp {
        let states = children.map(\.state)
        let state: DownloadGroupInfo.State
        if states.contains(where: { $0 == .downloading || $0 == .resolving }) {
            state = .downloading
        } else if states.contains(.waiting) {
            state = .waiting
        } else if !states.isEmpty, states.allSatisfy({ $0 == .completed }) {
            state = .completed
        } else if states.contains(where: { $0 == .failed || $0 == .invalid }),
            states.allSatisfy({ $0 == .completed || $0 == .failed || $0 == .invalid })
        {
            state = .failed
        } else if states.contains(where: \.isInterrupted) {
            state = .interrupted
        } else {
            state = .paused
        }
        let done = children.map(\.bytesDone).saturatingSum()
        let totals = children.map(\.bytesTotal)
        let total: Int64? = totals.contains(nil) ? nil : totals.map { $0 ?? 0 }.saturatingSum()
        let speed = children.reduce(0.0) { $0 + $1.bytesPerSecond }
        let eta = total.flatMap { Duration.estimate(remaining: $0 - done, bytesPerSecond: speed) }
        return DownloadGroupInfo.RollUp(state: state, bytesDone: done, bytesTotal: total, bytesPerSecond: speed, eta: eta)
    }
}
