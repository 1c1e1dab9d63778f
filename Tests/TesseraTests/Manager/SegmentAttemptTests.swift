import Testing
@testable import Tessera

/// A segment's attempts, decided without a network or a clock.
@Suite struct SegmentAttemptTests {
    let policy = RetryPolicy(maxAttempts: 3, baseDelay: .milliseconds(100), maxDelay: .seconds(1))
    let none: (Int) -> Duration? = { _ in nil }

    func attempt(mirrors: Int = 1, dead: Set<Int> = [], sharesFile: Bool = false) -> SegmentAttempt {
        SegmentAttempt(mirrorCount: mirrors, dead: dead, sharesFile: sharesFile, policy: policy, seed: 1)
    }

    func status(_ code: Int, retryAfter: Duration? = nil) -> DownloadError {
        DownloadError(.httpStatus, "status \(code)", httpStatus: code, retryAfter: retryAfter)
    }

    @Test func theFirstLiveURLGoesFirst() {
        var machine = attempt(mirrors: 3, dead: [0])
        #expect(machine.start(waitFor: none) == .fetch(mirror: 1, fromScratch: false))
    }

    @Test func aTransientFailureTriesTheNextURLAtOnceThenBacksOff() {
        var machine = attempt(mirrors: 2)
        _ = machine.start(waitFor: none)
        #expect(machine.next(after: .failed(status(503), progressed: false), waitFor: none) == .fetch(mirror: 1, fromScratch: false))
        guard case .wait(let delay, let mirror, false) = machine.next(after: .failed(status(503), progressed: false), waitFor: none) else {
            Issue.record("expected a wait after every URL failed once")
            return
        }
        #expect(mirror == 0)
        #expect(delay >= .milliseconds(50) && delay <= .milliseconds(100), "equal jitter of the first backoff")
    }

    @Test func retriesRunOutAfterMaxAttemptsRounds() {
        var machine = attempt()
        _ = machine.start(waitFor: none)
        let error = DownloadError(.timeout, "slow")
        for _ in 0..<2 {
            guard case .wait = machine.next(after: .failed(error, progressed: false), waitFor: none) else {
                Issue.record("expected a wait")
                return
            }
        }
        #expect(machine.next(after: .failed(error, progressed: false), waitFor: none) == .fail(error))
    }

    @Test func progressForgivesEarlierFailures() {
        var machine = attempt()
        _ = machine.start(waitFor: none)
        let error = DownloadError(.connectionLost, "dropped")
        for _ in 0..<10 {
            guard case .wait = machine.next(after: .failed(error, progressed: true), waitFor: none) else {
                Issue.record("a connection that keeps making progress is never given up on")
                return
            }
        }
        #expect(machine.failures == 1)
    }

    @Test func retryAfterLongerThanTheBackoffWins() {
        var machine = attempt()
        _ = machine.start(waitFor: none)
        let action = machine.next(after: .failed(status(503, retryAfter: .seconds(7)), progressed: false), waitFor: none)
        #expect(action == .wait(.seconds(7), mirror: 0, fromScratch: false))
    }

    @Test func aURLAServerAskedToWaitForIsSkippedForAFreeOne() {
        var machine = attempt(mirrors: 2)
        let held: (Int) -> Duration? = { $0 == 0 ? .seconds(2) : nil }
        #expect(machine.start(waitFor: held) == .fetch(mirror: 1, fromScratch: false))
        var alone = attempt()
        #expect(alone.start(waitFor: held) == .wait(.seconds(2), mirror: 0, fromScratch: false))
    }

    @Test func everyURLUnreachableWaitsForTheNetwork() {
        var machine = attempt(mirrors: 2)
        _ = machine.start(waitFor: none)
        let refused = DownloadError(.connectionRefused, "refused")
        #expect(machine.next(after: .failed(refused, progressed: false), waitFor: none) == .fetch(mirror: 1, fromScratch: false))
        #expect(machine.next(after: .failed(refused, progressed: false), waitFor: none) == .waitForNetwork(refused))
    }

