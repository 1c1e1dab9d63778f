import Foundation

/// A worker of the fleet as the dashboard shows it.
public struct DaemonFleetWorker: Sendable, Equatable {
    /// `host:pid`, as tasks name the worker that runs them.
    public var name: String
    /// Its host.
    public var host: String
    /// Its pid.
    public var pid: Int
    /// Its RPC port, when it told.
    public var port: Int?
    /// `alive`, `late` (missed a heartbeat), `dead` (lease ended) or `gone` (left gracefully).
    public var health: String
    /// Seconds since its last heartbeat, by the database's clock.
    public var secondsSinceHeartbeat: Double
    /// The running tasks it holds.
    public var tasks: Int
    /// How many it may run (`-j`).
    public var maxTasks: Int

    /// A worker.
    public init(name: String, host: String, pid: Int, port: Int?, health: String, secondsSinceHeartbeat: Double, tasks: Int, maxTasks: Int) {
        self.name = name
        self.host = host
        self.pid = pid
        self.port = port
        self.health = health
        self.secondsSinceHeartbeat = secondsSinceHeartbeat
        self.tasks = tasks
        self.maxTasks = maxTasks
    }
}
