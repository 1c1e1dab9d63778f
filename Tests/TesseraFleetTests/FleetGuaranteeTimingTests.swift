import Foundation
import Tessera
import TesseraFleet
import TesseraTesting
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The fleet's guarantees, each with real `tessera serve --fleet` processes against a
/// PostgreSQL 15 of the test's own, downloading from a loopback origin into one shared root:
/// SIGKILL, SIGSTOP past the lease, a short freeze, PostgreSQL restarted, and kill cycles.
/// (Named `…TimingTests`: `make test` runs them one at a time, after the rest, since they time
/// takeovers.)
@Suite(.serialized, .enabled(if: PostgresTestServer.shouldRun, Comment(rawValue: PostgresTestServer.skipReason)), .timeLimit(.minutes(5)))
struct FleetGuaranteeTimingTests {
    /// Lease 2 s: heartbeats every 0.667 s; a takeover within lease + heartbeat + 1 s.
    static let lease: Duration = .seconds(2)
    static let takeoverBound: Duration = lease + lease / 3 + .seconds(1)

    static func withFleet(workers: Int, jobs: Int = 3, _ body: (FleetHarness) async throws -> Void) async throws {
        try await FleetHarness.with(workers: workers, jobs: jobs, lease: 2, body)
    }

    /// Starts a throttled plain file and waits until it is running with `bytes` done; returns its
    /// key, row and owner.
    static func runningFile(
        _ fleet: FleetHarness, size: Int64, rate: Int, after bytes: Int64
    ) async throws -> (key: String, path: String, row: FleetHarness.Row, owner: FleetHarness.Worker) {
        let path = "/bytes/\(size)/big.bin"
        fleet.origin.inject(.throttle(bytesPerSecond: rate), at: path)
        let key = try #require(try await fleet.enqueue([path]).first)
        #expect(await eventually(within: .seconds(30)) { ((try? await fleet.progress(key)) ?? 0) >= bytes }, "\(fleet.logs)")
        let row = try #require(try await fleet.row(key))
        let owner = try #require(fleet.worker(pid: row.ownerPid), "no worker holds \(key): \(row)")
        return (key, path, row, owner)
    }

