/// When a fleet worker heartbeats, claims, suspends its runs, drops its tasks and rejoins: a value
/// that takes events (clock readings, what the database answered) and returns actions, with no
/// database, clock or actor of its own (River's leader election is the model: a lease is renewed
/// only while it has not expired, and its holder trusts it only until send time + TTL - margin).
///
/// The worker's lease lives in the database as its row's `expires_at`, set from the database's
/// clock (`now() + lease`) at each heartbeat; other workers take over its tasks once that time is
/// past, by the database's clock only. The worker itself never reads the database's clock: it
/// trusts its lease until the moment it *sent* the heartbeat that renewed it, plus the lease,
/// minus a safety margin, on its own boot-time clock (which goes on while the process is
/// stopped). Since the database set `expires_at` after the heartbeat was sent, the worker stops
/// trusting at least `margin` before anyone else may take its tasks.
///
/// - While trusted (``isTrusted(at:)``), the worker writes journals and moves files; it claims only
///   then.
/// - Past the trust (a late heartbeat, a freeze) its fence refuses every journal commit and file
///   move, and it heartbeats at once; a freeze shorter than the lease ends with a heartbeat that
///   renews the same lease: no takeover, the runs go on.
/// - Past trust + margin (the earliest the lease can have expired) its runs are suspended:
///   nothing more reaches the shared root. A renewal resumes them; a refusal (the fleet declared
///   this worker dead and took its tasks) drops every task, writing nothing, and the worker joins
///   again as a new worker.
public struct FleetLeasePolicy: Sendable {
    /// The lease and how often it is renewed.
    public struct Timing: Sendable, Equatable {
        /// How long a heartbeat keeps the worker's lease (set by the database: `now() + lease`).
        public var lease: Duration
        /// How often the lease is renewed (and expired leases of others are looked for).
        public var heartbeat: Duration
        /// How long before the lease's end (measured from the heartbeat's send time) the worker
        /// stops trusting it: covers clock-rate differences and the heartbeat's own round trip.
        public var margin: Duration
        /// How often the queue is polled for work without a NOTIFY (a wake-up may be lost while
        /// the listening connection reconnects).
        public var claimPoll: Duration

        /// A timing; `heartbeat` must be shorter than `lease - margin`.
        public init(lease: Duration, heartbeat: Duration, margin: Duration, claimPoll: Duration) {
            self.lease = lease
            self.heartbeat = heartbeat
            self.margin = margin
            self.claimPoll = claimPoll
        }

        /// The defaults: a 15 s lease renewed every 5 s, trusted until 3 s before its end.
        public static let standard = Timing(lease: .seconds(15), heartbeat: .seconds(5), margin: .seconds(3), claimPoll: .seconds(2))

        /// For tests and the demo: a 2 s lease renewed every 0.5 s, trusted until 0.4 s before its end.
        public static let quick = Timing(
            lease: .seconds(2), heartbeat: .milliseconds(500), margin: .milliseconds(400), claimPoll: .milliseconds(500))

        /// Why this timing cannot work, or `nil`.
        public var problem: String? {
            if lease <= .zero || heartbeat <= .zero || margin < .zero || claimPoll <= .zero { return "every duration must be positive" }
            if heartbeat >= lease - margin { return "the heartbeat must come more often than the lease minus its margin" }
            return nil
        }
    }

    /// What the worker is doing.
    public enum Phase: Sendable, Equatable {
        /// Registering (again) as a worker.
        case joining
        /// A worker of the fleet.
        case active
        /// Handing its tasks back (graceful stop).
        case stopping
        /// Done.
        case stopped
    }