    @Test func aGoneURLIsDeadAndTheLastOneResolvesAgain() {
        var machine = attempt(mirrors: 2)
        _ = machine.start(waitFor: none)
        #expect(machine.next(after: .failed(status(404), progressed: false), waitFor: none) == .fetch(mirror: 1, fromScratch: false))
        #expect(machine.deadMirrors == [0])
        #expect(machine.next(after: .failed(status(410), progressed: false), waitFor: none) == .reResolve(status(410)))
        var forbidden = attempt()
        _ = forbidden.start(waitFor: none)
        #expect(forbidden.next(after: .failed(status(401), progressed: false), waitFor: none) == .fail(status(401)))
    }

    @Test func aChangedResourceUnderASharedFileStartsTheOutputOver() {
        var pieces = attempt(sharesFile: true)
        _ = pieces.start(waitFor: none)
        let changed = DownloadError(.contentChanged, "changed")
        #expect(pieces.next(after: .failed(changed, progressed: false), waitFor: none) == .resetOutput(changed))
        #expect(pieces.next(after: .failed(status(412), progressed: false), waitFor: none) == .resetOutput(status(412)))
        // Only resumed bytes were of another version (another mirror's): only they go.
        var resumed = attempt(sharesFile: true)
        _ = resumed.start(waitFor: none)
        #expect(resumed.next(after: .failed(changed, progressed: false, resumed: true), waitFor: none) == .fetch(mirror: 0, fromScratch: true))
        var own = attempt(sharesFile: false)
        _ = own.start(waitFor: none)
        #expect(own.next(after: .failed(changed, progressed: false), waitFor: none) == .fetch(mirror: 0, fromScratch: true))
    }

    @Test func aChecksumMismatchIsFetchedOnceMoreFromAnotherURL() {
        var machine = attempt(mirrors: 2)
        _ = machine.start(waitFor: none)
        let mismatch = DownloadError(.checksumMismatch, "bad")
        #expect(machine.next(after: .checksumMismatch(mismatch), waitFor: none) == .fetch(mirror: 1, fromScratch: true))
        guard case .fail(let error) = machine.next(after: .checksumMismatch(mismatch), waitFor: none) else {
            Issue.record("a second mismatch fails")
            return
        }
        #expect(error.code == .checksumMismatch)
        #expect(error.message.contains("second time"))
    }

    @Test func aLocalFailureIsNeverRetried() {
        var machine = attempt(mirrors: 3)
        _ = machine.start(waitFor: none)
        let full = DownloadError(.diskFull, "full")
        #expect(machine.next(after: .failed(full, progressed: true), waitFor: none) == .fail(full))
    }
}

@Suite struct SplitPlanTests {
    let mib: Int64 = 1 << 20

    @Test func aGapNobodyFetchesComesFirst() {
        let active = [SplitPlan.Active(id: 0, start: 0, position: 10, end: 100 * mib)]
        #expect(SplitPlan.next(unassigned: [200..<300], active: active, minimumPiece: mib) == .gap(200..<300))
    }

    @Test func theBusiestConnectionGivesHalfOfItsRest() {
        let active = [
            SplitPlan.Active(id: 0, start: 0, position: 10 * mib, end: 20 * mib),
            SplitPlan.Active(id: 1, start: 20 * mib, position: 30 * mib, end: 100 * mib),
        ]
        guard case .split(let id, let at, let end) = SplitPlan.next(unassigned: [], active: active, minimumPiece: mib) else {
            Issue.record("expected a split")
            return
        }
        #expect(id == 1)
        #expect(end == 100 * mib)
        #expect(at == 65 * mib, "half of the 70 MiB left, on a 64 KiB boundary")
        #expect(at % (64 * 1024) == 0)
    }

