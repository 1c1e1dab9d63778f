/// A snapshot of a group: its roll-up and its children.
public struct DownloadGroupInfo: Sendable, Equatable {
    /// A group's state, rolled up from its children.
    public enum State: String, Sendable, Hashable, Codable {
        case waiting, downloading, paused, interrupted, completed, failed
        /// A child records a live stream (it has no end to roll up to yet).
        case recording
    }

    /// What ``DownloadTaskGroup/rollUp(children:)`` computes.
    public struct RollUp: Sendable, Equatable {
        /// The state.
        public var state: State
        /// Bytes done over all children.
        public var bytesDone: Int64
        /// Bytes in all, when every child's total is known.
        public var bytesTotal: Int64?
        /// Summed speed.
        public var bytesPerSecond: Double
        /// Time left.
        public var eta: Duration?

        /// Creates a roll-up.
        public init(state: State, bytesDone: Int64, bytesTotal: Int64?, bytesPerSecond: Double, eta: Duration?) {
            self.state = state
            self.bytesDone = bytesDone
            self.bytesTotal = bytesTotal
            self.bytesPerSecond = bytesPerSecond
            self.eta = eta
        }
    }

    /// The aggregation key.
    public var key: String
    /// The group class's registry name.
    public var groupType: String
    /// The group's title.
    public var title: String
    /// The roll-up.
    public var rollUp: RollUp
    /// How many tasks the group has.
    public var childCount: Int
    /// The children's snapshots, in the order they were added: every child in
    /// ``DownloadTaskManager/checkGroup(_:)`` and ``DownloadTaskManager/checkAllGroups()``.
    /// A ``DownloadEvent/groupUpdated(_:)`` event leaves it empty unless the group's class
    /// ``DownloadTaskGroup/needsChildren``: each child has events of its own, and a group of
    /// 100,000 tasks does not send them all again on every change.
    public var children: [DownloadTaskInfo]

    /// The group's state.
    public var state: State { rollUp.state }
}