    /// What happened.
    public enum Event: Sendable, Equatable {
        /// Time passed (a timer, or a wake-up).
        case tick(at: FleetInstant)
        /// A NOTIFY or a task released here: claim as soon as possible.
        case woken(at: FleetInstant)
        /// Registered as a worker with a registration sent at `sentAt` (it starts the lease).
        case joined(sentAt: FleetInstant, at: FleetInstant)
        /// Registering failed (the database cannot be reached).
        case joinFailed(at: FleetInstant)
        /// The heartbeat sent at `sentAt` was answered: `alive` when the lease was renewed,
        /// `false` when the fleet has declared this worker dead.
        case heartbeatAnswered(sentAt: FleetInstant, alive: Bool, at: FleetInstant)
        /// The heartbeat sent at `sentAt` got no answer (the database cannot be reached).
        case heartbeatFailed(sentAt: FleetInstant, at: FleetInstant)
        /// A claim for `asked` tasks got `count`.
        case claimed(count: Int, asked: Int, at: FleetInstant)
        /// A claim failed.
        case claimFailed(at: FleetInstant)
        /// `count` tasks are no longer held here (finished, lost, handed back).
        case released(count: Int, at: FleetInstant)
        /// SIGTERM or `aria2.shutdown`: hand everything back.
        case stopRequested(at: FleetInstant)
        /// The tasks were handed back.
        case handedBack(at: FleetInstant)
    }

    /// What to do.
    public enum Action: Sendable, Equatable {
        /// Register as a (new) worker.
        case join
        /// Renew the lease; report the answer with `sentAt`.
        case heartbeat(sentAt: FleetInstant)
        /// Take over the tasks of workers whose leases expired (by the database's clock).
        case rescue
        /// Claim up to this many tasks.
        case claim(Int)
        /// Stop every run, keeping the tasks and what they wrote: the lease may have expired.
        case suspendRuns
        /// Start the suspended runs again: the lease was renewed in time.
        case resumeRuns
        /// Forget every task without writing anything: the fleet took them.
        case dropAll
        /// Stop every run, then hand the tasks back to the queue and leave the fleet.
        case handBack
        /// Nothing more to do.
        case finish
    }

    /// The timing.
    public let timing: Timing
    /// Tasks held at once at most (`-j`).
    public let capacity: Int
    /// What the worker is doing.
    public private(set) var phase: Phase = .joining
    /// The end of the trust in the current lease (`nil`: none).
    public private(set) var trustedUntil: FleetInstant?
    /// Tasks held now.
    public private(set) var held = 0
    /// Whether the runs are suspended.
    public private(set) var suspended = false
    /// How often this worker joined (1 after the first registration).
    public private(set) var joins = 0

    private var joinInFlight = false
    private var nextJoin: FleetInstant?
    private var heartbeatInFlight = false
    /// Whether the lapse of the current trust was seen (it makes one heartbeat due at once; more
    /// come at the usual pace, not at every tick while the database is away).
    private var lapseSeen = false
    private var nextHeartbeat: FleetInstant?
    private var claimInFlight = false
    private var nextClaim: FleetInstant?
    private var wantsClaim = false

    /// A worker that has not joined yet.
    public init(timing: Timing, capacity: Int) {
        self.timing = timing
        self.capacity = max(1, capacity)
    }

    /// Whether the lease can be trusted at `now` (the write fence's rule).
    public func isTrusted(at now: FleetInstant) -> Bool {
        guard phase == .active || phase == .stopping, let trustedUntil else { return false }
        return now < trustedUntil
    }

    /// The earliest the lease may have expired in the database: trust + margin.
    var leaseEnd: FleetInstant? { trustedUntil?.advanced(by: timing.margin) }

    /// When the next tick is due (the worker sleeps until then, or until woken).
    public func nextDeadline() -> FleetInstant? {
        var deadlines: [FleetInstant] = []
        switch phase {
        case .joining:
            if !joinInFlight, let nextJoin { deadlines.append(nextJoin) }
        case .active:
            if !heartbeatInFlight, let nextHeartbeat { deadlines.append(nextHeartbeat) }
            if !claimInFlight, !lapseSeen, held < capacity, let nextClaim { deadlines.append(nextClaim) }
            if let trustedUntil, !lapseSeen { deadlines.append(trustedUntil) }
            if !suspended, held > 0, let leaseEnd { deadlines.append(leaseEnd) }
        case .stopping, .stopped:
            break
        }
        return deadlines.min()
    }

