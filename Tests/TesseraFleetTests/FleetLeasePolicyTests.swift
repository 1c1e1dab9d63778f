import Testing

@testable import TesseraFleet

/// The lease policy as a value: events in, actions out, no database, clock or actor.
@Suite struct FleetLeasePolicyTests {
    let timing = FleetLeasePolicy.Timing.quick  // lease 2 s, heartbeat 0.5 s, margin 0.4 s
    func at(_ milliseconds: Int) -> FleetInstant { FleetInstant(nanoseconds: UInt64(10_000 + milliseconds) * 1_000_000) }

    /// A worker that joined at 0 and holds `held` tasks.
    func joined(capacity: Int = 3, held: Int = 0) -> FleetLeasePolicy {
        var policy = FleetLeasePolicy(timing: timing, capacity: capacity)
        #expect(policy.handle(.tick(at: at(0))) == [.join])
        #expect(policy.handle(.joined(sentAt: at(0), at: at(5))) == [.claim(capacity)])
        if held > 0 { _ = policy.handle(.claimed(count: held, asked: capacity, at: at(6))) }
        return policy
    }

    @Test func joiningClaimsUpToCapacityAndTrustsFromTheSendTime() {
        var policy = joined(capacity: 3)
        #expect(policy.trustedUntil == at(1600))  // sent at 0 + lease 2 s - margin 0.4 s
        #expect(policy.isTrusted(at: at(1599)))
        #expect(!policy.isTrusted(at: at(1600)))
        // A full answer asks again; a short one waits for the poll or a wake-up.
        #expect(policy.handle(.claimed(count: 1, asked: 3, at: at(10))) == [])
        #expect(policy.handle(.woken(at: at(20))) == [.claim(2)])
    }

    @Test func heartbeatsComeOnTimeAndRenewFromTheirSendTime() {
        var policy = joined(held: 1)
        #expect(policy.handle(.tick(at: at(400))).contains { if case .heartbeat = $0 { true } else { false } } == false)
        let actions = policy.handle(.tick(at: at(500)))
        #expect(actions.contains(.heartbeat(sentAt: at(500))))
        // No second heartbeat while one is in flight.
        #expect(!policy.handle(.tick(at: at(700))).contains(.heartbeat(sentAt: at(700))))
        // Answered late: the trust counts from the send time, never from the answer.
        #expect(policy.handle(.heartbeatAnswered(sentAt: at(500), alive: true, at: at(900))).first == .rescue)
        #expect(policy.trustedUntil == at(2100))
    }

    @Test func aFreezeShorterThanTheLeaseRenewsTheSameLeaseWithoutSuspending() {
        var policy = joined(held: 2)
        // Frozen from 10 ms to 1.5 s: still trusted (until 1.6 s); one heartbeat, no suspension.
        let actions = policy.handle(.tick(at: at(1500)))
        #expect(actions.contains(.heartbeat(sentAt: at(1500))))
        #expect(!actions.contains(.suspendRuns))
        #expect(policy.handle(.heartbeatAnswered(sentAt: at(1500), alive: true, at: at(1502))) == [.rescue])
        #expect(!policy.suspended)
    }

    @Test func pastTheTrustTheFenceClosesAndPastTheLeaseEndTheRunsStop() {
        var policy = joined(held: 2)
        _ = policy.handle(.tick(at: at(500)))
        _ = policy.handle(.heartbeatFailed(sentAt: at(500), at: at(510)))
        // Trust ends at 1.6 s: writes stop (the fence reads isTrusted), runs go on until the lease
        // may have ended (2.0 s), where they are suspended.
        #expect(!policy.isTrusted(at: at(1700)))
        let before = policy.handle(.tick(at: at(1700)))
        #expect(!before.contains(.suspendRuns))
        #expect(policy.handle(.heartbeatFailed(sentAt: at(1700), at: at(1710))) == [])
        #expect(policy.handle(.tick(at: at(2000))).first == .suspendRuns)
        // No claim while the lease is in doubt.
        #expect(!policy.handle(.woken(at: at(2001))).contains { if case .claim = $0 { true } else { false } })
        // The database comes back and the lease still holds: the runs resume.
        _ = policy.handle(.tick(at: at(2100)))
        let renewed = policy.handle(.heartbeatAnswered(sentAt: at(2100), alive: true, at: at(2105)))
        #expect(renewed.prefix(2) == [.resumeRuns, .rescue])
        #expect(policy.isTrusted(at: at(2105)))
    }

