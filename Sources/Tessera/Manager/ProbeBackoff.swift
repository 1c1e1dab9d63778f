/// How long the network probe waits before each round (a value, tested without a clock): the
/// first round after ``initial``; after a round that reached a host, ``initial`` again; after a
/// round that reached none, twice the last wait, never more than ``maximum``
/// (``DownloadTaskManager/Configuration/networkProbeBackoff``).
struct ProbeBackoff: Sendable, Equatable {
    let initial: Duration
    let maximum: Duration
    /// The wait before the next round.
    private(set) var delay: Duration

    init(initial: Duration, maximum: Duration) {
        self.initial = initial
        self.maximum = maximum
        delay = initial
    }

    /// A round ended; `reached` says whether any host answered.
    mutating func roundEnded(reached: Bool) {
        delay = reached ? initial : min(delay * 2, maximum)
    }
}
