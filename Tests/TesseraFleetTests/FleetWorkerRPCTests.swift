import Foundation
import Tessera
import TesseraFleet
import TesseraTesting
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// What a user of the fleet sees through any worker's RPC, and a graceful stop, with real
/// `tessera serve --fleet` workers against a PostgreSQL 15 of the test's own.
@Suite(.enabled(if: PostgresTestServer.shouldRun, Comment(rawValue: PostgresTestServer.skipReason)), .timeLimit(.minutes(3)))
struct FleetWorkerRPCTests {
    /// The worker of `fleet` that is not `other` (of two).
    static func worker(of fleet: FleetHarness, besides other: Int?) throws -> FleetHarness.Worker {
        try #require(fleet.workers.first { Int($0.pid) != other })
    }

    /// The status of `gid` on `worker` (`tellStatus`).
    static func status(_ worker: FleetHarness.Worker, _ gid: String) async throws -> [String: Any] {
        try #require(try await worker.call("aria2.tellStatus", [gid]) as? [String: Any])
    }

    /// The JSON objects of a server-sent event stream's text.
    static func objects(_ text: String) -> [[String: Any]] {
        text.components(separatedBy: "\n\n").compactMap { event in
            guard event.hasPrefix("data: ") else { return nil }
            return (try? JSONSerialization.jsonObject(with: Data(event.dropFirst(6).utf8))) as? [String: Any]
        }
    }

    /// The GIDs a `tell…` call on `worker` lists.
    static func gids(_ worker: FleetHarness.Worker, _ method: String, _ params: [Any] = []) async throws -> [String] {
        ((try await worker.call(method, params) as? [[String: Any]]) ?? []).compactMap { $0["gid"] as? String }
    }

    @Test func anyWorkersRPCShowsAndActsOnTasksAnotherWorkerRuns() async throws {
        try await FleetHarness.with(workers: 2, jobs: 2, lease: 10) { fleet in
            let size: Int64 = 24 << 20
            let path = "/bytes/\(size)/shared.bin"
            fleet.origin.inject(.throttle(bytesPerSecond: 1 << 20), at: path)
            // Added on the first worker; whichever claims it runs it.
            let gid = try #require(try await fleet.workers[0].call("aria2.addUri", [[fleet.origin.url(path).absoluteString]]) as? String)
            let key = DirectEntity(url: fleet.origin.url(path)).taskID.description
            #expect(await eventually(within: .seconds(30)) { ((try? await fleet.progress(key)) ?? 0) > 0 }, "\(fleet.logs)")
            let owner = try #require(try await fleet.row(key)?.ownerPid)
            let other = try Self.worker(of: fleet, besides: owner)

            // The worker that does not run it shows it, running, with the worker that does.
            let status = try await Self.status(other, gid)
            #expect(status["status"] as? String == "active")
            #expect((status["tessera"] as? [String: Any])?["worker"] as? String == "\(ProcessInfo.processInfo.hostName):\(owner)")
            #expect(Int64(status["completedLength"] as? String ?? "") ?? 0 > 0)
            #expect(try await Self.gids(other, "aria2.tellActive").contains(gid))
            #expect(await eventually(within: .seconds(10)) {
                let stat = try? await other.call("aria2.getGlobalStat") as? [String: Any]
                return Int(stat?["numActive"] as? String ?? "") == 1
            })

