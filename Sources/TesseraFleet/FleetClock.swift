#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A reading of the clock a worker trusts its lease by: `CLOCK_BOOTTIME`, which goes on while the
/// process is stopped (SIGSTOP) and while the machine sleeps, so a worker that was frozen knows
/// on waking how long it was away. Never compared with the database's clock: a worker only
/// measures how long ago *it* sent something.
public struct FleetInstant: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// Nanoseconds since boot.
    public var nanoseconds: UInt64

    /// A reading.
    public init(nanoseconds: UInt64) {
        self.nanoseconds = nanoseconds
    }

    /// Now.
    public static func now() -> FleetInstant {
        var time = timespec()
        clock_gettime(CLOCK_BOOTTIME, &time)
        return FleetInstant(nanoseconds: UInt64(time.tv_sec) &* 1_000_000_000 &+ UInt64(time.tv_nsec))
    }

    /// `self` moved by `duration` (saturating at the clock's ends).
    public func advanced(by duration: Duration) -> FleetInstant {
        let delta = duration.fleetNanoseconds
        if delta >= 0 {
            let (sum, overflow) = nanoseconds.addingReportingOverflow(UInt64(delta))
            return FleetInstant(nanoseconds: overflow ? .max : sum)
        }
        let magnitude = delta == .min ? UInt64(Int64.max) + 1 : UInt64(-delta)
        return FleetInstant(nanoseconds: nanoseconds > magnitude ? nanoseconds - magnitude : 0)
    }

    /// How long after `earlier` this is (zero when it is not after).
    public func since(_ earlier: FleetInstant) -> Duration {
        nanoseconds > earlier.nanoseconds ? .nanoseconds(Int64(clamping: nanoseconds - earlier.nanoseconds)) : .zero
    }

    public static func < (lhs: FleetInstant, rhs: FleetInstant) -> Bool { lhs.nanoseconds < rhs.nanoseconds }

    public var description: String { "\(Double(nanoseconds) / 1e9)s" }
}

extension Duration {
    /// Whole nanoseconds, saturating.
    var fleetNanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        let (sum, overflow2) = scaled.addingReportingOverflow(attoseconds / 1_000_000_000)
        return overflow2 ? (scaled < 0 ? .min : .max) : sum
    }

    /// Seconds (what the SQL statements take for intervals).
    var fleetSeconds: Double { Double(fleetNanoseconds) / 1e9 }
}
