/// aria2's WebSocket notifications for a fleet's tasks, from the statuses the daemon reads of
/// them (a value: statuses in, notifications out). Each worker of a fleet sends them for every
/// task of the fleet, whichever worker runs it.
///
/// The first reading only learns what is there (nothing that happened before is announced);
/// after it, a task whose aria2 status changed (or a new one) is announced as
/// ``Aria2Notifications`` announces a local task: `onDownloadStart` when it becomes active,
/// `onDownloadPause`, `onDownloadComplete`, `onDownloadError` and `onDownloadStop` (removed);
/// waiting is not announced.
public struct Aria2FleetNotifier: Sendable {
    private var known: [String: String] = [:]
    private var seeded = false

    /// A notifier that has read nothing yet.
    public init() {}

    /// Takes the statuses (GID, aria2 status) of the tasks read since the last call (a task may
    /// come again unchanged); returns the notifications to send, in order.
    public mutating func read(_ statuses: [(gid: String, status: String)]) -> [RPCValue] {
        var notifications: [RPCValue] = []
        for (gid, status) in statuses {
            let previous = known.updateValue(status, forKey: gid)
            guard seeded, previous != status else { continue }
            let method: String
            switch status {
            case "active": method = "aria2.onDownloadStart"
            case "paused": method = "aria2.onDownloadPause"
            case "complete": method = "aria2.onDownloadComplete"
            case "error": method = "aria2.onDownloadError"
            case "removed": method = "aria2.onDownloadStop"
            default: continue
            }
            notifications.append(["jsonrpc": "2.0", "method": .string(method), "params": [["gid": .string(gid)]]])
        }
        seeded = true
        return notifications
    }
}
