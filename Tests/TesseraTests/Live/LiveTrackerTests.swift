import Foundation
import Testing
@testable import Tessera

/// A live stream as a function of time, for the tracker: a segment of `duration` seconds is
/// published every `duration` seconds from `t0`, the playlist offers the last `window` of them.
struct SimulatedStream {
    var duration: Double = 2
    var window = 6
    var t0 = Date(timeIntervalSince1970: 1_000_000)
    /// Segments published at most (the stream ends, or stalls, after them).
    var total: Int?
    /// Whether the playlist says it ends once `total` are out.
    var ends = true
    /// Start times on the presentation timeline (DASH) instead of sequence numbers only (HLS).
    var timeline = false
    /// Numbers of segments marked #EXT-X-GAP (left out of the playlist).
    var gaps: Set<Int> = []
    var firstSequence: Int64 = 100

    func published(at now: Date) -> Int {
        let count = max(0, Int((now.timeIntervalSince(t0) / duration).rounded(.down)))
        return total.map { min($0, count) } ?? count
    }

    func segment(_ index: Int) -> LiveSegment {
        LiveSegment(
            key: LiveSegmentKey(position: firstSequence + Int64(index)), duration: duration,
            start: timeline ? Double(index) * duration : nil,
            segment: DownloadSegment(url: URL(string: "http://origin.test/seg-\(index).ts")!))
    }

    func window(at now: Date) -> LiveWindow {
        let count = published(at: now)
        let first = max(0, count - window)
        let segments = (first..<count).filter { !gaps.contains($0) }.map(segment)
        return LiveWindow(segments: segments, targetDuration: duration, isComplete: ends && total.map { count >= $0 } ?? false)
    }
}

/// Drives a tracker against a simulated stream on a virtual clock; records what it did.
struct TrackerRun {
    var tracker: LiveTracker
    var stream: SimulatedStream
    var now: Date
    var recorded: [Int64] = []
    var fetched: [Int64] = []
    var gaps: [LiveGap] = []
    var reloads: [Date] = []
    var ending: LiveEnding?
    /// Extra delay before the reloads whose number (from 0) is in the set.
    var lateReloads: [Int: Double] = [:]
    /// Segments (by sequence number) whose fetch fails for good.
    var failing: Set<Int64> = []
    /// How long a fetch takes.
    var fetchTime: Double = 0.1

    init(_ stream: SimulatedStream, policy: LiveRecordingPolicy = LiveRecordingPolicy(), startAfter: Double = 20, tracker: LiveTracker? = nil) {
        self.stream = stream
        self.tracker = tracker ?? LiveTracker(policy: policy)
        now = stream.t0.addingTimeInterval(startAfter)
    }

    /// Runs until the tracker ends or `until` passes.
    mutating func run(until limit: Double = 10_000) {
        let end = stream.t0.addingTimeInterval(limit)
        var steps = 0
        while now < end, steps < 100_000 {
            steps += 1
            switch tracker.next(now: now) {
            case .end(let reason):
                ending = reason
                return
            case .gap(let gap):
                gaps.append(gap)
            case .reload:
                let late = lateReloads[reloads.count] ?? 0
                now = now.addingTimeInterval(late)
                reloads.append(now)
                let started = now
                now = now.addingTimeInterval(0.05)
                tracker.reloaded(stream.window(at: started), startedAt: started, now: now)
            case .fetch(let segment):
                fetched.append(segment.key.position)
                now = now.addingTimeInterval(fetchTime)
                if failing.contains(segment.key.position) {
                    tracker.lost(segment, at: now)
                } else {
                    recorded.append(segment.key.position)
                    tracker.recorded(segment, at: now)
                }
            case .wait(let until):
                guard until > now, until < .distantFuture else {
                    Issue.record("waiting for nothing at \(now.timeIntervalSince(stream.t0))")
                    return
                }
                now = min(until, end)
            }
        }
    }
}

@Suite struct LiveTrackerTests {
    @Test func joinsThreeTargetDurationsFromTheEndOfTheWindow() {
        var run = TrackerRun(SimulatedStream(), startAfter: 20.5)  // 10 published: 4 ... 9 offered
        run.run(until: 21)
        // 2 s segments, 3 target durations: the last three (7, 8, 9), sequence 100 + index.
        #expect(run.fetched.first == 107, "\(run.fetched)")
    }

