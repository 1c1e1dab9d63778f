/// Which events a subscriber of ``DownloadTaskManager/events(_:)`` is told of.
///
/// An event no subscriber is told of is not made: a task's snapshot is built for a state change
/// only when someone listens for changes into that state. A command line that shows only
/// failures and a summary (`tessera get -q`) leaves out the changes into `resolving` and
/// `downloading`, the additions and the progress of thousands of files, and the manager does
/// that much less for each of them.
///
/// Removals, errors, merges, groups and notices are always told: they are few, and leaving
/// them out would leave a subscriber without the reason of what it sees.
public struct DownloadEventFilter: Sendable, Hashable {
    /// The states whose changes are told: a ``DownloadEvent/taskStateChanged(_:previous:)`` into
    /// one of them.
    public var states: Set<DownloadTaskState.Kind>
    /// Whether ``DownloadEvent/taskAdded(_:)`` is told.
    public var additions: Bool
    /// Whether ``DownloadEvent/taskProgress(_:)`` is told.
    public var progress: Bool

    /// Every event (what ``DownloadTaskManager/events(_:)`` gives by default).
    public static let all = DownloadEventFilter()

    /// A filter telling the changes into `states`, and additions and progress when asked.
    public init(
        states: Set<DownloadTaskState.Kind> = Set(DownloadTaskState.Kind.allCases), additions: Bool = true, progress: Bool = true
    ) {
        self.states = states
        self.additions = additions
        self.progress = progress
    }

    /// Whether a subscriber with this filter is told of `event`.
    public func includes(_ event: DownloadEvent) -> Bool {
        let bit = Self.bit(of: event)
        return bit == 0 || mask & bit != 0
    }

    /// The filter as bits: one per state kind (its ordinal), then additions, then progress.
    var mask: UInt32 {
        var mask = states.reduce(UInt32(0)) { $0 | Self.bit(of: $1) }
        if additions { mask |= Self.additionsBit }
        if progress { mask |= Self.progressBit }
        return mask
    }

    static func bit(of kind: DownloadTaskState.Kind) -> UInt32 { 1 << UInt32(kind.ordinal) }
    static let additionsBit: UInt32 = 1 << 16
    static let progressBit: UInt32 = 1 << 17

    /// The bit an event needs in a subscriber's mask; 0 for the events every subscriber is told.
    static func bit(of event: DownloadEvent) -> UInt32 {
        switch event {
        case .taskStateChanged(let info, _): bit(of: info.state.kind)
        case .taskAdded: additionsBit
        case .taskProgress: progressBit
        case .taskRemoved, .groupUpdated, .groupRemoved, .taskError, .notice, .taskMerge: 0
        }
    }
}
