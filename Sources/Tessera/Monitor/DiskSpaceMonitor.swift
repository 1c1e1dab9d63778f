import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Tells how many bytes a path's file system has free for this user.
public protocol FreeSpaceSource: Sendable {
    /// Bytes available to an unprivileged writer at `path`, or `nil` when it cannot be told.
    func availableBytes(at path: String) -> Int64?
}

/// The real source: `statvfs(3)` (`f_bavail × f_frsize`), looking at the nearest existing
/// ancestor when `path` does not exist yet.
public struct FileSystemFreeSpace: FreeSpaceSource {
    /// Creates the source.
    public init() {}

    public func availableBytes(at path: String) -> Int64? {
        var candidate = path.isEmpty ? "." : path
        var info = statvfs()
        while statvfs(candidate, &info) != 0 {
            guard errno == ENOENT else { return nil }
            let parent = (candidate as NSString).deletingLastPathComponent
            guard !parent.isEmpty, parent != candidate else { return nil }
            candidate = parent
        }
        return Int64(info.f_bavail) * Int64(info.f_frsize)
    }
}

/// When a manager warns about disk space, and when it stops.
public struct DiskSpacePolicy: Sendable {
    /// Below this many free bytes, a ``DownloadNotice/Kind/diskSpaceLow`` notice; tasks stopped
    /// for lack of space resume once free space is back above it.
    public var warningBytes: Int64
    /// Below this many free bytes, every running task goes to `interrupted(diskSpace)`.
    public var stopBytes: Int64
    /// How often free space is checked (it is also checked before every segment).
    public var checkInterval: Duration
    /// Where free space comes from (tests inject their own).
    public var source: any FreeSpaceSource

    /// Creates a policy; defaults are 200 MB and 50 MB, checked every 5 s.
    public init(
        warningBytes: Int64 = 200_000_000, stopBytes: Int64 = 50_000_000, checkInterval: Duration = .seconds(5),
        source: any FreeSpaceSource = FileSystemFreeSpace()
    ) {
        self.warningBytes = warningBytes
        self.stopBytes = stopBytes
        self.checkInterval = checkInterval
        self.source = source
    }
}

extension DiskSpacePolicy {
    /// Whether free space is looked at again now rather than at the next interval: the bytes
    /// written since the last check (`written`) come within half of what the last check left
    /// above the stop threshold (`lastFree` bytes free then), so a fast download cannot write
    /// past the threshold between two checks.
    func checksEarly(written: Int64, lastFree: Int64) -> Bool {
        written.saturatingMultiplying(2).saturatingAdding(stopBytes) >= lastFree
    }
}

/// The level of free space, with hysteresis: once critical, it stays critical until free space
/// is back above the warning threshold.
public enum DiskSpaceLevel: String, Sendable, Hashable {
    /// Above the warning threshold.
    case ample
    /// Between the thresholds.
    case low
    /// Below the stop threshold (or a write failed for lack of space).
    case critical
}

/// Checks the paths a manager writes to (download root, cache) against a ``DiskSpacePolicy``.
/// Shared by the manager's timer and its runners, which ask before every segment.
final class DiskGate: Sendable {
    let policy: DiskSpacePolicy
    let paths: [String]
    private let forcedCritical = Atomic(false)
    private let critical = Atomic(false)

    init(policy: DiskSpacePolicy, paths: [String]) {
        self.policy = policy
        self.paths = paths
    }

    /// The fewest free bytes over the paths; `nil` when none can be told.
    func freeBytes() -> Int64? {
        paths.compactMap { policy.source.availableBytes(at: $0) }.min()
    }

    /// The level, given the previous one (hysteresis).
    func level(after previous: DiskSpaceLevel) -> (level: DiskSpaceLevel, free: Int64?) {
        guard let free = freeBytes() else { return (forcedCritical.load(ordering: .relaxed) ? .critical : .ample, nil) }
        if previous == .critical || forcedCritical.load(ordering: .relaxed) {
            // Hysteresis: out of critical only above the warning threshold.
            return (free >= policy.warningBytes ? .ample : .critical, free)
        }
        if free < policy.stopBytes { return (.critical, free) }
        if free < policy.warningBytes { return (.low, free) }
        return (.ample, free)
    }

    /// A write failed with `ENOSPC`: critical until a check finds space again.
    func markFull() { forcedCritical.store(true, ordering: .relaxed) }

    /// The level the manager's last check found (runs consult it before each segment).
    func noteLevel(_ level: DiskSpaceLevel) { critical.store(level == .critical, ordering: .relaxed) }

    /// Free space came back.
    func clearFull() { forcedCritical.store(false, ordering: .relaxed) }

    /// The error a run stops with when there is no room for another segment: from the last
    /// check (no system call here; the manager checks often enough, sooner as writes approach
    /// the limit, and a full disk shows at the first write).
    func refusal() -> DownloadError? {
        if forcedCritical.load(ordering: .relaxed) {
            return DownloadError(.diskFull, "the disk is full; waiting for free space")
        }
        guard critical.load(ordering: .relaxed) else { return nil }
        return DownloadError(
            .diskFull, "free space is below the \(policy.stopBytes / 1_000_000) MB limit; waiting for free space")
    }
}