    @Test func onATimelineTheJoinCountsBackFromTheLiveEdgeNotTheLastSegmentOut() {
        // 2 s segments; at 20.3 s the segment [18, 20) may not be listed yet (a safety margin):
        // the join still starts with the one holding 20.3 - 6 = 14.3.
        var tracker = LiveTracker(policy: LiveRecordingPolicy())
        let stream = SimulatedStream(timeline: true)
        let t = stream.t0.addingTimeInterval(20.3)
        var window = stream.window(at: stream.t0.addingTimeInterval(19.9))
        window.liveEdge = 20.3
        _ = tracker.next(now: t)
        tracker.reloaded(window, startedAt: t, now: t)
        guard case .fetch(let first) = tracker.next(now: t) else { Issue.record("expected a fetch"); return }
        #expect(first.start == 14, "\(String(describing: first.start))")
    }

    @Test func fromTheStartJoinsAtTheOldestSegmentOffered() {
        var policy = LiveRecordingPolicy()
        policy.start = .oldest
        var run = TrackerRun(SimulatedStream(), policy: policy, startAfter: 20.5)
        run.run(until: 21)
        #expect(run.fetched.first == 104, "\(run.fetched)")
    }

    @Test func everySegmentFromTheJoinPointIsRecordedOnceAndInOrderUntilTheEnd() {
        var run = TrackerRun(SimulatedStream(total: 60), startAfter: 20.5)
        run.run()
        #expect(run.ending == .streamEnded)
        #expect(run.recorded == Array(107...159), "\(run.recorded)")
        #expect(run.gaps.isEmpty)
        #expect(run.tracker.recordedSegments == 53)
        #expect(abs(run.tracker.recordedSeconds - 106) < 1e-9)
        // No reload after the end was seen.
        #expect(run.reloads.filter { $0 >= run.stream.t0.addingTimeInterval(120) }.count == 1)
    }

    @Test func reloadsFollowRFC8216TargetDurationAfterAChangeHalfAfterNone() {
        // Published every 2 s; a reload 2 s after a changed one finds a new segment unless it
        // falls just before the next is out.
        var tracker = LiveTracker(policy: LiveRecordingPolicy())
        let stream = SimulatedStream()
        let t = stream.t0.addingTimeInterval(20.5)
        #expect(tracker.next(now: t) == .reload)
        tracker.reloaded(stream.window(at: t), startedAt: t, now: t.addingTimeInterval(0.1))
        // Changed (the first load): the next reload one target duration after its start.
        var waited: Date?
        while true {
            let action = tracker.next(now: t.addingTimeInterval(0.2))
            if case .fetch(let segment) = action { tracker.recorded(segment, at: t.addingTimeInterval(0.2)); continue }
            if case .wait(let until) = action { waited = until }
            break
        }
        #expect(waited == t.addingTimeInterval(2))
        let second = t.addingTimeInterval(2)
        #expect(tracker.next(now: second) == .reload)
        // The same playlist again (a server lagging behind): half a target duration.
        tracker.reloaded(stream.window(at: t), startedAt: second, now: second.addingTimeInterval(0.1))
        #expect(tracker.next(now: second.addingTimeInterval(0.1)) == .wait(until: second.addingTimeInterval(1.1)))
    }

    @Test(arguments: [false, true]) func aReloadLateByOneTargetDurationLosesNothingTheWindowStillHolds(timeline: Bool) {
        var run = TrackerRun(SimulatedStream(total: 40, timeline: timeline), startAfter: 20.5)
        // Every third reload starts one target duration late.
        for index in stride(from: 1, to: 60, by: 3) { run.lateReloads[index] = 2 }
        run.run()
        #expect(run.ending == .streamEnded)
        #expect(run.recorded == Array(107...139))
        #expect(run.gaps.isEmpty, "\(run.gaps)")
    }

