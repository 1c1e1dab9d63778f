/// What a group's roll-up is computed from: how many children are in each state and the sums of
/// their bytes and speeds. The manager keeps one per group and changes it by the children that
/// changed, so a group of 100,000 tasks costs the same per update as a group of two.
public struct DownloadGroupTally: Sendable, Equatable {
    /// One child's part in the tally.
    public struct Entry: Sendable, Equatable {
        /// The child's state.
        public var state: DownloadTaskState
        /// Bytes done.
        public var bytesDone: Int64
        /// Bytes in all, when known.
        public var bytesTotal: Int64?
        /// Speed (0 unless running).
        public var bytesPerSecond: Double
        /// Whether the child is recording a live stream (``DownloadTaskInfo/isRecording``).
        public var isRecording: Bool

        /// A child's part, from its snapshot.
        public init(_ info: DownloadTaskInfo) {
            self.init(
                state: info.state, bytesDone: info.bytesDone, bytesTotal: info.bytesTotal, bytesPerSecond: info.bytesPerSecond,
                isRecording: info.isRecording)
        }

        /// A child's part; the speed counts only while `state` is running.
        public init(state: DownloadTaskState, bytesDone: Int64, bytesTotal: Int64?, bytesPerSecond: Double, isRecording: Bool = false) {
            self.state = state
            self.bytesDone = bytesDone
            self.bytesTotal = bytesTotal
            self.bytesPerSecond = state.isRunning ? bytesPerSecond : 0
            self.isRecording = isRecording && state.isRunning
        }
    }

    /// How many children.
    public private(set) var count = 0
    private var states: [DownloadTaskState: Int] = [:]
    // Sums in 128 bits: adding and taking away stays exact (each size is at most 1 EiB).
    private var done: Int128 = 0
    private var total: Int128 = 0
    private var unknownTotals = 0
    private var speed: Double = 0
    /// Children recording a live stream.
    public private(set) var recording = 0

    /// An empty tally.
    public init() {}

    /// The tally of `children`.
    public init(children: [DownloadTaskInfo]) {
        self.init(entries: children.map(Entry.init))
    }

    /// The tally of `entries`.
    public init(entries: [Entry]) {
        for entry in entries { add(entry) }
    }

    /// Counts a child in.
    public mutating func add(_ entry: Entry) {
        count += 1
        states[entry.state, default: 0] += 1
        done += Int128(entry.bytesDone)
        if let bytesTotal = entry.bytesTotal { total += Int128(bytesTotal) } else { unknownTotals += 1 }
        speed += entry.bytesPerSecond
        if entry.isRecording { recording += 1 }
    }

    /// Counts a child out (an entry that was added).
    public mutating func remove(_ entry: Entry) {
        count -= 1
        states[entry.state, default: 0] -= 1
        if states[entry.state] == 0 { states[entry.state] = nil }
        done -= Int128(entry.bytesDone)
        if let bytesTotal = entry.bytesTotal { total -= Int128(bytesTotal) } else { unknownTotals -= 1 }
        speed -= entry.bytesPerSecond
        if entry.isRecording { recording -= 1 }
        if count == 0 || !states.keys.contains(where: \.isRunning) { speed = 0 }
    }

    /// How many children are in states that satisfy `predicate`.
    public func count(where predicate: (DownloadTaskState) -> Bool) -> Int {
        states.reduce(0) { $0 + (predicate($1.key) ? $1.value : 0) }
    }

    /// Bytes done over all children (at most `Int64.max`).
    public var bytesDone: Int64 { Int64(clamping: done) }

    /// Bytes in all, when every child's total is known (at most `Int64.max`).
    public var bytesTotal: Int64? { unknownTotals > 0 ? nil : Int64(clamping: total) }

    /// Summed speed.
    public var bytesPerSecond: Double { max(0, speed) }
}
