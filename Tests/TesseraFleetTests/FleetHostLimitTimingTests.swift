import Foundation
import Tessera
import TesseraFleet
import TesseraTesting
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `--fleet-host-connections`: a per-host limit over the whole fleet, with real `tessera serve
/// --fleet` processes against a PostgreSQL 15 of the test's own and one loopback origin.
/// (Named `…TimingTests`: `make test` runs them one at a time, after the rest.)
@Suite(.serialized, .enabled(if: PostgresTestServer.shouldRun, Comment(rawValue: PostgresTestServer.skipReason)), .timeLimit(.minutes(5)))
struct FleetHostLimitTimingTests {
    /// Lease 2 s: heartbeats every 0.667 s.
    static let lease: Duration = .seconds(2)

    @Test func twoWorkersNeverOpenMoreThanTheFleetsConnectionsToOneHostAndOneAloneTakesThemAll() async throws {
        // Each worker alone would open up to its -N (8) connections: 6 files at once each, 12 in all.
        try await FleetHarness.with(workers: 2, jobs: 6, lease: 2, arguments: ["--fleet-host-connections", "3"]) { fleet in
            let size: Int64 = 300_000
            let paths = (0..<12).map { "/bytes/\(size)/h\($0).bin" }
            for path in paths { fleet.origin.inject(.throttle(bytesPerSecond: 200_000), at: path) }
            let keys = try await fleet.enqueue(paths)
            // The worker to kill has a transfer in flight (a file begun, not done: its slot is held
            // until the file ends), so the other holds at most 2 of the 3.
            let victim = fleet.workers[0]
            #expect(await eventually(within: .seconds(30), every: .milliseconds(20)) {
                for key in keys {
                    guard let row = try? await fleet.row(key), row.state == "running", row.ownerPid == Int(victim.pid),
                        let done = try? await fleet.progress(key), done > 0, done < size
                    else { continue }
                    return true
                }
                return false
            }, "\(fleet.logs)")
            let atKill = fleet.origin.openConnections
            victim.process.send(SIGKILL)
            let killed = ContinuousClock.now
            // Its connections close with it; the survivor reaches the fleet's 3 alone once the dead
            // worker's slots stopped counting (its lease) and its own next heartbeat took them.
            #expect(await eventually(within: .seconds(15), every: .milliseconds(5)) { fleet.origin.openConnections <= 2 })
            let bound = Self.lease + Self.lease / 3 + .seconds(1)
            #expect(await eventually(within: .seconds(15), every: .milliseconds(10)) { fleet.origin.openConnections >= 3 }, "\(fleet.logs)")
            let reached = ContinuousClock.now - killed
            print("fleet host limit: \(atKill) connections at the kill; the survivor had 3 after \(reached) (bound \(bound))")
            #expect(reached <= bound)
            #expect(await eventually(within: .seconds(90)) { ((try? await fleet.states()) ?? [:])["completed"] == paths.count }, "\(fleet.logs)")
            // (A connection a worker closes right before it opens the next may be seen closing
            // after the next opened: the origin's two event loops take them in either order. Each
            // file takes 1.5 s here; 50 ms of grace is far below any real overlap.)
            let seen = fleet.origin.maxConcurrentConnections, overlapping = fleet.origin.maxConcurrentConnections(grace: .milliseconds(50))
            print("fleet host limit: at most \(overlapping) connections at once (limit 3; \(seen) as the origin's loops saw them)")
            #expect(overlapping <= 3, "the origin saw more connections than the fleet's limit")
            for path in paths {
                let name = String(path.split(separator: "/").last!)
                #expect(await fleet.origin.content(at: path).verifyFile(atPath: fleet.root + "/" + name, size: size), "\(name)")
            }
            #expect(try await fleet.completions().values.allSatisfy { $0 == 1 })
        }
    }
}
