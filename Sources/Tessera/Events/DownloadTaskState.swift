/// Where a download task stands.
public enum DownloadTaskState: Hashable, Sendable, Codable, CustomStringConvertible {
    /// Added but not asked to start.
    case idle
    /// Queued for a slot.
    case waiting
    /// Its parser is resolving the manifest.
    case resolving
    /// Its segments are being fetched.
    case downloading
    /// Stopped by the user; resumes only when asked.
    case paused
    /// Stopped by the environment (no network, low disk); resumes by itself.
    case interrupted(InterruptionReason)
    /// Every selected output is complete and verified.
    case completed
    /// Gave up after the last retry; see the task's error.
    case failed
    /// Cannot succeed as it is: the manifest is unusable, a checksum failed twice, every URL is gone.
    case invalid
    /// Removed; kept only in events.
    case removed

    /// Why an interrupted task stopped.
    public enum InterruptionReason: String, Hashable, Sendable, Codable {
        /// The network went away (name resolution, no route).
        case network
        /// The disk is nearly full.
        case diskSpace
        /// The network is metered and the policy forbids downloading on it.
        case meteredNetwork
    }

    /// The state without its associated value, for tables.
    public enum Kind: String, Hashable, Sendable, Codable, CaseIterable {
        case idle, waiting, resolving, downloading, paused, interrupted, completed, failed, invalid, removed
    }

    /// The state's kind.
    public var kind: Kind {
        switch self {
        case .idle: .idle
        case .waiting: .waiting
        case .resolving: .resolving
        case .downloading: .downloading
        case .paused: .paused
        case .interrupted: .interrupted
        case .completed: .completed
        case .failed: .failed
        case .invalid: .invalid
        case .removed: .removed
        }
    }

    /// Whether the task holds a slot (resolving or downloading).
    public var isRunning: Bool { self == .resolving || self == .downloading }

    /// Whether the task was interrupted, for any reason.
    public var isInterrupted: Bool { kind == .interrupted }

    /// Whether nothing more will happen without a command: completed, failed, invalid, removed.
    public var isFinal: Bool { kind.isFinal }

    public var description: String {
        if case .interrupted(let reason) = self { return "interrupted(\(reason.rawValue))" }
        return kind.rawValue
    }

    /// The transitions a task may make, state kind to state kinds. Everything not listed is refused.
    public static let transitions: [Kind: Set<Kind>] = [
        .idle: [.waiting, .paused, .removed],
        .waiting: [.resolving, .paused, .interrupted, .removed],
        .resolving: [.downloading, .waiting, .paused, .interrupted, .failed, .invalid, .removed],
        .downloading: [.resolving, .waiting, .paused, .interrupted, .completed, .failed, .invalid, .removed],
        .paused: [.waiting, .removed],
        .interrupted: [.waiting, .paused, .failed, .removed],
        .completed: [.waiting, .removed],
        .failed: [.waiting, .removed],
        .invalid: [.waiting, .removed],
        .removed: [],
    ]

    /// Whether a task in this state may move to `next`.
    public func canTransition(to next: DownloadTaskState) -> Bool {
        Self.allowedMasks[kind.ordinal] & (1 << next.kind.ordinal) != 0
    }

    /// ``transitions`` as one bit mask per kind (bit `n`: the kind of ordinal `n` may follow),
    /// so the scheduler's check at every change is two loads, not two hashes.
    private static let allowedMasks: [UInt16] = Kind.allCases.map { kind in
        (transitions[kind] ?? []).reduce(0) { $0 | 1 << $1.ordinal }
    }
}

extension DownloadTaskState.Kind {
    /// Whether nothing more will happen to a task in a state of this kind without a command
    /// (``DownloadTaskState/isFinal``).
    var isFinal: Bool { [.completed, .failed, .invalid, .removed].contains(self) }

    /// The kind's place in ``allCases`` (fewer than 16): its bit in the transition masks and in
    /// ``DownloadEventFilter``.
    var ordinal: Int {
        switch self {
        case .idle: 0
        case .waiting: 1
        case .resolving: 2
        case .downloading: 3
        case .paused: 4
        case .interrupted: 5
        case .completed: 6
        case .failed: 7
        case .invalid: 8
        case .removed: 9
        }
    }
}

/// A task's state as a value that only moves along ``DownloadTaskState/transitions``.
package struct DownloadTaskStateMachine: Hashable, Sendable {
    /// The current state.
    public private(set) var state: DownloadTaskState

    /// Starts in `state`.
    public init(_ state: DownloadTaskState = .idle) {
        self.state = state
    }

    /// Moves to `next`, or throws ``DownloadError/Code/invalidState`` when the table forbids it.
    /// Returns the previous state.
    @discardableResult
    public mutating func transition(to next: DownloadTaskState) throws(DownloadError) -> DownloadTaskState {
        guard state.canTransition(to: next) else {
            throw DownloadError(.invalidState, "a task cannot go from \(state) to \(next)")
        }
        let previous = state
        state = next
        return previous
    }
}