    @Test func aKilledWorkersDownloadIsTakenOverWithinTheLeaseAHeartbeatAndASecond() async throws {
        try await Self.withFleet(workers: 2, jobs: 2) { fleet in
            let size: Int64 = 24 << 20
            let (key, path, row, owner) = try await Self.runningFile(fleet, size: size, rate: 2 << 20, after: 4 << 20)
            owner.process.send(SIGKILL)
            let killed = ContinuousClock.now
            var takenOver = false
            #expect(await eventually(within: .seconds(15), every: .milliseconds(20)) {
                guard let now = try? await fleet.row(key) else { return false }
                takenOver = now.state == "completed" || (now.state == "running" && now.epoch > row.epoch && now.ownerPid != row.ownerPid)
                return takenOver
            })
            let takeover = ContinuousClock.now - killed
            print("fleet: takeover after SIGKILL in \(takeover) (bound \(Self.takeoverBound))")
            #expect(takeover <= Self.takeoverBound)
            #expect(await eventually(within: .seconds(60)) { (try? await fleet.row(key))?.state == "completed" }, "\(fleet.logs)")
            #expect(await fleet.origin.content(at: path).verifyFile(atPath: fleet.root + "/big.bin", size: size))
            // Re-fetched: what the killed worker had received but not recorded (2 connections).
            let extra = fleet.origin.bytesServed(for: path) - size
            print("fleet: \(extra) bytes fetched twice after the kill")
            #expect(extra <= 3 << 20)
            #expect(try await fleet.completions() == [key: 1])
        }
    }

    @Test func aWorkerFrozenPastItsLeaseWritesNothingAfterTheTakeoverAndJoinsAgain() async throws {
        try await Self.withFleet(workers: 2, jobs: 2) { fleet in
            let size: Int64 = 16 << 20
            let (key, path, row, owner) = try await Self.runningFile(fleet, size: size, rate: 2 << 20, after: 3 << 20)
            owner.process.send(SIGSTOP)
            #expect(await eventually(within: .seconds(15), every: .milliseconds(20)) {
                guard let now = try? await fleet.row(key) else { return false }
                return now.epoch > row.epoch && now.ownerPid != row.ownerPid
            }, "\(fleet.logs)")
            // The frozen worker's journal (its epoch's files) as the takeover found it.
            let id = DirectEntity(url: fleet.origin.url(path)).taskID
            let journal = TaskJournalFiles.basePath(root: fleet.root, id: id, epoch: UInt64(row.epoch))
            #expect(TaskJournalFiles.suffixes.contains { Self.stamp(journal + $0) != nil }, "the frozen worker had written no journal")
            #expect(await eventually(within: .seconds(60)) { (try? await fleet.row(key))?.state == "completed" }, "\(fleet.logs)")
            // (The new owner, done, has deleted the journals of the epochs before its own.)
            let before = TaskJournalFiles.suffixes.map { Self.stamp(journal + $0) }
            let finished = Self.stamp(fleet.root + "/big.bin")
            owner.process.send(SIGCONT)
            // It learns it was declared dead and joins again as a new worker.
            #expect(await eventually(within: .seconds(15)) {
                guard owner.log.contains("declared this worker dead") else { return false }
                return ((try? await fleet.activeWorkerPids()) ?? []).contains(Int(owner.pid))
            }, "\(fleet.logs)")
            // Nothing of the frozen worker's journal was written again (the new owner may still be
            // deleting the old epoch's files: gone is fine, changed or back is not), and the
            // finished file was not replaced.
            let after = TaskJournalFiles.suffixes.map { Self.stamp(journal + $0) }
            var untouched = true
            for index in after.indices where after[index] != nil && after[index] != before[index] { untouched = false }
            #expect(untouched, "\(before) -> \(after)")
            #expect(Self.stamp(fleet.root + "/big.bin") == finished, "the finished file was written again")
            #expect(await fleet.origin.content(at: path).verifyFile(atPath: fleet.root + "/big.bin", size: size))
            // No second copy moved into place, no partial file left.
            let names = try FileManager.default.contentsOfDirectory(atPath: fleet.root).filter { $0 != ".tessera" }
            #expect(names == ["big.bin"])
            #expect(try await fleet.completions() == [key: 1])
        }
    }

    @Test func aFreezeShorterThanTheLeaseCausesNoTakeover() async throws {
        try await Self.withFleet(workers: 2, jobs: 2) { fleet in
            let size: Int64 = 12 << 20
            let (key, path, row, owner) = try await Self.runningFile(fleet, size: size, rate: 2 << 20, after: 2 << 20)
            owner.process.send(SIGSTOP)
            try await Task.sleep(for: Self.lease / 2)  // the freeze itself
            owner.process.send(SIGCONT)
            // Watched for longer than a lease: the task stays with its owner, same epoch.
            #expect(await consistently(for: .seconds(3), every: .milliseconds(50)) {
                guard let now = try? await fleet.row(key) else { return false }
                return now.state == "completed" || (now.epoch == row.epoch && now.ownerPid == row.ownerPid)
            }, "\(fleet.logs)")
            #expect(await eventually(within: .seconds(60)) { (try? await fleet.row(key))?.state == "completed" }, "\(fleet.logs)")
            #expect(try await fleet.row(key)?.epoch == row.epoch)
            #expect(!owner.log.contains("declared this worker dead"))
            #expect(await fleet.origin.content(at: path).verifyFile(atPath: fleet.root + "/big.bin", size: size))
            #expect(try await fleet.completions() == [key: 1])
        }
    }

    @Test func theFleetGoesOnWhenPostgreSQLRestarts() async throws {
        try await Self.withFleet(workers: 3, jobs: 2) { fleet in
            let size: Int64 = 4 << 20
            let paths = (0..<6).map { "/bytes/\(size)/file-\($0).bin" }
            for path in paths { fleet.origin.inject(.throttle(bytesPerSecond: 512 << 10), at: path) }
            let keys = try await fleet.enqueue(paths)
            #expect(await eventually(within: .seconds(30)) { ((try? await fleet.states()) ?? [:])["running"] ?? 0 >= 3 }, "\(fleet.logs)")
            await fleet.server.kill()
            try await Task.sleep(for: .seconds(3))  // the database is away for longer than a lease
            try await fleet.server.restart()
            #expect(await eventually(within: .seconds(90)) { ((try? await fleet.states()) ?? [:])["completed"] == paths.count }, "\(fleet.logs)")
            for path in paths {
                let name = String(path.split(separator: "/").last!)
                #expect(await fleet.origin.content(at: path).verifyFile(atPath: fleet.root + "/" + name, size: size), "\(name)")
            }
            let completions = try await fleet.completions()
            #expect(Set(completions.keys) == Set(keys))
            #expect(completions.values.allSatisfy { $0 == 1 })
        }
    }

    @Test(.timeLimit(.minutes(60))) func randomKillCyclesOfThreeWorkersNeverCompleteATaskTwice() async throws {
        let cycles = Int(ProcessInfo.processInfo.environment["TESSERA_FLEET_KILL_CYCLES"] ?? "") ?? 20
        try await Self.withFleet(workers: 3, jobs: 3) { fleet in
            let size: Int64 = 2 << 20
            // Enough to keep 3 workers busy through every kill (about a second apart).
            let paths = (0..<max(24, cycles * 6 / 5)).map { "/bytes/\(size)/plain-\($0).bin" }
            for path in paths { fleet.origin.inject(.throttle(bytesPerSecond: 256 << 10), at: path) }
            let dash = (0..<2).map { DASHFixture.install(on: fleet.origin, directory: "/dash/s\($0)", title: "stream \($0)") }
            for fixture in dash {
                for track in fixture.tracks { for part in track.parts { fleet.origin.inject(.throttle(bytesPerSecond: 96 << 10), at: part.path) } }
            }
            let metalink = MetalinkFixture.install(on: fleet.origin)
            for file in metalink.files { for mirror in file.mirrorPaths { fleet.origin.inject(.throttle(bytesPerSecond: 96 << 10), at: mirror) } }
            _ = try await fleet.enqueue(paths)
            let added = try await fleet.fleetAdd(dash.flatMap(\.inputs) + metalink.inputs)
            let expected = paths.count + dash.count + metalink.files.count
            #expect(await eventually(within: .seconds(30)) { ((try? await fleet.states()) ?? [:]).values.reduce(0, +) == expected }, "\(added)")
            var generator = SystemRandomNumberGenerator()
            var killed = 0
            for _ in 0..<cycles {
                try await Task.sleep(for: .milliseconds(Int.random(in: 300...1_200, using: &generator)))
                let live = try await fleet.activeWorkerPids()
                guard let victim = fleet.workers.filter({ live.contains(Int($0.pid)) }).randomElement(using: &generator) else { continue }
                victim.process.send(SIGKILL)
                _ = await victim.process.ended()
                killed += 1
                try fleet.startWorker(jobs: 3)
            }
            // The kills fell on downloads in progress, not on a finished queue.
            let completedByThen = try await fleet.states()["completed"] ?? 0
            print("fleet: \(killed) workers killed; \(completedByThen) of \(expected) tasks completed when the kills ended")
            #expect(killed >= min(cycles, 20))
            #expect(completedByThen < expected)
            #expect(await eventually(within: .seconds(180 + cycles)) { ((try? await fleet.states()) ?? [:])["completed"] == expected }, "\(fleet.logs)")
            let states = try await fleet.states()
            #expect(states == ["completed": expected], "\(fleet.logs)")
            let completions = try await fleet.completions()
            #expect(completions.count == expected)
            #expect(completions.values.allSatisfy { $0 == 1 }, "double completions: \(completions.filter { $0.value > 1 })")
            for path in paths {
                let name = String(path.split(separator: "/").last!)
                #expect(await fleet.origin.content(at: path).verifyFile(atPath: fleet.root + "/" + name, size: size), "\(name)")
            }
            for fixture in dash { #expect(await fixture.verify(downloadRoot: fleet.root) == []) }
            #expect(await metalink.verify(downloadRoot: fleet.root) == [])
        }
    }

    /// A file's size and modification time, or `nil` when it is not there.
    static func stamp(_ path: String) -> [Int64]? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return [Int64(info.st_size), Int64(info.st_mtim.tv_sec), Int64(info.st_mtim.tv_nsec)]
    }
}
