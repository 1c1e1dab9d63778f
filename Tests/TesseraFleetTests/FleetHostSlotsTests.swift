import Tessera
import Testing

@testable import TesseraFleet

/// A worker's share of a fleet-wide per-host limit, as a value: no database, clock or actor.
@Suite struct FleetHostSlotsTests {
    let host = "origin:80"

    func transfers(_ inFlight: Int, waiting: Int) -> [String: HostTransfers] {
        [host: HostTransfers(inFlight: inFlight, waiting: waiting)]
    }

    @Test func aRaiseAsksTheDatabaseFirstAndRaisesTheSchedulerOnlyToWhatItGranted() {
        var slots = FleetHostSlots(fleetLimit: 3, localLimit: 8)
        // Five segments wait: the worker asks for the fleet's 3, and the scheduler stays at 0.
        #expect(slots.handle(.beat(transfers(0, waiting: 5))) == [.acquire(host, want: 3)])
        #expect(slots.limit(host) == 0)
        // A second heartbeat while the acquire is under way asks nothing more.
        #expect(slots.handle(.beat(transfers(0, waiting: 5))) == [])
        // The database gave 2 (another worker holds 1): the scheduler goes to 2, not 3.
        #expect(slots.handle(.acquired(host, slots: 2, fairShare: 2, othersWaiting: false)) == [.setLimit(host, 2)])
        #expect(slots.held(host) == 2 && slots.limit(host) == 2)
        // Next beat asks again for 3; granted 3 raises to 3.
        #expect(slots.handle(.beat(transfers(2, waiting: 3))) == [.acquire(host, want: 3)])
        #expect(slots.handle(.acquired(host, slots: 3, fairShare: 3, othersWaiting: false)) == [.setLimit(host, 3)])
    }

    @Test func neverAsksForMoreThanItsOwnLimitOrItsDemand() {
        var slots = FleetHostSlots(fleetLimit: 6, localLimit: 2)
        #expect(slots.handle(.beat(transfers(0, waiting: 5))) == [.acquire(host, want: 2)])
        var small = FleetHostSlots(fleetLimit: 6, localLimit: 8)
        #expect(small.handle(.beat(transfers(0, waiting: 1))) == [.acquire(host, want: 1)])
        #expect(small.handle(.beat([:])) == [], "one call per host at once")
    }

    @Test func aLowerSetsTheSchedulerFirstAndReleasesOnceTheTransfersAboveEnded() {
        var slots = FleetHostSlots(fleetLimit: 3, localLimit: 8)
        _ = slots.handle(.beat(transfers(0, waiting: 4)))
        _ = slots.handle(.acquired(host, slots: 3, fairShare: 3, othersWaiting: false))
        // Another worker waits: the fair share is ceil(3 / 2) = 2.
        _ = slots.handle(.beat(transfers(3, waiting: 1)))
        #expect(slots.handle(.acquired(host, slots: 3, fairShare: 2, othersWaiting: true)) == [])
        // The scheduler goes to 2 at once; with 3 in flight the database keeps 3 (a refresh only).
        #expect(slots.handle(.beat(transfers(3, waiting: 1))) == [.setLimit(host, 2), .acquire(host, want: 2)])
        #expect(slots.held(host) == 3)
        _ = slots.handle(.acquired(host, slots: 3, fairShare: 2, othersWaiting: true))
        // One transfer ended: 2 in flight, the release writes 2.
        #expect(slots.handle(.beat(transfers(2, waiting: 1))) == [.release(host, to: 2)])
        #expect(slots.handle(.released(host, to: 2)) == [])
        #expect(slots.held(host) == 2 && slots.limit(host) == 2)
    }

    @Test func anIdleHostIsGivenBackAndForgotten() {
        var slots = FleetHostSlots(fleetLimit: 3, localLimit: 8)
        _ = slots.handle(.beat(transfers(0, waiting: 1)))
        _ = slots.handle(.acquired(host, slots: 1, fairShare: 3, othersWaiting: false))
        // Done: no transfer, no demand: limit 0, then (nothing in flight) release to 0.
        #expect(slots.handle(.beat([:])) == [.setLimit(host, 0), .release(host, to: 0)])
        #expect(slots.handle(.released(host, to: 0)) == [])
        #expect(slots.hosts.isEmpty)
        #expect(slots.handle(.beat([:])) == [])
    }

    @Test(arguments: 0..<20) func theInvariantHoldsOverRandomAnswers(seed: Int) {
        // transfers in flight ≤ the scheduler's limit ≤ slots held in the database, whatever the
        // database answers and however the demand moves (the scheduler never grants above its limit).
        var random = SplitMixRandom(seed: UInt64(seed) &* 0x9E37_79B9_7F4A_7C15 &+ 7)
        do {
            var slots = FleetHostSlots(fleetLimit: 4, localLimit: 3)
            var inFlight = 0, dbHeld = 0
            var pending: FleetHostSlots.Action?
            for _ in 0..<200 {
                switch Int.random(in: 0..<4, using: &random) {
                case 0:
                    // The scheduler grants up to its limit, transfers end.
                    inFlight = Int.random(in: 0...max(inFlight, slots.limit(host)), using: &random)
                    let actions = slots.handle(.beat(transfers(inFlight, waiting: Int.random(in: 0...4, using: &random))))
                    for action in actions {
                        if case .setLimit = action { continue }
                        pending = action
                    }
                default:
                    guard let action = pending else { continue }
                    pending = nil
                    switch action {
                    case .acquire(_, let want):
                        if Bool.random(using: &random) {
                            dbHeld = max(dbHeld, Int.random(in: 0...want, using: &random))
                            _ = slots.handle(.acquired(host, slots: dbHeld, fairShare: Int.random(in: 1...4, using: &random), othersWaiting: Bool.random(using: &random)))
                        } else {
                            _ = slots.handle(.failed(host))
                        }
                    case .release(_, let to):
                        #expect(inFlight <= to, "released below what is in flight")
                        dbHeld = to
                        _ = slots.handle(.released(host, to: to))
                    case .setLimit: break
                    }
                }
                #expect(slots.limit(host) <= dbHeld, "the scheduler's limit above the slots held")
                if inFlight > slots.limit(host) { inFlight = min(inFlight, dbHeld) }
            }
        }
    }

    @Test func anAnswerBelowTheLimitLowersTheSchedulerAtOnce() {
        var slots = FleetHostSlots(fleetLimit: 3, localLimit: 8)
        _ = slots.handle(.beat(transfers(0, waiting: 3)))
        _ = slots.handle(.acquired(host, slots: 3, fairShare: 3, othersWaiting: false))
        _ = slots.handle(.beat(transfers(3, waiting: 2)))
        // The worker's lease lapsed between two beats: the database gives it nothing.
        #expect(slots.handle(.acquired(host, slots: 0, fairShare: 3, othersWaiting: false)) == [.setLimit(host, 0)])
        #expect(slots.limit(host) == 0)
    }

    @Test func aLostLeaseStopsEveryHost() {
        var slots = FleetHostSlots(fleetLimit: 3, localLimit: 8)
        _ = slots.handle(.beat(transfers(0, waiting: 2)))
        _ = slots.handle(.acquired(host, slots: 2, fairShare: 3, othersWaiting: false))
        #expect(slots.handle(.leaseLost) == [.setLimit(host, 0)])
        #expect(slots.held(host) == 0)
        #expect(slots.handle(.acquired(host, slots: 2, fairShare: 3, othersWaiting: false)) == [], "a late answer of the old lease")
    }
}
