import Foundation
import Tessera
import TesseraCLI
import TesseraFleet
import TesseraServer

/// What `tessera serve --fleet` gives its daemon of the fleet: the queue's tasks that this
/// worker does not hold, and pause, unpause and remove through the queue (a command left on a
/// running task, read by its owner at its next heartbeat).
struct FleetDaemonBridge: DaemonFleet {
    let queue: FleetQueue
    let fleetWorker: FleetWorker
    let worker: String

    init(queue: FleetQueue, worker: FleetWorker) {
        self.queue = queue
        fleetWorker = worker
        self.worker = UntrustedText.printable(worker.settings.host, limit: 80) + ":" + String(worker.settings.pid)
    }

    func tasks() async throws -> [DaemonFleetTask] {
        let held = Set(fleetWorker.heldTasks.keys.map(\.description))
        return try await queue.tasks(except: held).map { DaemonFleetTask(info: $0.info, worker: $0.holder?.description) }
    }

    func stoppedTasks(offset: Int, count: Int) async throws -> [DaemonFleetTask] {
        try await queue.stoppedTasks(offset: offset, count: count).map { DaemonFleetTask(info: $0.info, worker: nil) }
    }

    func stoppedCount() async throws -> Int {
        let counts = try await queue.counts()
        return ["completed", "failed", "invalid", "removed"].reduce(0) { $0 + (counts[$1] ?? 0) }
    }

    func task(_ id: DownloadTaskID) async throws -> DaemonFleetTask? {
        try await queue.task(id.description).map { DaemonFleetTask(info: $0.info, worker: $0.holder?.description) }
    }

    func taskIDs() async throws -> [DownloadTaskID] {
        try await queue.taskKeys().compactMap(DownloadTaskID.init)
    }

    func changes(since cursor: Double?) async throws -> (tasks: [DaemonFleetTask], cursor: Double) {
        let (tasks, now) = try await queue.changes(since: cursor)
        return (tasks.map { DaemonFleetTask(info: $0.info, worker: $0.holder?.description) }, now)
    }

    func workers() async throws -> [DaemonFleetWorker] {
        try await queue.workers().map { worker in
            DaemonFleetWorker(
                name: UntrustedText.printable(worker.host, limit: 80) + ":" + String(worker.pid), host: worker.host, pid: worker.pid,
                port: worker.port, health: worker.health.rawValue, secondsSinceHeartbeat: worker.secondsSinceHeartbeat, tasks: worker.tasks,
                maxTasks: worker.maxTasks)
        }
    }

    func pause(_ id: DownloadTaskID) async throws -> Bool {
        try await queue.pause(id.description)
    }

    func unpause(_ id: DownloadTaskID) async throws -> Bool {
        try await queue.resume(id.description)
    }

    func remove(_ id: DownloadTaskID, deletingFiles: Bool) async throws -> Bool {
        try await queue.remove(id.description, files: deletingFiles)
    }
}