    @Test func theBusiestKeepsTheShareOfItsRestThatEndsWithTheNewConnection() {
        // 100 MiB left at 10 MiB/s; a connection that finished went at 30 MiB/s: it keeps a
        // quarter (2.5 s each), split on a 64 KiB boundary.
        let busy = SplitPlan.Active(id: 3, start: 0, position: 20 * mib, end: 120 * mib, bytesPerSecond: Double(10 * mib))
        #expect(SplitPlan.next(unassigned: [], active: [busy], minimumPiece: mib, minimumSeconds: 2, typicalSpeed: Double(30 * mib))
            == .split(id: 3, at: 45 * mib, end: 120 * mib))
        // Equal speeds: half.
        #expect(SplitPlan.next(unassigned: [], active: [busy], minimumPiece: mib, minimumSeconds: 2, typicalSpeed: Double(10 * mib))
            == .split(id: 3, at: 70 * mib, end: 120 * mib))
        // Much slower: it keeps the minimum; its speed since it was found slow counts first.
        var crawling = busy
        crawling.bytesPerSecondSinceSlow = 1
        crawling.slowSince = 0
        #expect(SplitPlan.next(
            unassigned: [], active: [crawling], minimumPiece: mib, minimumSeconds: 2, typicalSpeed: Double(30 * mib), now: 1 << 40)
            == .split(id: 3, at: 21 * mib, end: 120 * mib))
        // No typical speed: half.
        #expect(SplitPlan.next(unassigned: [], active: [busy], minimumPiece: mib, minimumSeconds: 2) == .split(id: 3, at: 70 * mib, end: 120 * mib))
    }

    @Test func nothingIsSplitBelowTwiceTheMinimum() {
        let active = [SplitPlan.Active(id: 0, start: 0, position: 9 * mib, end: 10 * mib + 1)]
        #expect(SplitPlan.next(unassigned: [], active: active, minimumPiece: mib) == .none)
    }

    @Test func bothHalvesHoldAtLeastTheMinimum() {
        for remaining in stride(from: 2 * mib, through: 3 * mib, by: 4097) {
            let active = [SplitPlan.Active(id: 0, start: 0, position: 7, end: 7 + remaining)]
            guard case .split(_, let at, let end) = SplitPlan.next(unassigned: [], active: active, minimumPiece: mib) else { continue }
            #expect(at - 7 >= mib && end - at >= mib, "remaining \(remaining)")
        }
    }

    @Test func theFirstConnectionKeepsAnEqualShare() {
        // 1 GiB over 8 connections: the first stops at 128 MiB.
        #expect(SplitPlan.firstEnd(length: 1024 * mib, connections: 8, position: 3 * mib, minimumPiece: 4 * mib) == 128 * mib)
        // Shares are aligned up to 64 KiB.
        #expect(SplitPlan.firstEnd(length: 100 * mib + 1, connections: 4, position: 0, minimumPiece: mib) == 25 * mib + 64 * 1024)
        // Already past its share, alone, or a share under the minimum: not cut.
        #expect(SplitPlan.firstEnd(length: 1024 * mib, connections: 8, position: 200 * mib, minimumPiece: 4 * mib) == nil)
        #expect(SplitPlan.firstEnd(length: 1024 * mib, connections: 1, position: 0, minimumPiece: 4 * mib) == nil)
        #expect(SplitPlan.firstEnd(length: 6 * mib, connections: 8, position: 0, minimumPiece: 4 * mib) == nil)
    }

    @Test func theConnectionCountFollowsTheRest() {
        let policy = SplitPolicy(minimumSize: 20 * mib, pieceSize: 4 * mib, maxConnections: 8)
        // Under the minimum size: one; then one per piece, up to the maximum.
        #expect(policy.connections(forRest: 20 * mib - 1) == 1)
        #expect(policy.connections(forRest: 20 * mib) == 5)
        #expect(policy.connections(forRest: 27 * mib) == 6)
        #expect(policy.connections(forRest: 1024 * mib) == 8)
        #expect(policy.connections(forRest: .max) == 8)
        #expect(SplitPolicy(maxConnections: 1).connections(forRest: 1024 * mib) == 1)
        // Under a global rate limit, one: the limit sets the speed.
        #expect(policy.connections(forRest: 1024 * mib, rateLimited: true) == 1)
        // A piece size of 0 or less is taken as 1 byte, not a division by zero.
        #expect(SplitPolicy(minimumSize: 0, pieceSize: 0, maxConnections: 3).connections(forRest: 2) == 2)
    }

    @Test func aGapIsSharedOutEquallyAmongTheConnectionsAboutToTakeIt() {
        // After the first took 0..<128 MiB, seven connections share the rest: each asks for
        // exactly one eighth, and the last takes what is left.
        var unassigned: [Range<Int64>] = [128 * mib..<1024 * mib]
        var taken: [Range<Int64>] = []
        for sharers in stride(from: 7, through: 1, by: -1) {
            guard case .gap(let range) = SplitPlan.next(unassigned: unassigned, active: [], minimumPiece: 4 * mib, sharers: sharers) else {
                Issue.record("expected a gap")
                return
            }
            taken.append(range)
            unassigned = range.upperBound < 1024 * mib ? [range.upperBound..<1024 * mib] : []
        }
        #expect(taken.map(\.count) == Array(repeating: Int(128 * mib), count: 7))
        #expect(taken.last?.upperBound == 1024 * mib)
        // A rest under the minimum goes with the share before it.
        #expect(SplitPlan.next(unassigned: [0..<7 * mib], active: [], minimumPiece: 4 * mib, sharers: 2) == .gap(0..<7 * mib))
        #expect(SplitPlan.next(unassigned: [0..<9 * mib], active: [], minimumPiece: 4 * mib, sharers: 2) == .gap(0..<(4 * mib + mib / 2)))
    }

    @Test func aRestIsSplitAgainOnlyWhenItWouldTakeAWhile() {
        let slow = SplitPlan.Active(id: 1, start: 0, position: 0, end: 100 * mib, bytesPerSecond: Double(10 * mib))
        let fast = SplitPlan.Active(id: 1, start: 0, position: 0, end: 100 * mib, bytesPerSecond: Double(200 * mib))
        // 10 s left at its speed: split; half a second: left alone (cutting costs what is in flight).
        guard case .split(1, _, _) = SplitPlan.next(unassigned: [], active: [slow], minimumPiece: mib, minimumSeconds: 2) else {
            Issue.record("a slow connection's rest is split")
            return
        }
        #expect(SplitPlan.next(unassigned: [], active: [fast], minimumPiece: mib, minimumSeconds: 2) == .none)
        // Not measured yet: judged at the speed a finished connection went.
        var unmeasured = slow
        unmeasured.bytesPerSecond = nil
        #expect(SplitPlan.next(unassigned: [], active: [unmeasured], minimumPiece: mib, minimumSeconds: 2, typicalSpeed: Double(400 * mib)) == .none)
        guard case .split = SplitPlan.next(unassigned: [], active: [unmeasured], minimumPiece: mib, minimumSeconds: 2, typicalSpeed: Double(mib)) else {
            Issue.record("a rest that would take long at the typical speed is split")
            return
        }
    }

    @Test func aRestSlowOnlyAtItsConnectionsSpeedIsLookedAtAgainBeforeItIsSplit() {
        let second: UInt64 = 1_000_000_000
        // 10 s left at its own speed, a quarter of a second at the speed a finished connection
        // went: a connection its siblings crowd out of a shared link, perhaps.
        var crowded = SplitPlan.Active(id: 1, start: 0, position: 0, end: 100 * mib, bytesPerSecond: Double(10 * mib))
        let typical = Double(400 * mib)
        func look(at now: UInt64) -> SplitPlan.Choice {
            SplitPlan.next(unassigned: [], active: [crowded], minimumPiece: mib, minimumSeconds: 2, typicalSpeed: typical, now: now)
        }
        #expect(SplitPlan.lookAgainDelay(minimumSeconds: 2) == .milliseconds(500))
        #expect(look(at: 10 * second) == .later(id: 1, after: .milliseconds(500)), "first found slow: look again in half a second")
        crowded.slowSince = 10 * second
        #expect(look(at: 10 * second + second / 5) == .later(id: 1, after: .milliseconds(300)), "another look meanwhile waits for the rest of it")
        guard case .split(1, _, _) = look(at: 10 * second + second / 2) else {
            Issue.record("once the delay has passed, not measured faster since: split")
            return
        }
        crowded.bytesPerSecondSinceSlow = Double(10 * mib)
        guard case .split(1, _, _) = look(at: 10 * second + second / 2) else {
            Issue.record("still as slow since it was found slow: split")
            return
        }
        // Sped up since it was found slow (its siblings ended): left alone.
        crowded.bytesPerSecondSinceSlow = Double(400 * mib)
        #expect(look(at: 10 * second + second / 2) == .none)
        // Long even at the typical speed: split at once.
        guard case .split = SplitPlan.next(
            unassigned: [], active: [crowded.with(slowSince: nil)], minimumPiece: mib, minimumSeconds: 2,
            typicalSpeed: Double(10 * mib), now: 0)
        else {
            Issue.record("a rest long at every speed is split at once")
            return
        }
        // Not measured: judged at the typical speed alone, as before (no wait).
        var unmeasured = crowded.with(slowSince: nil)
        unmeasured.bytesPerSecond = nil
        #expect(SplitPlan.next(unassigned: [], active: [unmeasured], minimumPiece: mib, minimumSeconds: 2, typicalSpeed: typical) == .none)
        // Too small to split: nothing to wait for either.
        let small = SplitPlan.Active(id: 2, start: 0, position: 0, end: mib, bytesPerSecond: 1)
        #expect(SplitPlan.next(unassigned: [], active: [small], minimumPiece: mib, minimumSeconds: 2, typicalSpeed: typical) == .none)
    }
}