    @Test func aWindowThatSlidPastSegmentsReportsAGapWithItsLength() {
        // A reload 12 s late on a 6-segment window of 2 s: 3 segments left before they were seen.
        var run = TrackerRun(SimulatedStream(total: 40), startAfter: 20.5)
        run.lateReloads[2] = 12
        run.run()
        #expect(run.ending == .streamEnded)
        #expect(run.gaps.count == 1, "\(run.gaps)")
        let gap = run.gaps[0]
        let missing = gap.segments ?? 0
        #expect(missing > 0 && abs(gap.seconds - Double(missing) * 2) < 1e-9, "\(gap)")
        // Exactly the missing ones are absent, nothing twice, in order.
        #expect(Set(run.recorded).count == run.recorded.count && run.recorded == run.recorded.sorted())
        #expect(run.recorded.count + missing == 139 - 107 + 1, "\(run.recorded)")
        #expect(run.tracker.gapCount == 1 && run.tracker.gapSeconds == gap.seconds)
    }

    @Test func aGapOnThePresentationTimelineIsMeasuredInSeconds() {
        var run = TrackerRun(SimulatedStream(total: 40, timeline: true), startAfter: 20.5)
        run.lateReloads[2] = 12
        run.run()
        #expect(run.gaps.count == 1)
        let gap = run.gaps[0]
        #expect((gap.segments ?? 0) >= 1 && abs(gap.seconds - Double(gap.segments!) * 2) < 1e-6, "\(gap)")
    }

    @Test func gapSegmentsOfThePlaylistAreReportedAsAGap() {
        var run = TrackerRun(SimulatedStream(total: 30, gaps: [15, 16]), startAfter: 20.5)
        run.run()
        #expect(run.gaps == [LiveGap(after: LiveSegmentKey(position: 114), before: LiveSegmentKey(position: 117), segments: 2, seconds: 4)])
        #expect(!run.recorded.contains(115) && !run.recorded.contains(116) && run.recorded.contains(117))
    }

    @Test func aSegmentThatCannotBeFetchedIsAGapOfItsDurationAndNeverAskedAgain() {
        var run = TrackerRun(SimulatedStream(total: 30), startAfter: 20.5)
        run.failing = [110]
        run.run()
        #expect(run.fetched.filter { $0 == 110 }.count == 1)
        #expect(run.gaps.count == 1 && run.gaps[0].seconds == 2 && run.gaps[0].segments == 1)
        #expect(run.recorded == Array(107...109) + Array(111...129))
    }

    @Test func segmentsChosenButNoLongerOfferedAreNotAskedForAndMakeOneGap() {
        var tracker = LiveTracker(policy: LiveRecordingPolicy())
        let stream = SimulatedStream()
        let t = stream.t0.addingTimeInterval(12.5)  // 6 out: 100 … 105
        _ = tracker.next(now: t)
        tracker.reloaded(stream.window(at: t), startedAt: t, now: t)
        guard case .fetch(let first) = tracker.next(now: t) else { Issue.record("expected a fetch"); return }
        #expect(first.key.position == 103)
        // While 103 is in flight, a reload shows 110 … 115: 104 and 105 are gone.
        let later = t.addingTimeInterval(20)
        tracker.reloaded(stream.window(at: later), startedAt: later, now: later)
        tracker.recorded(first, at: later)
        #expect(tracker.next(now: later) == .gap(LiveGap(after: LiveSegmentKey(position: 103), before: LiveSegmentKey(position: 110), segments: 6, seconds: 12)))
        guard case .fetch(let next) = tracker.next(now: later) else { Issue.record("expected a fetch"); return }
        #expect(next.key.position == 110)
        // 110 lost too, right after the gap: the same gap.
        tracker.lost(next, at: later)
        #expect(tracker.gapCount == 1 && tracker.gapSeconds == 14)
    }

    @Test func aStaleReloadFetchesNothingAgain() {
        var tracker = LiveTracker(policy: LiveRecordingPolicy())
        let stream = SimulatedStream()
        var now = stream.t0.addingTimeInterval(30.5)
        _ = tracker.next(now: now)
        tracker.reloaded(stream.window(at: now), startedAt: now, now: now)
        var recorded: [Int64] = []
        func drain() {
            while case .fetch(let segment) = tracker.next(now: now) {
                recorded.append(segment.key.position)
                tracker.recorded(segment, at: now)
            }
        }
        drain()
        // A cache serves the playlist of 10 s ago, then the current one.
        now = now.addingTimeInterval(2)
        #expect(tracker.next(now: now) == .reload)
        tracker.reloaded(stream.window(at: now.addingTimeInterval(-10)), startedAt: now, now: now)
        drain()
        now = now.addingTimeInterval(2)
        _ = tracker.next(now: now)
        tracker.reloaded(stream.window(at: now), startedAt: now, now: now)
        drain()
        #expect(recorded == [112, 113, 114, 115, 116], "\(recorded)")
        #expect(tracker.gapCount == 0)
    }

