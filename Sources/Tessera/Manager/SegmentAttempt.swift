/// The decisions of one segment's attempts: which of its URLs to ask next, how long to wait
/// first, when to give up, when the entity must be resolved again, when the task should wait for
/// the network instead of spending its retries.
///
/// A plain value: the run tells it what happened and does what it answers. It keeps no clock;
/// the run says which URLs a server asked not to be asked yet (`Retry-After`), and for how long.
///
/// The rules:
/// - URLs are tried in the manifest's order, starting with the first one not known to be dead
///   (a URL that refused for good for another segment of the run).
/// - A transient failure (a 5xx, 429, timeout, broken connection) moves to the next URL not yet
///   tried in this round at once; when every URL was tried, the round counts as one failure and
///   the next round starts after the backoff delay (or the server's `Retry-After`, if longer).
/// - Progress (more bytes on disk than before the attempt) forgives the failures so far.
/// - Every URL unreachable (name, route, refused) sends the task to wait for the network.
/// - A refusal for good (403, 404, 410, or another error that retrying cannot fix) marks the
///   URL dead; with no live URL left, a stale-looking refusal (403/404/410/412) resolves the
///   entity again, anything else fails the task.
/// - A changed resource under a file shared with other segments (pieces), or a 412 there,
///   starts the output over; under a file of its own, or when only resumed bytes were of
///   another version, only this segment starts over.
/// - A checksum mismatch is fetched once more, from another URL if there is one.
/// - A failure of the local disk is never retried here.
struct SegmentAttempt: Sendable {
    /// What to do next.
    enum Action: Sendable, Equatable {
        /// Request the segment from URL `mirror`; `fromScratch` when the bytes on disk must not
        /// be resumed (a checksum failed, the resource changed).
        case fetch(mirror: Int, fromScratch: Bool)
        /// Wait, without holding a segment slot, then request from URL `mirror`.
        case wait(Duration, mirror: Int, fromScratch: Bool)
        /// Every URL is unreachable: the task waits for the network.
        case waitForNetwork(DownloadError)
        /// Every URL looks stale: resolve the entity again.
        case reResolve(DownloadError)
        /// The resource changed under the output's other segments: start the output over.
        case resetOutput(DownloadError)
        /// Give up: the task ends with this error.
        case fail(DownloadError)
    }

    /// What happened to an attempt.
    enum Outcome: Sendable {
        /// The transfer failed; `progressed` when more bytes are on disk than before it,
        /// `resumed` when it continued bytes an earlier attempt left (maybe from another URL).
        case failed(DownloadError, progressed: Bool, resumed: Bool = false)
        /// The bytes arrived but do not match the segment's checksum.
        case checksumMismatch(DownloadError)
    }

    let mirrorCount: Int
    let policy: RetryPolicy
    /// Whether the segment shares its file with other segments (pieces written at offsets).
    let sharesFile: Bool
    private(set) var mirror: Int
    private(set) var failures = 0
    private var checksumFailures = 0
    private var dead: Set<Int> = []
    private var triedThisRound: Set<Int> = []
    private var fromScratch = false
    private var random: SplitMixRandom

    /// A segment with `mirrorCount` URLs; `dead` are URLs known to have refused for good.
    init(mirrorCount: Int, dead: Set<Int> = [], sharesFile: Bool, policy: RetryPolicy, seed: UInt64) {
        self.mirrorCount = max(1, mirrorCount)
        self.policy = policy
        self.sharesFile = sharesFile
        self.random = SplitMixRandom(seed: seed)
        mirror = (0..<max(1, mirrorCount)).first { !dead.contains($0) } ?? 0
    }

    /// The first request: the first live URL, unless a server asked to wait for it and another
    /// URL may be asked now. `waitFor` tells how long a URL must not be asked yet (`nil`: ask).
    mutating func start(waitFor: (Int) -> Duration?) -> Action {
        request(waitFor: waitFor)
    }

    /// The next step after `outcome`.
    mutating func next(after outcome: Outcome, waitFor: (Int) -> Duration?) -> Action {
        switch outcome {
        case .checksumMismatch(let error):
            checksumFailures += 1
            if let final = Self.mismatchVerdict(error, failures: checksumFailures) { return .fail(final) }
            fromScratch = true
            mirror = nextMirror(excluding: [mirror]) ?? mirror
            return request(waitFor: waitFor)

        case .failed(let error, let progressed, let resumed):
            if progressed {
                failures = 0
                triedThisRound.removeAll()
            }
            if error.isLocal { return .fail(error) }
            if error.code == .contentChanged || (error.httpStatus == 412 && sharesFile) {
                // Bytes an earlier attempt left belong to another version (another URL's, or an
                // older one): only they are dropped. A fresh request that meets another version
                // under a shared file means the resource changed under the other segments.
                if sharesFile, !resumed { return .resetOutput(error) }
                // A file of its own: this segment starts over from its first byte.
                fromScratch = true
                return request(waitFor: waitFor)
            }
            if error.isTransient, !error.suggestsReResolve {
                triedThisRound.insert(mirror)
                if let next = nextMirror(excluding: triedThisRound) {
                    mirror = next
                    return request(waitFor: waitFor)
                }
                if error.isConnectivity { return .waitForNetwork(error) }
                failures += 1
                guard failures < policy.maxAttempts else { return .fail(error) }
                triedThisRound.removeAll()
                mirror = nextMirror(excluding: []) ?? mirror
                var delay = policy.delay(afterFailure: failures, retryAfter: error.retryAfter, using: &random)
                if let asked = waitFor(mirror) { delay = max(delay, asked) }
                return .wait(delay, mirror: mirror, fromScratch: fromScratch)
            }
            // Refused for good by this URL.
            dead.insert(mirror)
            if let next = nextMirror(excluding: []) {
                mirror = next
                return request(waitFor: waitFor)
            }
            return error.suggestsReResolve ? .reResolve(error) : .fail(error)
        }
    }

    /// The rule for bytes that fail their check (a segment's checksum, a finished output's
    /// checksum or size): they are fetched once more, then the task fails. `failures` counts the
    /// failed checks so far, this one included. `nil`: fetch again; else the error the task ends
    /// with.
    static func mismatchVerdict(_ error: DownloadError, failures: Int) -> DownloadError? {
        guard failures >= 2 else { return nil }
        var final = error
        final.message = "\(error.message), again after downloading it a second time"
        return final
    }

    /// URLs this segment found dead.
    var deadMirrors: Set<Int> { dead }

    /// The current URL, or another live one when a server asked to wait for it; a wait when every
    /// live URL must wait.
    private mutating func request(waitFor: (Int) -> Duration?) -> Action {
        guard let delay = waitFor(mirror) else { return .fetch(mirror: mirror, fromScratch: fromScratch) }
        let live = (0..<mirrorCount).map { (mirror + $0) % mirrorCount }.filter { !dead.contains($0) }
        if let free = live.first(where: { waitFor($0) == nil }) {
            mirror = free
            return .fetch(mirror: mirror, fromScratch: fromScratch)
        }
        // Every live URL is held back: wait for the one free soonest.
        let soonest = live.min { (waitFor($0) ?? .zero) < (waitFor($1) ?? .zero) } ?? mirror
        mirror = soonest
        return .wait(waitFor(soonest) ?? delay, mirror: soonest, fromScratch: fromScratch)
    }

    /// The next live URL after the current one that is not in `excluded`.
    private func nextMirror(excluding excluded: Set<Int>) -> Int? {
        (1...mirrorCount).lazy.map { (mirror + $0) % mirrorCount }.first { !excluded.contains($0) && !dead.contains($0) }
    }
}