extension SplitPlan.Active {
    func with(slowSince: UInt64?) -> Self {
        var copy = self
        copy.slowSince = slowSince
        return copy
    }
}

@Suite struct ByteRangesTests {
    @Test func insertMergesOverlappingAndTouchingRanges() {
        var ranges = ByteRanges()
        ranges.insert(10..<20)
        ranges.insert(30..<40)
        ranges.insert(20..<30)
        #expect(ranges.ranges == [10..<40])
        ranges.insert(0..<5)
        ranges.insert(3..<12)
        #expect(ranges.ranges == [0..<40])
        ranges.insert(50..<60)
        #expect(ranges.count == 50)
    }

    @Test func gapsContainsAndRemove() {
        var ranges = ByteRanges([0..<10, 20..<30])
        #expect(ranges.gaps(in: 0..<40) == [10..<20, 30..<40])
        #expect(ranges.contains(2..<8))
        #expect(!ranges.contains(5..<25))
        #expect(ranges.contiguousCount(from: 22) == 8)
        #expect(ranges.contiguousCount(from: 15) == 0)
        ranges.remove(5..<25)
        #expect(ranges.ranges == [0..<5, 25..<30])
        #expect(ranges.clamped(to: 3..<27).ranges == [3..<5, 25..<27])
    }

    @Test func aRandomWorkloadMatchesASetOfBytes() {
        var random = SplitMixRandom(seed: 3)
        var ranges = ByteRanges()
        var bytes = Set<Int64>()
        for _ in 0..<500 {
            let start = Int64(random.next() % 200), length = Int64(random.next() % 20)
            if random.next() % 4 == 0 {
                ranges.remove(start..<start + length)
                bytes.subtract(start..<start + length)
            } else {
                ranges.insert(start..<start + length)
                bytes.formUnion(start..<start + length)
            }
        }
        #expect(ranges.count == Int64(bytes.count))
        for position in Int64(0)..<220 { #expect(ranges.contains(position..<position + 1) == bytes.contains(position)) }
        for (first, second) in zip(ranges.ranges, ranges.ranges.dropFirst()) { #expect(first.upperBound < second.lowerBound) }
    }
}
