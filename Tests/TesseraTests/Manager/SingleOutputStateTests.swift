import Testing
@testable import Tessera

/// A single output's ranges over a pass, decided without a network or a clock: the range each
/// new connection asks for, and what each connection's end leaves.
@Suite struct SingleOutputStateTests {
    let mib: Int64 = 1 << 20
    let splitting = SplitPolicy(minimumSize: 20 << 20, pieceSize: 4 << 20, maxConnections: 8, resplitMinimumSeconds: 2)
    let second: UInt64 = 1_000_000_000

    func known(_ length: Int64) -> SingleOutputState.Resource { SingleOutputState.Resource(length: length) }
    let unknown = SingleOutputState.Resource(length: nil)

    /// The next connection's piece (`nil`: none is worth it, now or later).
    func next(_ state: inout SingleOutputState, _ resource: SingleOutputState.Resource, now: UInt64) -> (id: Int, piece: SingleOutputState.Piece)? {
        guard case .started(let started) = state.startPiece(attemptKey: nil, resource, splitting: splitting, now: now) else { return nil }
        return started
    }

    /// A file of `length` bytes with ranges that two connections share: the state and their ids.
    func twoHalves(of length: Int64) throws -> (SingleOutputState, Int, Int) {
        var state = SingleOutputState()
        state.rangesAllowed = true
        state.sharers = 2
        let (a, _) = try start(&state, known(length), now: 0)
        let (b, _) = try start(&state, known(length), now: 0)
        return (state, a, b)
    }

