import Glibc

/// Places where the crash tests kill the process, as SIGKILL would at that very moment: set
/// `TESSERA_CRASH_AT=<point>` (or `<point>:<n>`, the n-th time the point is reached) in the
/// environment of a process that uses Tessera. Without the variable (always, outside the crash
/// tests) reaching a point costs one comparison.
enum CrashPoint: String, CaseIterable, Sendable {
    /// The parser returned a manifest; nothing of it is stored yet.
    case resolved
    /// A segment's bytes are written and noted in memory; the journal has not committed them.
    case segmentDone = "segment-done"
    /// An output is complete and verified at its partial name, not yet moved to its place.
    case assembled
    /// An output is in its place (and in the cache); the task is not yet recorded completed.
    case moved
    /// Inside a store transaction, after its statements, before it commits.
    case storeWrite = "store-write"
    /// A cache entry's data is in place; its record is not.
    case cacheData = "cache-data"
    /// ffmpeg has written a merge's temporary file; it is not renamed yet.
    case mergeWritten = "merge-written"
    /// A merged file is in its place; the inputs are there, the replacement is not recorded.
    case merged

    /// The point to crash at, from the environment (read once).
    private static let setting: (point: CrashPoint, count: Int)? = parse()
    private static let armed: CrashPoint? = setting?.point
    /// How many more times the armed point is passed before the crash.
    private static let remaining = Locked(setting?.count ?? 0)

    private static func parse() -> (point: CrashPoint, count: Int)? {
        guard let raw = getenv("TESSERA_CRASH_AT") else { return nil }
        let parts = String(cString: raw).split(separator: ":", maxSplits: 1)
        guard let first = parts.first, let point = CrashPoint(rawValue: String(first)) else { return nil }
        return (point, parts.count > 1 ? max(1, Int(parts[1]) ?? 1) : 1)
    }

    /// Kills the process with SIGKILL when this is the armed point, reached for the n-th time.
    func reach() {
        guard Self.armed == self else { return }
        let now = Self.remaining.withLock { remaining -> Bool in
            remaining -= 1
            return remaining == 0
        }
        if now { kill(getpid(), SIGKILL) }
    }
}