    @Test func aWorkerDeclaredDeadDropsEverythingAndJoinsAgain() {
        var policy = joined(held: 3)
        // SIGSTOP for 10 s, then SIGCONT: suspended and heartbeating at once.
        let woke = policy.handle(.tick(at: at(10_000)))
        #expect(woke.first == .suspendRuns)
        #expect(woke.contains(.heartbeat(sentAt: at(10_000))))
        #expect(policy.handle(.heartbeatAnswered(sentAt: at(10_000), alive: false, at: at(10_002))) == [.dropAll, .join])
        #expect(policy.phase == .joining)
        #expect(policy.held == 0)
        #expect(!policy.isTrusted(at: at(10_002)))
        #expect(policy.handle(.joined(sentAt: at(10_003), at: at(10_004))) == [.claim(3)])
        #expect(policy.joins == 2)
    }

    @Test func aGracefulStopHandsBackAndClaimsNothingMore() {
        var policy = joined(held: 2)
        #expect(policy.handle(.stopRequested(at: at(100))) == [.handBack])
        #expect(policy.handle(.woken(at: at(101))) == [])
        #expect(policy.handle(.released(count: 2, at: at(102))) == [])
        #expect(policy.handle(.handedBack(at: at(150))) == [.finish])
        #expect(policy.phase == .stopped)
    }

    @Test func releasedTasksMakeRoomForClaims() {
        var policy = joined(capacity: 2, held: 2)
        #expect(policy.handle(.woken(at: at(50))) == [])
        #expect(policy.handle(.released(count: 1, at: at(60))) == [.claim(1)])
    }

    @Test func aFailedJoinIsTriedAgainAfterAHeartbeat() {
        var policy = FleetLeasePolicy(timing: timing, capacity: 1)
        #expect(policy.handle(.tick(at: at(0))) == [.join])
        #expect(policy.handle(.joinFailed(at: at(10))) == [])
        #expect(policy.handle(.tick(at: at(200))) == [])
        #expect(policy.handle(.tick(at: at(510))) == [.join])
    }

    @Test func deadlinesCoverTheNextHeartbeatAndTheLeaseEnd() {
        let policy = joined(held: 1)
        #expect(policy.nextDeadline() == at(500))
        #expect(FleetLeasePolicy.Timing.standard.problem == nil)
        #expect(FleetLeasePolicy.Timing(lease: .seconds(2), heartbeat: .seconds(2), margin: .zero, claimPoll: .seconds(1)).problem != nil)
    }
}

/// A worker's health as `fleet status` and the dashboard show it, from its row's times.
@Suite struct FleetWorkerHealthTests {
    @Test func aWorkerIsAliveLateDeadOrGoneByItsHeartbeatAndLease() {
        func health(_ state: String, since: Double, expiry: Double) -> FleetStatus.Worker.Health {
            FleetStatus.Worker.health(state: state, secondsSinceHeartbeat: since, secondsToExpiry: expiry, lease: 15)
        }
        #expect(health("active", since: 1, expiry: 14) == .alive)
        // A heartbeat every 5 s, a margin of 3 s: one missed past 8 s.
        #expect(health("active", since: 8, expiry: 7) == .alive)
        #expect(health("active", since: 8.5, expiry: 6.5) == .late)
        #expect(health("active", since: 15.5, expiry: -0.5) == .dead)
        #expect(health("dead", since: 40, expiry: -25) == .dead)
        #expect(health("gone", since: 2, expiry: -2) == .gone)
    }
}