            // Its /events (the dashboard's stream) shows the task with the worker running it, its
            // progress as it goes, and both workers alive.
            let owning = try #require(fleet.worker(pid: owner))
            let events = try LoopbackHTTP.stream(port: try #require(await other.port()), path: "/events")
            defer { events.close() }
            let ownerName = "\(ProcessInfo.processInfo.hostName):\(owner)"
            let seen = await eventually(within: .seconds(15)) {
                let objects = Self.objects(events.text)
                let shown = objects.filter { $0["id"] as? String == key && $0["worker"] as? String == ownerName }
                let workers = objects.last { $0["type"] as? String == "workers" }?["workers"] as? [[String: Any]] ?? []
                let alive = Set(workers.filter { $0["health"] as? String == "alive" }.compactMap { $0["pid"] as? Int })
                // (A change read after the snapshot: the task's progress comes as it goes.)
                return shown.contains { $0["type"] as? String == "task" } && alive.isSuperset(of: [Int(owner), Int(other.pid)])
                    && workers.first { $0["pid"] as? Int == owner }?["tasks"] as? Int == 1
            }
            #expect(seen, "\(events.text.suffix(3000))")
            let page = try await LoopbackHTTP.request(port: try #require(await other.port()), method: "GET", path: "/dashboard.js", body: nil)
            #expect(String(decoding: page.body, as: UTF8.self).contains("t.worker"))
            events.close()

            // Paused from there: the owner stops it (at its next heartbeat) and the queue keeps it paused.
            #expect(try await other.call("aria2.pause", [gid]) as? String == gid)
            #expect(await eventually(within: .seconds(20)) { (try? await fleet.row(key))?.state == "paused" }, "\(fleet.logs)")
            #expect(await eventually(within: .seconds(10)) { (try? await Self.gids(other, "aria2.tellWaiting", [0, 100]))?.contains(gid) == true })
            #expect(try await Self.status(owning, gid)["status"] as? String == "paused")

            // Unpaused from there: queued again and claimed by a worker.
            #expect(try await other.call("aria2.unpause", [gid]) as? String == gid)
            #expect(await eventually(within: .seconds(20)) { (try? await fleet.row(key))?.state == "running" }, "\(fleet.logs)")

            // Removed by the worker that does not run it (whichever that is now).
            let runner = try #require(try await fleet.row(key)?.ownerPid)
            let remover = try Self.worker(of: fleet, besides: runner)
            #expect(try await remover.call("aria2.remove", [gid]) as? String == gid)
            #expect(await eventually(within: .seconds(20)) { (try? await fleet.row(key))?.state == "removed" }, "\(fleet.logs)")
            #expect(await eventually(within: .seconds(10)) { (try? await Self.gids(remover, "aria2.tellStopped", [0, 100]))?.contains(gid) == true })
            #expect(try await fleet.completions().isEmpty)

            // A finished task is listed as complete by every worker, with its length.
            let small: Int64 = 256 << 10
            let done = "/bytes/\(small)/small.bin"
            let doneGID = try #require(try await other.call("aria2.addUri", [[fleet.origin.url(done).absoluteString]]) as? String)
            let doneKey = DirectEntity(url: fleet.origin.url(done)).taskID.description
            #expect(await eventually(within: .seconds(30)) { (try? await fleet.row(doneKey))?.state == "completed" }, "\(fleet.logs)")
            for worker in fleet.workers {
                #expect(await eventually(within: .seconds(10)) {
                    guard let status = try? await Self.status(worker, doneGID) else { return false }
                    return status["status"] as? String == "complete" && status["totalLength"] as? String == String(small)
                }, "worker \(worker.index)")
            }
            #expect(await fleet.origin.content(at: done).verifyFile(atPath: fleet.root + "/small.bin", size: small))
        }
    }

    /// How a worker is asked to stop gracefully.
    enum Stop: String, CaseIterable, Sendable {
        case sigterm = "SIGTERM"
        case shutdown = "aria2.shutdown"
    }

    /// With a lease of 30 s, another worker runs the task within seconds only if it was handed
    /// back.
    @Test(arguments: Stop.allCases) func aGracefulStopHandsItsTasksBackAtOnce(_ stop: Stop) async throws {
        try await FleetHarness.with(workers: 2, jobs: 2, lease: 30) { fleet in
            let size: Int64 = 16 << 20
            let path = "/bytes/\(size)/big.bin"
            fleet.origin.inject(.throttle(bytesPerSecond: 2 << 20), at: path)
            let key = try #require(try await fleet.enqueue([path]).first)
            #expect(await eventually(within: .seconds(30)) { ((try? await fleet.progress(key)) ?? 0) >= 2 << 20 }, "\(fleet.logs)")
            let row = try #require(try await fleet.row(key))
            let owner = try #require(fleet.worker(pid: row.ownerPid))
            let other = try Self.worker(of: fleet, besides: row.ownerPid)
            switch stop {
            case .sigterm: owner.process.terminate()
            case .shutdown: _ = try await owner.call("aria2.shutdown")
            }
            let stopped = ContinuousClock.now
            #expect(await eventually(within: .seconds(15), every: .milliseconds(20)) {
                guard let now = try? await fleet.row(key) else { return false }
                return now.state == "completed" || (now.state == "running" && now.ownerPid == Int(other.pid) && now.epoch > row.epoch)
            }, "\(fleet.logs)")
            let handedOver = ContinuousClock.now - stopped
            print("fleet: after \(stop.rawValue), the other worker ran the task in \(handedOver)")
            #expect(handedOver < .seconds(15), "not handed back: taken over only when the 30 s lease ended")
            #expect(await owner.process.exited(within: .seconds(30)))
            #expect(await owner.process.ended().status == 0)
            #expect(owner.standardOutput.contains("this worker's tasks went back to the fleet's queue"))
            #expect(await eventually(within: .seconds(60)) { (try? await fleet.row(key))?.state == "completed" }, "\(fleet.logs)")
            #expect(await fleet.origin.content(at: path).verifyFile(atPath: fleet.root + "/big.bin", size: size))
            // Its journal was written at the stop: little was fetched twice.
            let extra = fleet.origin.bytesServed(for: path) - size
            print("fleet: \(extra) bytes fetched twice after the hand-back")
            #expect(extra <= 3 << 20)
            #expect(try await fleet.completions() == [key: 1])
            let status = try await FleetStatus.read(fleet.connection.queue)
            #expect(status.workers.first { $0.pid == Int(owner.pid) }?.state == "gone")
        }
    }
}