    /// Applies an event; returns what to do, in order.
    public mutating func handle(_ event: Event) -> [Action] {
        switch event {
        case .tick(let now):
            return tick(now)
        case .woken(let now):
            wantsClaim = true
            return tick(now)
        case .joined(let sentAt, let now):
            guard phase == .joining else { return [] }
            joinInFlight = false
            joins += 1
            phase = .active
            trustedUntil = sentAt.advanced(by: timing.lease - timing.margin)
            nextHeartbeat = sentAt.advanced(by: timing.heartbeat)
            lapseSeen = false
            held = 0
            suspended = false
            wantsClaim = true
            return tick(now)
        case .joinFailed(let now):
            joinInFlight = false
            nextJoin = now.advanced(by: timing.heartbeat)
            return []
        case .heartbeatAnswered(let sentAt, let alive, let now):
            heartbeatInFlight = false
            guard phase == .active || phase == .stopping else { return [] }
            guard alive else { return lost(now) }
            let renewed = sentAt.advanced(by: timing.lease - timing.margin)
            if trustedUntil.map({ renewed > $0 }) ?? true { trustedUntil = renewed }
            if isTrusted(at: now) { lapseSeen = false }
            nextHeartbeat = sentAt.advanced(by: timing.heartbeat)
            var actions: [Action] = []
            if suspended, phase == .active, isTrusted(at: now) {
                suspended = false
                actions.append(.resumeRuns)
            }
            if phase == .active { actions.append(.rescue) }
            return actions + tick(now)
        case .heartbeatFailed(_, let now):
            heartbeatInFlight = false
            guard phase == .active else { return [] }
            // Tried again soon, not at the next beat: the lease is running out.
            nextHeartbeat = now.advanced(by: timing.heartbeat / 2)
            return tick(now)
        case .claimed(let count, let asked, let now):
            claimInFlight = false
            held += max(0, count)
            if count >= asked, held < capacity { wantsClaim = true } else { nextClaim = now.advanced(by: timing.claimPoll) }
            return tick(now)
        case .claimFailed(let now):
            claimInFlight = false
            nextClaim = now.advanced(by: timing.claimPoll)
            return []
        case .released(let count, let now):
            held = max(0, held - count)
            wantsClaim = true
            return tick(now)
        case .stopRequested:
            switch phase {
            case .joining:
                phase = .stopped
                return [.finish]
            case .active:
                phase = .stopping
                return [.handBack]
            case .stopping, .stopped:
                return []
            }
        case .handedBack:
            guard phase == .stopping else { return [] }
            phase = .stopped
            trustedUntil = nil
            held = 0
            return [.finish]
        }
    }

    private mutating func tick(_ now: FleetInstant) -> [Action] {
        switch phase {
        case .joining:
            guard !joinInFlight, nextJoin.map({ now >= $0 }) ?? true else { return [] }
            joinInFlight = true
            return [.join]
        case .stopping, .stopped:
            return []
        case .active:
            break
        }
        var actions: [Action] = []
        let trusted = isTrusted(at: now)
        if !suspended, held > 0, let leaseEnd, now >= leaseEnd {
            suspended = true
            actions.append(.suspendRuns)
        }
        if !trusted, !lapseSeen {
            lapseSeen = true
            nextHeartbeat = now
        }
        if !heartbeatInFlight, nextHeartbeat.map({ now >= $0 }) ?? true {
            heartbeatInFlight = true
            actions.append(.heartbeat(sentAt: now))
        }
        if trusted, !suspended, !claimInFlight, held < capacity, wantsClaim || nextClaim.map({ now >= $0 }) ?? true {
            claimInFlight = true
            wantsClaim = false
            actions.append(.claim(capacity - held))
        }
        return actions
    }

    /// The fleet declared this worker dead: every task goes without a write; it joins again.
    private mutating func lost(_ now: FleetInstant) -> [Action] {
        guard phase == .active else {
            // Stopping: the hand-back finds nothing to hand back.
            return []
        }
        phase = .joining
        trustedUntil = nil
        held = 0
        suspended = false
        claimInFlight = false
        nextJoin = nil
        joinInFlight = true
        return [.dropAll, .join]
    }
}