    @Test func aMediaSequenceResetRecordsTheNewSegmentsButNoneTwice() {
        var tracker = LiveTracker(policy: LiveRecordingPolicy())
        var now = Date(timeIntervalSince1970: 0)
        func window(_ items: [(Int64, String)]) -> LiveWindow {
            LiveWindow(
                segments: items.map { LiveSegment(key: LiveSegmentKey(position: $0.0), duration: 2, segment: DownloadSegment(url: URL(string: "http://o.test/\($0.1)")!)) },
                targetDuration: 2)
        }
        var recorded: [String] = []
        var discontinuities: [String] = []
        func step(_ reload: LiveWindow) {
            _ = tracker.next(now: now)
            tracker.reloaded(reload, startedAt: now, now: now)
            while case .fetch(let segment) = tracker.next(now: now) {
                let name = segment.segment.urls[0].lastPathComponent
                recorded.append(name)
                if segment.isDiscontinuity { discontinuities.append(name) }
                tracker.recorded(segment, at: now)
            }
            now = now.addingTimeInterval(2)
        }
        step(window([(500, "a"), (501, "b"), (502, "c")]))
        // The packager restarted: numbers from 0, the last segment renumbered, then new ones.
        step(window([(0, "c"), (1, "d")]))
        step(window([(0, "c"), (1, "d"), (2, "e")]))
        #expect(recorded == ["a", "b", "c", "d", "e"], "\(recorded)")
        #expect(discontinuities == ["d"])
    }

    @Test func theEndListEndsTheRecordingAfterTheLastSegment() {
        var run = TrackerRun(SimulatedStream(window: 6, total: 12), startAfter: 30)
        run.run()
        // Complete when joined: the whole window is taken (an event stream that just ended).
        #expect(run.ending == .streamEnded)
        #expect(run.recorded == Array(106...111))
        #expect(run.reloads.count == 1)
    }

    @Test func theDurationLimitEndsTheRecording() {
        var policy = LiveRecordingPolicy()
        policy.maxDuration = .seconds(10)
        var run = TrackerRun(SimulatedStream(), policy: policy, startAfter: 20.5)
        run.run()
        #expect(run.ending == .durationReached)
        #expect(run.recorded.count == 5 && run.tracker.recordedSeconds == 10)
    }

    @Test func aStalledStreamEndsAfterTheDocumentedTime() {
        // 2 s segments: max(30 s, 6 target durations) = 30 s after the last new segment.
        var run = TrackerRun(SimulatedStream(total: 15, ends: false), startAfter: 20.5)
        run.run()
        #expect(run.ending == .stalled)
        #expect(run.recorded == Array(107...114))
        let lastNew = run.stream.t0.addingTimeInterval(30)  // the 15th segment is out at 30 s
        let ended = run.now.timeIntervalSince(lastNew)
        #expect(ended >= 30 && ended < 31.5, "\(ended)")
        // With 10 s segments: 60 s.
        #expect(LiveRecordingPolicy().stallTimeout(targetDuration: 10) == 60)
    }

    @Test func failedReloadsAreTriedAgainUntilTheStallTimeout() {
        var tracker = LiveTracker(policy: LiveRecordingPolicy())
        var now = Date(timeIntervalSince1970: 0)
        var reloads = 0
        while true {
            switch tracker.next(now: now) {
            case .reload:
                reloads += 1
                tracker.reloadFailed(startedAt: now, now: now)
            case .wait(let until): now = until
            case .end(let reason):
                #expect(reason == .stalled)
                #expect(now.timeIntervalSince1970 >= 30 && now.timeIntervalSince1970 < 31)
                #expect(reloads >= 30, "half a (default 2 s) target duration apart: \(reloads)")
                return
            default:
                Issue.record("unexpected")
                return
            }
        }
    }

