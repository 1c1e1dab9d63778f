import Foundation
import Tessera
import TesseraServer
import TesseraTesting
import Testing

/// A daemon that is one worker of a fleet, with a fleet of the test's own (no database): the
/// fleet's tasks in its RPC, commands going to the fleet, and the fleet's notifications.
@Suite(.timeLimit(.minutes(1))) struct DaemonFleetTests {
    /// A fleet whose tasks the test sets, recording the commands it is given.
    final class FakeFleet: DaemonFleet {
        let worker = "a:1"
        let tasks = Locked<[DaemonFleetTask]>([])
        let commands = Locked<[String]>([])

        func tasks() async throws -> [DaemonFleetTask] { tasks.withLock { $0 } }
        /// Times the changes were read.
        let reads = Locked(0)
        func changes(since cursor: Double?) async throws -> (tasks: [DaemonFleetTask], cursor: Double) {
            let tasks = tasks.withLock { tasks in
                reads.withLock { $0 += 1 }
                return tasks
            }
            return (tasks, (cursor ?? 0) + 1)
        }
        func pause(_ id: DownloadTaskID) async throws -> Bool { record("pause \(id)") }
        func unpause(_ id: DownloadTaskID) async throws -> Bool { record("unpause \(id)") }
        func remove(_ id: DownloadTaskID, deletingFiles: Bool) async throws -> Bool { record("remove \(id)") }
        private func record(_ command: String) -> Bool {
            commands.withLock { $0.append(command) }
            return true
        }

        func set(_ state: DownloadTaskState, done: Int64 = 1 << 20) {
            let info = DownloadTaskInfo(
                recordOf: Self.id, title: "elsewhere.bin", groupKey: nil, state: state, bytesDone: done, bytesTotal: 4 << 20,
                segmentsDone: 1, segmentsTotal: 4, error: nil)
            tasks.withLock { $0 = [DaemonFleetTask(info: info, worker: state.isRunning ? "b:42" : nil)] }
        }

        static let id = DownloadTaskID(entityType: "direct", entityKey: "http://127.0.0.1:9/elsewhere.bin")
        static var gid: String { Aria2GID.of(id) }
    }

    @Test func theFleetsTasksAreListedWithTheirWorkerAndCommandsGoToTheFleet() async throws {
        let fleet = FakeFleet()
        fleet.set(.downloading)
        try await ServeHarness.with(fleet: fleet) { harness in
            let gid = FakeFleet.gid
            #expect(await harness.field(gid, "status") == "active")
            #expect(await harness.field(gid, "completedLength") == .string(String(1 << 20)))
            #expect(await harness.field(gid, "tessera")?["worker"] == "b:42")
            let active = await harness.result("aria2.tellActive")?.arrayValue ?? []
            #expect(active.compactMap { $0["gid"]?.stringValue } == [gid])
            #expect(await harness.result("aria2.getGlobalStat")?["numActive"] == "1")
            #expect(await harness.result("aria2.pause", [.string(gid)]) == .string(gid))
            fleet.set(.paused)
            #expect(await harness.result("aria2.unpause", [.string(gid)]) == .string(gid))
            fleet.set(.downloading)
            #expect(await harness.result("aria2.remove", [.string(gid)]) == .string(gid))
            #expect(fleet.commands.withLock { $0 } == ["pause \(FakeFleet.id)", "unpause \(FakeFleet.id)", "remove \(FakeFleet.id)"])
            // A finished task of the fleet keeps its result there.
            fleet.set(.completed, done: 4 << 20)
            #expect(await harness.field(gid, "status") == "complete")
            #expect(await harness.result("aria2.removeDownloadResult", [.string(gid)]) == nil)
        }
    }

    @Test func theFleetsChangesBecomeNotifications() async throws {
        let fleet = FakeFleet()
        fleet.set(.downloading)
        try await ServeHarness.with(fleet: fleet) { harness in
            let notifications = try #require(harness.daemon.fleetNotifications())
            var iterator = notifications.makeAsyncIterator()
            // (The first reading only learns what is there.)
            #expect(await eventually(within: .seconds(10)) { fleet.reads.withLock { $0 } >= 1 })
            fleet.set(.completed, done: 4 << 20)
            let notification = await iterator.next()
            #expect(notification?["method"] == "aria2.onDownloadComplete")
            #expect(notification?["params"]?.arrayValue?.first?["gid"] == .string(FakeFleet.gid))
        }
    }

    @Test func aDaemonOfItsOwnHasNoFleetNotifications() async throws {
        try await ServeHarness.with { harness in
            #expect(harness.daemon.fleetNotifications() == nil)
        }
    }

    @Test func theNotifierAnnouncesChangesAfterItsFirstReading() {
        var notifier = Aria2FleetNotifier()
        #expect(notifier.read([("a", "active"), ("b", "complete")]).isEmpty)
        #expect(notifier.read([("a", "active")]).isEmpty)
        let methods = notifier.read([("a", "paused"), ("b", "complete"), ("c", "waiting"), ("c", "active"), ("d", "error"), ("a", "removed")])
            .map { $0["method"]?.stringValue }
        #expect(methods == ["aria2.onDownloadPause", "aria2.onDownloadStart", "aria2.onDownloadError", "aria2.onDownloadStop"])
        #expect(notifier.read([("b", "complete")]).isEmpty)
    }
}
