import Foundation

/// The decisions of one live output: which segment to fetch next, when to reload the manifest,
/// what was lost, when the recording is over. A plain value without clock or network: the
/// recorder tells it what a reload showed and what became of each segment, with the time read
/// from its clock, and does what ``next(now:)`` answers.
///
/// The rules:
/// - **Joining.** The first reload decides where the recording starts: at the live edge (the
///   latest segment starting at least ``LiveRecordingPolicy/liveEdgeDistance`` target durations
///   before the end of the window, RFC 8216 §6.3.3), or with ``LiveRecordingPolicy/Start/oldest``
///   at the oldest segment offered. A stream that is already complete is taken whole.
/// - **Order, once.** Segments are fetched one at a time in the order of their keys; a segment
///   whose key is not after the last one dealt with is never fetched again, whatever a reload
///   shows (a reload late, early, or served from a stale cache).
/// - **Gaps.** When the first new segment of a reload does not follow the last one dealt with
///   (the window slid past segments before they were fetched), a gap is reported with its length:
///   measured on the presentation timeline when both ends have a start (DASH), counted in media
///   sequence numbers otherwise (HLS, `#EXT-X-GAP` segments included). Segments chosen earlier
///   that a reload no longer offers are not asked for: they are part of that gap. A segment that
///   cannot be fetched (gone with 404/410, or its retries spent) is a gap of its own duration.
///   Gaps that follow one another are one gap.
/// - **Resets.** A playlist whose numbers went back (an encoder restart) starts a new epoch:
///   its segments are taken unless their URL was recorded recently (a reset that renumbers the
///   same segments records nothing twice).
/// - **Reloads** (RFC 8216 §6.3.4): one target duration after the start of a reload that
///   showed something new, half of one after one that did not, or when the manifest says
///   (``LiveWindow/suggestedReload``, DASH). A failed reload is tried again after half a target
///   duration. A complete window is not reloaded.
/// - **Ending.** When the window is complete and every segment up to its end is dealt with;
///   when the recorded media reaches ``LiveRecordingPolicy/maxDuration``; when no new segment
///   appeared for ``LiveRecordingPolicy/stallTimeout(targetDuration:)``; or on ``stop()``.
package struct LiveTracker: Sendable {
    /// What to do next.
    package enum Action: Sendable, Equatable {
        /// Fetch this segment and append it to the output (its initialisation section first
        /// when that changed); report ``LiveTracker/recorded(_:at:)`` or
        /// ``LiveTracker/lost(_:at:)``.
        case fetch(LiveSegment)
        /// Reload the manifest; report ``LiveTracker/reloaded(_:startedAt:now:)`` or
        /// ``LiveTracker/reloadFailed(startedAt:now:)``.
        case reload
        /// Nothing to do before this time (or before a fetch or reload in flight ends).
        case wait(until: Date)
        /// Segments were lost: record the gap.
        case gap(LiveGap)
        /// The recording of this output is over.
        case end(LiveEnding)
    }

    /// What the tracker remembers of the last segment dealt with, to continue after it (kept in
    /// the recording's durable record).
    package struct Mark: Sendable, Hashable, Codable {
        /// Its key (its epoch's).
        package var key: LiveSegmentKey
        /// Its start on the presentation timeline, when known.
        package var start: Double?
        /// Its duration.
        package var duration: Double
        /// How many media-sequence resets came before it.
        package var epoch: Int

        /// Creates a mark.
        package init(key: LiveSegmentKey, start: Double?, duration: Double, epoch: Int = 0) {
            self.key = key
            self.start = start
            self.duration = duration
            self.epoch = epoch
        }
    }

    /// The rules' parameters.
    package let policy: LiveRecordingPolicy
    /// The last segment dealt with (recorded or lost).
    package private(set) var tail: Mark?
    /// Seconds of media recorded.
    package private(set) var recordedSeconds: Double
    /// Segments recorded.
    package private(set) var recordedSegments: Int
    /// Gaps found so far, and their media.
    package private(set) var gapCount: Int
    /// See ``gapCount``.
    package private(set) var gapSeconds: Double
    /// Why the recording ended, once it has.
    package private(set) var ending: LiveEnding?
    /// The segments chosen and not dealt with yet, in order.
    package private(set) var queue: [LiveSegment] = []
    /// The segment being fetched.
    package private(set) var inFlight: LiveSegment?

    private var epoch = 0
    private var joined: Bool
    private var hasReloaded = false
    private var targetDuration: Double = 2
    private var complete = false
    private var reloading = false
    private var nextReload: Date?
    private var reloadFailures = 0
    private var lastWindowEnd: LiveSegmentKey?
    private var lastWindowComplete = false
    /// When a reload last showed a segment that was not known before (or when the recording began).
    private var lastNewSegmentAt: Date?
    private var availableAfterQueue = 0
    private var pendingGaps: [LiveGap] = []
    /// Whether the last segment dealt with was lost (a gap that follows extends it).
    private var tailLost = false
    /// The last gap, until a segment is recorded: a segment lost at either of its ends is the
    /// same gap.
    private var lastGap: LiveGap?
    /// The target duration the join point is measured in, when several outputs join together.
    private var joinTargetDuration: Double?
    /// The URLs of recently recorded segments (a reset that renumbers them is not recorded twice).
    private var recentURLs: [URL] = []
    private static let recentLimit = 64
    /// The keys recent windows gave their segments' URLs: a stale window shows a URL under the
    /// key it had, a restarted stream under another (or a URL never seen).
    private var seenKeys: [URL: LiveSegmentKey] = [:]
    private var seenOrder: [URL] = []
    private static let seenLimit = 512

    /// A tracker for a new recording, or one that continues after `tail` (from the durable
    /// record of an earlier run) with what was recorded then.
    package init(
        policy: LiveRecordingPolicy, continuingAfter tail: Mark? = nil, recordedSeconds: Double = 0, recordedSegments: Int = 0,
        gapCount: Int = 0, gapSeconds: Double = 0, recentURLs: [URL] = []
    ) {
        self.policy = policy
        self.tail = tail
        self.recordedSeconds = recordedSeconds
        self.recordedSegments = recordedSegments
        self.gapCount = gapCount
        self.gapSeconds = gapSeconds
        self.recentURLs = Array(recentURLs.suffix(Self.recentLimit))
        epoch = tail?.epoch ?? 0
        joined = tail != nil
    }

    /// The URLs of the segments recorded last (kept in the durable record).
    package var recentlyRecordedURLs: [URL] { recentURLs }

    /// Segments the stream offers now that are not recorded yet: those queued, plus any the
    /// window said it left out.
    package var segmentsBehindLiveEdge: Int { queue.count + (inFlight == nil ? 0 : 1) + availableAfterQueue }

    /// The target duration the last reload gave.
    package var currentTargetDuration: Double { targetDuration }

    /// Measures the join point in `targetDuration` (the longest of the outputs that join together,
    /// so a video and its audio start at the same moment) instead of this window's own.
    package mutating func alignJoin(targetDuration: Double) {
        joinTargetDuration = targetDuration
    }

    // MARK: - Decisions

    /// What to do at `now`. Call it again after acting on the answer (a gap, a fetch or a
    /// reload started) until it says to wait or that the recording ended.
    package mutating func next(now: Date) -> Action {
        if let ending { return .end(ending) }
        if !pendingGaps.isEmpty { return .gap(pendingGaps.removeFirst()) }
        if let maxDuration = policy.maxDuration, recordedSeconds >= maxDuration.secondsValue, inFlight == nil {
            return finish(.durationReached)
        }
        if lastNewSegmentAt == nil { lastNewSegmentAt = now }
        if !reloading, !complete, let nextReload, nextReload <= now {
            reloading = true
            return .reload
        }
        if !hasReloaded, !reloading, nextReload == nil {
            // Nothing known yet: the first reload.
            reloading = true
            return .reload
        }
        var deadline = Date.distantFuture
        if inFlight == nil, let head = queue.first {
            if head.isAvailable(at: now) {
                inFlight = queue.removeFirst()
                return .fetch(head)
            }
            deadline = min(deadline, head.availableAt ?? deadline)
        }
        if inFlight == nil, queue.isEmpty, complete {
            return finish(.streamEnded)
        }
        if inFlight == nil, !complete, let last = lastNewSegmentAt {
            let stall = last.addingTimeInterval(policy.stallTimeout(targetDuration: targetDuration))
            if stall <= now { return finish(.stalled) }
            deadline = min(deadline, stall)
        }
        if !reloading, !complete, let nextReload { deadline = min(deadline, nextReload) }
        return .wait(until: deadline)
    }

    /// Ends the recording at the next decision: what is in flight may finish; nothing new starts.
    package mutating func stop() {
        if ending == nil { ending = .stopped }
    }

    private mutating func finish(_ reason: LiveEnding) -> Action {
        ending = reason
        queue.removeAll()
        return .end(reason)
    }

    // MARK: - What happened

    /// A reload that started at `startedAt` showed `window`.
    package mutating func reloaded(_ window: LiveWindow, startedAt: Date, now: Date) {
        reloading = false
        reloadFailures = 0
        hasReloaded = true
        guard ending == nil else { return }
        targetDuration = max(0.05, window.targetDuration.isFinite ? window.targetDuration : 2)
        let segments = window.segments
        let windowEnd = segments.last?.key
        let changed = windowEnd != lastWindowEnd || window.isComplete != lastWindowComplete
        lastWindowEnd = windowEnd
        lastWindowComplete = window.isComplete
        complete = window.isComplete
        var added: [LiveSegment]
        if !joined {
            joined = true
            added = join(segments, complete: window.isComplete, liveEdge: window.liveEdge, now: now)
        } else {
            added = follow(segments)
        }
        queue.append(contentsOf: added)
        remember(segments)
        if !added.isEmpty || lastNewSegmentAt == nil { lastNewSegmentAt = now }
        availableAfterQueue = window.segmentsAfter
        if window.isComplete {
            nextReload = nil
        } else if let suggested = window.suggestedReload {
            nextReload = max(suggested, now.addingTimeInterval(0.01))
        } else {
            // RFC 8216 §6.3.4: a target duration from the start of the last load when it changed,
            // half of one when it did not.
            nextReload = changed ? startedAt.addingTimeInterval(targetDuration) : now.addingTimeInterval(targetDuration / 2)
        }
    }

    /// A reload that started at `startedAt` failed; it is tried again after half a target
    /// duration (the stall timeout ends a stream whose manifest stays away).
    package mutating func reloadFailed(startedAt: Date, now: Date) {
        reloading = false
        reloadFailures += 1
        if lastNewSegmentAt == nil { lastNewSegmentAt = startedAt }
        nextReload = now.addingTimeInterval(targetDuration / 2)
    }

    /// The segment fetched last was appended to the output.
    package mutating func recorded(_ segment: LiveSegment, at now: Date) {
        guard inFlight?.key == segment.key else { return }
        inFlight = nil
        tail = Mark(key: segment.key, start: segment.start, duration: segment.duration, epoch: epoch)
        recordedSeconds += max(0, segment.duration)
        recordedSegments += 1
        tailLost = false
        // A segment recorded past the last gap ends it (one recorded before it, in flight when
        // the gap was seen, does not).
        if let gap = lastGap, gap.before.map({ segment.key >= $0 }) ?? true { lastGap = nil }
        if let url = segment.segment.urls.first {
            recentURLs.append(url)
            if recentURLs.count > Self.recentLimit { recentURLs.removeFirst(recentURLs.count - Self.recentLimit) }
        }
    }

    /// The segment fetched last could not be had (gone from the server, or its retries spent):
    /// a gap of its duration.
    package mutating func lost(_ segment: LiveSegment, at now: Date) {
        guard inFlight?.key == segment.key else { return }
        inFlight = nil
        noteGap(
            LiveGap(after: tail?.key, before: queue.first?.key, segments: 1, seconds: max(0, segment.duration)),
            continuing: lastGap.map { $0.after == segment.key || $0.before == segment.key } ?? false)
        tail = Mark(key: segment.key, start: segment.start, duration: segment.duration, epoch: epoch)
        tailLost = true
    }

    // MARK: - Choosing segments

    /// The segments a new recording starts with.
    private func join(_ segments: [LiveSegment], complete: Bool, liveEdge: Double?, now: Date) -> [LiveSegment] {
        if complete || policy.start == .oldest { return segments }
        let available = segments.filter { $0.isAvailable(at: now) }
        guard !available.isEmpty else { return segments }
        let distance = policy.liveEdgeDistance * max(targetDuration, joinTargetDuration ?? 0)
        if let liveEdge {
            // On a timeline: the segment that holds the live edge less the distance.
            let at = liveEdge - distance
            if let first = available.first(where: { segment in segment.start.map { $0 + segment.duration > at + 1e-9 } ?? false }) {
                return segments.filter { $0.key >= first.key }
            }
        }
        // The latest segment that starts at least `distance` target durations before the end.
        var remaining = 0.0
        var first = 0
        for index in available.indices.reversed() {
            remaining += max(0, available[index].duration)
            first = index
            // (A quarter of a target duration short still counts: a video and its audio, whose
            // segments differ by a frame, join at the same segment.)
            if remaining >= distance - 0.25 * targetDuration { break }
        }
        let startKey = available[first].key
        return segments.filter { $0.key >= startKey }
    }

    /// The segments of a reload that come after everything known; notes a gap or a reset.
    private mutating func follow(_ segments: [LiveSegment]) -> [LiveSegment] {
        guard let newest = segments.last, let oldest = segments.first else { return [] }
        // Chosen earlier, no longer offered: not asked for (part of a gap).
        let gone = queue.prefix { segment in
            if let start = segment.start, let oldestStart = oldest.start { return start < oldestStart - 1e-6 }
            return segment.key < oldest.key
        }
        if let lastGone = gone.last, newest.key >= lastGone.key {
            queue.removeFirst(gone.count)
            if let next = queue.first {
                let seconds = gone.reduce(0) { $0 + max(0, $1.duration) }
                noteGap(
                    LiveGap(after: inFlight?.key ?? tail?.key, before: next.key, segments: gone.count, seconds: seconds),
                    continuing: inFlight == nil && tailLost)
            } else if inFlight == nil, tail == nil, let first = gone.first {
                // Nothing dealt with yet: the gap below is measured from just before the first
                // segment chosen.
                tail = Mark(
                    key: LiveSegmentKey(period: first.key.period, position: first.key.position &- (first.start == nil ? 1 : 0)),
                    start: first.start.map { $0 - first.duration }, duration: first.duration, epoch: epoch)
            }
        }
        // The last segment known: queued, in flight, or dealt with.
        let known: Mark? =
            queue.last.map { Mark(key: $0.key, start: $0.start, duration: $0.duration, epoch: epoch) }
            ?? inFlight.map { Mark(key: $0.key, start: $0.start, duration: $0.duration, epoch: epoch) } ?? tail
        guard let known else { return segments }
        if newest.key < known.key, newest.start == nil, newest.key.period == known.key.period {
            // Numbers went back. A reload served from a stale cache shows segments under the keys
            // they had before: nothing to do. Segments under other numbers: the stream restarted.
            let stale = segments.contains { segment in segment.segment.urls.first.flatMap { seenKeys[$0] } == segment.key }
            guard !stale else { return [] }
            let seen = Set(recentURLs + queue.compactMap(\.segment.urls.first) + (inFlight?.segment.urls.first.map { [$0] } ?? []))
            return reset(segments, seen: seen)
        }
        let fresh = segments.filter { $0.key > known.key }
        guard let first = fresh.first else { return [] }
        if let missing = gap(from: known, to: first) {
            noteGap(
                LiveGap(after: known.key, before: first.key, segments: missing.segments, seconds: missing.seconds),
                continuing: queue.isEmpty && inFlight == nil && tailLost)
        }
        return fresh
    }

    /// A playlist whose numbers went back (the stream restarted): a new epoch, its segments
    /// taken unless recorded already (by URL).
    private mutating func reset(_ segments: [LiveSegment], seen: Set<URL>) -> [LiveSegment] {
        epoch += 1
        queue.removeAll()
        var fresh: [LiveSegment] = []
        var lastSeen: LiveSegment?
        for segment in segments {
            if let url = segment.segment.urls.first, seen.contains(url) { lastSeen = segment } else { fresh.append(segment) }
        }
        fresh = fresh.filter { segment in lastSeen.map { segment.key > $0.key } ?? true }
        if !fresh.isEmpty { fresh[0].isDiscontinuity = true }
        // From now on, the new numbering is compared: after the last segment already recorded
        // under it, or before everything.
        let position = lastSeen?.key.position ?? Int64.min
        tail = Mark(
            key: LiveSegmentKey(period: segments[0].key.period, position: position), start: nil,
            duration: lastSeen?.duration ?? tail?.duration ?? targetDuration, epoch: epoch)
        return fresh
    }

    /// The segments between `known` and `first` that no reload will offer any more, if any.
    private func gap(from known: Mark, to first: LiveSegment) -> (segments: Int?, seconds: Double)? {
        if let knownStart = known.start, let firstStart = first.start {
            let hole = firstStart - (knownStart + known.duration)
            // Timelines drift by a frame or two between segments; a hole is half a segment or more.
            guard hole > max(0.5 * known.duration, 0.05) else { return nil }
            let segments = known.duration > 0 ? Int((hole / known.duration).rounded()) : nil
            return (segments, hole)
        }
        guard first.key.period == known.key.period, known.key.position != Int64.min else { return nil }
        let (difference, overflow) = first.key.position.subtractingReportingOverflow(known.key.position)
        guard !overflow, difference > 1 else { return nil }
        let missing = difference - 1
        let seconds = Double(missing) * (known.duration > 0 ? known.duration : targetDuration)
        return (Int(clamping: missing), seconds)
    }

    /// Notes the keys a window gave its segments' URLs (the last ``seenLimit``).
    private mutating func remember(_ segments: [LiveSegment]) {
        for segment in segments {
            guard let url = segment.segment.urls.first else { continue }
            if seenKeys.updateValue(segment.key, forKey: url) == nil { seenOrder.append(url) }
        }
        if seenOrder.count > Self.seenLimit {
            let drop = seenOrder.count - Self.seenLimit
            for url in seenOrder.prefix(drop) { seenKeys[url] = nil }
            seenOrder.removeFirst(drop)
        }
    }

    /// Reports a gap; `continuing` when it follows the last gap without a segment recorded in
    /// between (it is counted as the same one).
    private mutating func noteGap(_ gap: LiveGap, continuing: Bool = false) {
        pendingGaps.append(gap)
        if !continuing { lastGap = gap }
        if !(continuing || (tailLost && gap.after == tail?.key)) || gapCount == 0 { gapCount += 1 }
        gapSeconds += gap.seconds
    }
}
