
/// Identifies one run of one task: reports of an older run are ignored.
struct RunTicket: Hashable, Sendable {
    let handle: TaskHandle
    let generation: Int
}

/// What a run tells its manager besides slot counts, in order.
enum RunReport: Sendable {
    /// The run has its manifest, named and checked, and wants these segment slots at once (and
    /// at most `cap` of them at a time, when it says so).
    case downloading(demand: [String: Int], cap: Int?)
    /// The run named an output `name` (claimed already; made from `original`, a response's name
    /// or the manifest's).
    case named(output: Int, name: String, original: String)
    /// An error the run retries (another attempt, URL or resolve): subscribers hear of it.
    case retrying(DownloadError)
    /// The run resolves the entity again (stale URLs, expiry, a changed resource).
    case reResolving(DownloadError)
    /// The run ended; `error` is the cause of a failure.
    case ended(Scheduler.RunEnding, DownloadError?)
    /// The run wants at most this many segment slots at once (`nil`: its share).
    case cap(Int?)
}

/// The one way a run talks to its manager without waiting: slot counts and reports pile up here
/// and the manager takes them in one go, woken once per batch. Consecutive slot counts merge,
/// so a burst of segments that end costs one message; order between counts and reports is kept.
/// A segment that starts on a slot the run kept costs no message at all.
final class RunMailbox: Sendable {
    /// Slot counts by host.
    struct Counts: Sendable, Equatable {
        var demand: [String: Int] = [:]
        var returned: [String: Int] = [:]
        var withdrawn: [String: Int] = [:]
    }

    /// One item of a batch, in the order posted.
    enum Item: Sendable {
        case counts(Counts)
        case report(RunReport)
    }

    private struct State {
        var items: [Item] = []
        var scheduled = false
        /// Between ``hold()`` and ``release()``: a wake is owed, not sent.
        var holding = false
        var owesWake = false
    }

    let ticket: RunTicket
    private let wake: @Sendable (RunTicket) -> Void
    private let state = Locked(State())

    /// A mailbox that calls `wake` (once per batch) when something arrives.
    init(ticket: RunTicket, wake: @escaping @Sendable (RunTicket) -> Void) {
        self.ticket = ticket
        self.wake = wake
    }

    /// The run wants `count` more slots for `host`.
    func demand(_ host: String, _ count: Int = 1) {
        tally { $0.demand[host, default: 0] += count }
    }

    /// The run gives back `count` slots of `host`.
    func returned(_ host: String, _ count: Int = 1) {
        tally { $0.returned[host, default: 0] += count }
    }

    /// The run no longer needs `count` of the slots it asked for on `host` (it started those
    /// segments on slots it held, or dropped them).
    func withdraw(_ host: String, _ count: Int = 1) {
        tally { $0.withdrawn[host, default: 0] += count }
    }

    func report(_ report: RunReport) {
        post { $0.append(.report(report)) }
    }

    /// Until ``release()``, what is posted waits without waking the manager: a run handling a
    /// batch of events (many transfers that ended in one turn of the engine) sends its slot
    /// counts and reports with one wake-up, not one per event.
    func hold() {
        state.withLock { $0.holding = true }
    }

    /// Ends ``hold()``: wakes the manager once if anything was posted meanwhile.
    func release() {
        let wake = state.withLock { state -> Bool in
            state.holding = false
            defer { state.owesWake = false }
            return state.owesWake
        }
        if wake { self.wake(ticket) }
    }

    /// Everything posted since the last call, in order.
    func take() -> [Item] {
        state.withLock { state in
            state.scheduled = false
            defer { state.items.removeAll(keepingCapacity: true) }
            return state.items
        }
    }

    private func tally(_ change: (inout Counts) -> Void) {
        post { items in
            if case .counts(var counts) = items.last {
                change(&counts)
                items[items.count - 1] = .counts(counts)
            } else {
                var counts = Counts()
                change(&counts)
                items.append(.counts(counts))
            }
        }
    }

    private func post(_ change: (inout [Item]) -> Void) {
        let schedule = state.withLock { state -> Bool in
            change(&state.items)
            guard !state.scheduled else { return false }
            state.scheduled = true
            guard !state.holding else {
                state.owesWake = true
                return false
            }
            return true
        }
        if schedule { wake(ticket) }
    }
}