    @Test func aRestoredRecordingContinuesAfterItsLastSegmentOrReportsTheGap() {
        let stream = SimulatedStream(total: 40)
        // Stopped after 110; back while the window still holds 111: nothing lost.
        let mark = LiveTracker.Mark(key: LiveSegmentKey(position: 110), start: nil, duration: 2)
        var run = TrackerRun(stream, startAfter: 23, tracker: LiveTracker(policy: LiveRecordingPolicy(), continuingAfter: mark, recordedSeconds: 8, recordedSegments: 4))
        run.run()
        #expect(run.recorded == Array(111...139))
        #expect(run.gaps.isEmpty)
        #expect(run.tracker.recordedSegments == 33)
        // Back much later: 111 ... the window's oldest are gone; a gap, then the oldest offered.
        var late = TrackerRun(stream, startAfter: 60.5, tracker: LiveTracker(policy: LiveRecordingPolicy(), continuingAfter: mark))
        late.run()
        #expect(late.gaps.count == 1 && late.gaps[0].segments == 13 && late.gaps[0].seconds == 26, "\(late.gaps)")
        #expect(late.recorded == Array(124...139))
    }

    @Test func segmentsAreFetchedOnlyOnceAvailable() {
        var tracker = LiveTracker(policy: LiveRecordingPolicy())
        let t = Date(timeIntervalSince1970: 100)
        let later = t.addingTimeInterval(3)
        let window = LiveWindow(
            segments: [
                LiveSegment(key: LiveSegmentKey(position: 1), duration: 2, start: 0, segment: DownloadSegment(url: URL(string: "http://o.test/1")!)),
                LiveSegment(key: LiveSegmentKey(position: 2), duration: 2, start: 2, segment: DownloadSegment(url: URL(string: "http://o.test/2")!), availableAt: later),
            ],
            targetDuration: 2, suggestedReload: t.addingTimeInterval(10))
        var policy = LiveRecordingPolicy()
        policy.start = .oldest
        tracker = LiveTracker(policy: policy)
        _ = tracker.next(now: t)
        tracker.reloaded(window, startedAt: t, now: t)
        guard case .fetch(let first) = tracker.next(now: t) else { Issue.record("expected a fetch"); return }
        tracker.recorded(first, at: t)
        #expect(tracker.next(now: t) == .wait(until: later))
        guard case .fetch(let second) = tracker.next(now: later) else { Issue.record("expected a fetch"); return }
        #expect(second.key.position == 2)
    }

    @Test func stopEndsAtTheNextDecision() {
        var run = TrackerRun(SimulatedStream(), startAfter: 20.5)
        run.run(until: 30)
        run.tracker.stop()
        #expect(run.tracker.next(now: run.now) == .end(.stopped))
        #expect(run.tracker.next(now: run.now) == .end(.stopped))
    }
}

@Suite struct ISO8601TimeTests {
    @Test func readsTheFormsManifestsWrite() {
        #expect(ISO8601Time.date(from: "1970-01-01T00:00:00Z") == Date(timeIntervalSince1970: 0))
        #expect(ISO8601Time.date(from: "2024-02-29T12:34:56.789Z")?.timeIntervalSince1970 == 1_709_210_096.789)
        #expect(ISO8601Time.date(from: "2024-02-29T14:34:56+02:00")?.timeIntervalSince1970 == 1_709_210_096)
        #expect(ISO8601Time.date(from: "2024-02-29T14:34:56+0200")?.timeIntervalSince1970 == 1_709_210_096)
        #expect(ISO8601Time.date(from: "2024-02-29T12:34:56")?.timeIntervalSince1970 == 1_709_210_096)
        #expect(ISO8601Time.date(from: " 2024-02-29 12:34:56Z\n")?.timeIntervalSince1970 == 1_709_210_096)
        for bad in ["", "2024-13-01T00:00:00Z", "2024-01-01", "2024-01-01T00:00:00X", "2024-01-01T00:00:00.Z", "९९९९-01-01T00:00:00Z"] {
            #expect(ISO8601Time.date(from: bad) == nil, "\(bad)")
        }
    }

    @Test func writesWhatItReads() {
        for seconds in [0.0, 1_709_210_096.789, 951_782_400.5, -86_400] {
            let date = Date(timeIntervalSince1970: seconds)
            let text = ISO8601Time.string(from: date)
            #expect(abs(ISO8601Time.date(from: text)!.timeIntervalSince1970 - seconds) < 0.0011, "\(text)")
        }
        #expect(ISO8601Time.string(from: Date(timeIntervalSince1970: 1_709_210_096.789)) == "2024-02-29T12:34:56.789Z")
    }
}
