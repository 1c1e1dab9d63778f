import Tessera

/// A worker's share of a fleet-wide per-host transfer limit (`--fleet-host-connections N`): a
/// value that takes the manager's per-host transfers at each heartbeat and the database's answers,
/// and returns what to do, with no database, clock or actor of its own.
///
/// The database (`tessera_fleet_host_slots`) keeps the slots each worker holds for a host, and
/// counts a row only while its worker's lease is live, so the slots held over the fleet never add
/// up to more than `N`. Each worker keeps its scheduler's limit for the host at or below the slots
/// it holds (`transfers in flight ≤ limit ≤ slots held`), hence never more than `N` transfers to
/// a host over the fleet:
///
/// - **raise**: ``Action/acquire(_:want:)`` in the database first; once it answered
///   (``Event/acquired(_:slots:fairShare:othersWaiting:)``), ``Action/setLimit(_:_:)`` raises the
///   scheduler's limit;
/// - **lower**: ``Action/setLimit(_:_:)`` lowers the scheduler's limit first (the transfers above
///   it run to their end), and only once the transfers in flight are down to it does
///   ``Action/release(_:to:)`` write the smaller count;
/// - **fair share**: a worker holding more than `ceil(N / workers wanting the host)` while
///   another worker waits for the host lowers itself to that share;
/// - **lease lost**: every limit goes to 0 (the database's rows stopped counting with the lease).
///
/// At most one database call per host is under way, and one is asked for at most once per
/// heartbeat per host (never one per transfer).
package struct FleetHostSlots: Sendable {
    /// What happened.
    package enum Event: Sendable, Equatable {
        /// A heartbeat: the manager's transfers in flight and waiting, by host (`host:port`).
        case beat([String: HostTransfers])
        /// The database answered an acquire: the worker holds `slots` for the host now;
        /// `fairShare` is `ceil(N / workers wanting the host)`; `othersWaiting` whether another
        /// live worker wants more slots than it holds.
        case acquired(String, slots: Int, fairShare: Int, othersWaiting: Bool)
        /// The database wrote the smaller count of a release.
        case released(String, to: Int)
        /// A database call for the host failed: nothing changed there.
        case failed(String)
        /// The worker's lease ended (it is declared dead or rejoins as a new worker): its rows
        /// count no more.
        case leaseLost
    }

    /// What the worker does.
    package enum Action: Sendable, Equatable {
        /// Ask the database for up to `want` slots of the host in all (it never lowers what the
        /// worker holds, and records `want` for the fair share).
        case acquire(String, want: Int)
        /// Set the scheduler's limit for the host (0: no new transfer).
        case setLimit(String, Int)
        /// Write that the worker holds `to` slots of the host (fewer than before).
        case release(String, to: Int)
    }

    /// One host, as this worker sees it.
    struct Host: Sendable, Equatable {
        /// Slots held in the database (as it last answered).
        var held = 0
        /// The scheduler's limit for the host.
        var limit = 0
        /// Transfers in flight at the last heartbeat.
        var inFlight = 0
        /// The limit to raise to once an acquire is answered.
        var target = 0
        /// A database call is under way.
        var pending = false
        var fairShare: Int?
        var othersWaiting = false

        /// Nothing held, allowed, in flight or asked for: the host is forgotten.
        var isIdle: Bool { held == 0 && limit == 0 && inFlight == 0 && !pending }
    }

    /// The fleet-wide limit (`N`).
    package let fleetLimit: Int
    /// This worker's own limit per host (its `-N`, or its per-host limit): it never asks for more.
    package let localLimit: Int
    private(set) var hosts: [String: Host] = [:]

    /// A worker's share of `fleetLimit` transfers per host, asking for at most `localLimit`.
    package init(fleetLimit: Int, localLimit: Int) {
        self.fleetLimit = max(1, fleetLimit)
        self.localLimit = max(1, localLimit)
    }

    /// Slots held for `host`, as the database last answered.
    package func held(_ host: String) -> Int { hosts[host]?.held ?? 0 }

    /// The scheduler's limit for `host` as set by this value.
    package func limit(_ host: String) -> Int { hosts[host]?.limit ?? 0 }

    /// Takes `event`; returns the actions to carry out, in order.
    package mutating func handle(_ event: Event) -> [Action] {
        var actions: [Action] = []
        switch event {
        case .beat(let transfers):
            for host in Set(transfers.keys).union(hosts.keys).sorted() {
                beat(host, transfers[host] ?? HostTransfers(inFlight: 0, waiting: 0), into: &actions)
            }

        case .acquired(let name, let slots, let fairShare, let othersWaiting):
            guard var host = hosts[name], host.pending else { return [] }
            host.pending = false
            host.held = max(0, slots)
            host.fairShare = max(1, fairShare)
            host.othersWaiting = othersWaiting
            // Raise only after the database granted, never above what it granted.
            let raised = min(host.held, host.target)
            if raised > host.limit {
                host.limit = raised
                actions.append(.setLimit(name, raised))
            } else if host.held < host.limit {
                // (Fewer than the scheduler may use: its lease lapsed meanwhile. Never above.)
                host.limit = host.held
                actions.append(.setLimit(name, host.held))
            }
            hosts[name] = host

        case .released(let name, let to):
            guard var host = hosts[name], host.pending else { return [] }
            host.pending = false
            host.held = max(0, to)
            hosts[name] = host
            if host.isIdle { hosts[name] = nil }

        case .failed(let name):
            hosts[name]?.pending = false

        case .leaseLost:
            for (name, host) in hosts.sorted(by: { $0.key < $1.key }) where host.limit > 0 {
                actions.append(.setLimit(name, 0))
            }
            hosts.removeAll()
        }
        return actions
    }

    private mutating func beat(_ name: String, _ transfers: HostTransfers, into actions: inout [Action]) {
        var host = hosts[name] ?? Host()
        host.inFlight = max(0, transfers.inFlight)
        defer { hosts[name] = host.isIdle && transfers.waiting <= 0 ? nil : host }
        guard !host.pending else { return }
        let wanted = min(fleetLimit, localLimit, max(0, transfers.inFlight) + max(0, transfers.waiting))
        var target = wanted
        if host.othersWaiting, let share = host.fairShare { target = min(target, share) }
        host.target = target
        // Lower: the scheduler first.
        if host.limit > target {
            host.limit = target
            actions.append(.setLimit(name, target))
        }
        // ... the database once the transfers above the limit ended.
        if host.held > host.limit, host.inFlight <= host.limit {
            host.pending = true
            actions.append(.release(name, to: host.limit))
            return
        }
        // Raise, or tell the database what this worker wants (for the others' fair share).
        if wanted > 0 || host.held > 0 {
            host.pending = true
            actions.append(.acquire(name, want: target))
        }
    }
}