    /// The next connection's piece, which there must be.
    func start(
        _ state: inout SingleOutputState, _ resource: SingleOutputState.Resource, now: UInt64, sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> (id: Int, piece: SingleOutputState.Piece) {
        try #require(next(&state, resource, now: now), sourceLocation: sourceLocation)
    }

    @Test func aResourceOfUnknownLengthIsAskedForWholeOnceWithNoRange() throws {
        var state = SingleOutputState()
        state.sharers = 2
        let (id, first) = try start(&state, unknown, now: 0)
        #expect(first.start == 0 && first.bound.end == .max && first.isFirst)
        #expect(state.sharers == 1)
        // A second connection has nothing to ask for while the first runs.
        #expect(next(&state, unknown, now: 0) == nil)
        // Its end with 1,234 bytes teaches the length, and completes the output.
        let ended = state.pieceEnded(id, failure: nil, kept: 1_234, unknown, now: second)
        #expect(ended.end == .completed)
        #expect(ended.learned == SingleOutputState.Learned(length: 1_234, keepsValidator: false))
        #expect(state.countedBytes == 1_234)
    }

    @Test func underARateLimitTheFirstRequestAsksForAChunkOnly() throws {
        var state = SingleOutputState()
        state.chunk = 256 * 1024
        let (_, first) = try start(&state, unknown, now: 0)
        #expect(first.bound.end == 256 * 1024 && first.isFirst)
        // A range the manifest asks for is the whole: no chunk of it.
        var ranged = SingleOutputState()
        ranged.chunk = 256 * 1024
        let (_, whole) = try start(&ranged, .init(length: nil, isRanged: true), now: 0)
        #expect(whole.bound.end == .max)
    }

    @Test func aKnownLengthIsSharedOutInEqualAlignedRangesAmongTheConnectionsQueued() throws {
        var state = SingleOutputState()
        state.rangesAllowed = true
        state.sharers = 4
        var starts: [Int64] = []
        for _ in 0..<4 {
            let (_, piece) = try start(&state, known(64 * mib), now: 0)
            starts.append(piece.start)
            #expect(piece.bound.end == 16 * mib)
        }
        #expect(starts == [0, 16 * mib, 32 * mib, 48 * mib])
        #expect(state.sharers == 0)
    }

    @Test func withoutGapsTheSlowestRestIsHalvedAndItsTransferToldToStopThere() throws {
        var state = SingleOutputState()
        state.rangesAllowed = true
        let (_, whole) = try start(&state, known(64 * mib), now: 0)
        // 8 MiB in 1 s: the 56 MiB left take 7 s, worth a second connection.
        _ = whole.bound.take(Int(8 * mib), at: 0)
        let (_, second) = try start(&state, known(64 * mib), now: self.second)
        #expect(second.start == 36 * mib && second.bound.end == 28 * mib)
        #expect(whole.bound.end == 36 * mib)
    }

    @Test func aRestThatEndsSoonIsNotSplit() throws {
        var state = SingleOutputState()
        state.rangesAllowed = true
        let (_, whole) = try start(&state, known(24 * mib), now: 0)
        // 16 MiB in 1 s: the 8 MiB left take half a second, less than the 2 s worth a split.
        _ = whole.bound.take(Int(16 * mib), at: 0)
        #expect(next(&state, known(24 * mib), now: second) == nil)
        #expect(whole.bound.end == 24 * mib)
    }

    /// The delay a look at the next connection's range asks to wait (`nil`: it did not).
    func lookAgain(_ state: inout SingleOutputState, _ resource: SingleOutputState.Resource, now: UInt64) -> Duration? {
        guard case .later(let delay) = state.startPiece(attemptKey: nil, resource, splitting: splitting, now: now) else { return nil }
        return delay
    }

    /// Two connections of a 256 MiB file after a second: the first took its 128 MiB and ended,
    /// the other, crowded out, took 8 MiB.
    func crowdedOut() throws -> (SingleOutputState, crowdedID: Int, crowded: SingleOutputState.Piece) {
        var state = SingleOutputState()
        state.rangesAllowed = true
        state.sharers = 2
        let (a, first) = try start(&state, known(256 * mib), now: 0)
        let (b, crowded) = try start(&state, known(256 * mib), now: 0)
        _ = first.bound.take(Int(128 * mib), at: 0)
        _ = crowded.bound.take(Int(8 * mib), at: 0)
        #expect(state.pieceEnded(a, failure: nil, kept: 128 * mib, known(256 * mib), now: second).end == .free)
        return (state, b, crowded)
    }

    @Test func aRestSlowOnlyAtItsConnectionsSpeedWaitsForALookAgainThenIsSplit() throws {
        var (state, _, crowded) = try crowdedOut()
        // Its 120 MiB take 15 s at its speed, under a second at the first one's: look again later.
        #expect(lookAgain(&state, known(256 * mib), now: second) == .milliseconds(500))
        #expect(lookAgain(&state, known(256 * mib), now: second + second / 10) == .milliseconds(400))
        #expect(crowded.bound.end == 128 * mib, "not cut")
        // Still slow half a second later: split.
        _ = crowded.bound.take(Int(mib), at: 8 * mib)
        let (_, half) = try start(&state, known(256 * mib), now: second + second / 2)
        #expect(half.start > 137 * mib && crowded.bound.end == half.start - 128 * mib)
    }

    @Test func aRestThatSpedUpSinceItWasFoundSlowIsLeftAlone() throws {
        var (state, _, crowded) = try crowdedOut()
        #expect(lookAgain(&state, known(256 * mib), now: second) == .milliseconds(500))
        // Its siblings gone, it took 40 MiB in the half second: its 80 MiB left take 1 s at that
        // speed, not worth a request, though at its speed since its start they take 2.5 s.
        _ = crowded.bound.take(Int(40 * mib), at: 8 * mib)
        #expect(next(&state, known(256 * mib), now: second + second / 2) == nil)
        #expect(lookAgain(&state, known(256 * mib), now: second + second / 2) == nil)
        #expect(crowded.bound.end == 128 * mib, "not cut")
    }

    @Test func aRestThatSpedUpAndEndedMeanwhileLeavesNothingToLookAt() throws {
        var (state, id, crowded) = try crowdedOut()
        #expect(lookAgain(&state, known(256 * mib), now: second) == .milliseconds(500))
        // The first one gone, the other took its rest at the first one's speed.
        _ = crowded.bound.take(Int(120 * mib), at: 8 * mib)
        #expect(state.pieceEnded(id, failure: nil, kept: 128 * mib, known(256 * mib), now: second + second / 3).end == .completed)
        #expect(next(&state, known(256 * mib), now: second + second / 2) == nil)
    }

    @Test func theFirstConnectionStopsAtTheEndOfItsShareWhenTheLengthShowsALargeFile() throws {
        var state = SingleOutputState()
        _ = try start(&state, unknown, now: 0)
        let first = try #require(state.pieces.values.first)
        #expect(state.shareOut(length: 64 * mib, among: 4, minimumPiece: splitting.pieceSize))
        #expect(first.bound.end == 16 * mib)
        // A small file is not shared.
        var small = SingleOutputState()
        _ = try start(&small, unknown, now: 0)
        #expect(!small.shareOut(length: 6 * mib, among: 4, minimumPiece: splitting.pieceSize))
    }

    @Test func connectionsEndingPlaceTheirBytesAndTheLastCompletesTheOutput() throws {
        var (state, a, b) = try twoHalves(of: 40 * mib)
        #expect(state.pieceEnded(b, failure: nil, kept: 20 * mib, known(40 * mib), now: second).end == .free)
        #expect(state.lastSpeed == Double(20 * mib))
        #expect(state.pieceEnded(a, failure: nil, kept: 20 * mib, known(40 * mib), now: second).end == .completed)
        #expect(state.done.contains(0..<40 * mib) && state.countedBytes == 40 * mib)
        // An end heard twice (or of a piece forgotten) means nothing.
        #expect(state.pieceEnded(a, failure: nil, kept: 1, known(40 * mib), now: second).end == .unknown)
    }

    @Test func aFailureKeepsItsBytesAsProgressOnlyWhenRangesMayBeAskedFor() throws {
        var ranged = SingleOutputState()
        ranged.rangesAllowed = true
        let (id, _) = try start(&ranged, known(40 * mib), now: 0)
        #expect(ranged.pieceEnded(id, failure: .connectionLost, kept: mib, known(40 * mib), now: second).end == .failed(progressed: true))
        #expect(ranged.done.contains(0..<mib) && ranged.takeForgotten() == 0)

        // Without ranges the next request asks for everything again: the bytes are forgotten,
        // and a server that cuts every answer short is not "progress".
        var whole = SingleOutputState()
        let (first, _) = try start(&whole, known(40 * mib), now: 0)
        #expect(whole.pieceEnded(first, failure: .connectionLost, kept: mib, known(40 * mib), now: second).end == .failed(progressed: false))
        #expect(whole.done.isEmpty && whole.countedBytes == 0)
        #expect(whole.takeForgotten() == mib)
        #expect(whole.takeForgotten() == 0)
    }

    @Test func aServerThatStopsServingRangesSendsTheOutputBackToOneWholeRequest() throws {
        var (state, a, b) = try twoHalves(of: 40 * mib)
        #expect(state.pieceEnded(a, failure: nil, kept: 20 * mib, known(40 * mib), now: second).end == .free)
        #expect(state.pieceEnded(b, failure: .rangeNotSupported, kept: 0, known(40 * mib), now: second).end == .failed(progressed: false))
        #expect(!state.rangesAllowed && state.done.isEmpty)
        #expect(state.takeForgotten() == 20 * mib)
        let (_, again) = try start(&state, known(40 * mib), now: second)
        #expect(again.start == 0 && again.bound.end == .max && again.isFirst)
    }

    @Test func aRateLimitsFirstRangeAnsweredWholeMeansNoRangesAndIsNoFailure() throws {
        var state = SingleOutputState()
        state.chunk = 256 * 1024
        let (id, _) = try start(&state, unknown, now: 0)
        #expect(state.pieceEnded(id, failure: .rangeNotSupported, kept: 0, unknown, now: second).end == .rangesRefused)
        #expect(state.chunk == nil && !state.rangesAllowed)
    }

    @Test func aBodyOfUnannouncedLengthThatAnEarlierRunBeganContinuesWithAnOpenRange() throws {
        var state = SingleOutputState()
        state.rangesAllowed = true
        state.done.insert(0..<100)
        let (id, rest) = try start(&state, unknown, now: 0)
        #expect(rest.start == 100 && rest.bound.end == .max && !rest.isFirst)
        let ended = state.pieceEnded(id, failure: nil, kept: 50, unknown, now: second)
        #expect(ended.end == .completed)
        #expect(ended.learned == SingleOutputState.Learned(length: 150, keepsValidator: true))
    }

    @Test func aLargeFileLeftByAnEarlierRunResumesOnAsManyConnectionsAsItsRestIsWorth() {
        var state = SingleOutputState()
        state.done.insert(0..<16 * mib)
        // Without ranges of this version, one connection asks for everything.
        #expect(state.connectionsToResume(known(64 * mib), splitting: splitting, rateLimited: false) == 1)
        state.rangesAllowed = true
        #expect(state.connectionsToResume(known(64 * mib), splitting: splitting, rateLimited: false) == 8)
        #expect(state.connectionsToResume(known(64 * mib), splitting: splitting, rateLimited: true) == 1)
        #expect(state.connectionsToResume(.init(length: 64 * mib, isRanged: true), splitting: splitting, rateLimited: false) == 1)
        #expect(state.connectionsToResume(known(30 * mib), splitting: splitting, rateLimited: false) == 1)
    }

    @Test func underARateLimitAPassAsksForTheSlotsThatKeepTheRateOverTheRoundTrip() {
        // 1 MB/s, 512 KiB segments, 100 ms round trip: 0.19 of a segment's time, so 1 + 1.
        #expect(DownloadPlan.slotsUnderRateLimit(rate: 1_000_000, roundTrip: .milliseconds(100), segmentSize: 512 * 1024) == 2)
        // 100 MB/s over a 200 ms round trip with 1 MiB segments: 20 segments' time, plus one.
        #expect(DownloadPlan.slotsUnderRateLimit(rate: 100_000_000, roundTrip: .milliseconds(200), segmentSize: mib) == 21)
        // A round trip under a twentieth of a segment's time: one slot.
        #expect(DownloadPlan.slotsUnderRateLimit(rate: 1_000, roundTrip: .milliseconds(1), segmentSize: mib) == 1)
        // Not known yet: one slot; never more than 1,024 (+1).
        #expect(DownloadPlan.slotsUnderRateLimit(rate: 1_000_000, roundTrip: nil, segmentSize: mib) == 1)
        #expect(DownloadPlan.slotsUnderRateLimit(rate: .max, roundTrip: .seconds(60), segmentSize: 1) == 1_025)
    }
}
