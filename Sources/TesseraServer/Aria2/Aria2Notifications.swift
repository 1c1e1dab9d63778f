import Tessera

/// aria2's WebSocket notifications for Tessera's events.
public enum Aria2Notifications {
    /// The notification an event makes, if any: `aria2.onDownloadStart` when a task becomes
    /// active, `onDownloadPause` when paused, `onDownloadComplete`, `onDownloadError` (failed or
    /// invalid) and `onDownloadStop` (removed). Groups send none: their tasks do.
    public static func notification(for event: DownloadEvent) -> RPCValue? {
        let method: String
        let gid: String
        switch event {
        case .taskStateChanged(let info, let previous):
            gid = Aria2GID.of(info.id)
            switch info.state.kind {
            case .resolving, .downloading:
                guard !previous.isRunning else { return nil }
                method = "aria2.onDownloadStart"
            case .paused: method = "aria2.onDownloadPause"
            case .completed: method = "aria2.onDownloadComplete"
            case .failed, .invalid: method = "aria2.onDownloadError"
            case .removed: method = "aria2.onDownloadStop"
            default: return nil
            }
        case .taskRemoved(let id):
            gid = Aria2GID.of(id)
            method = "aria2.onDownloadStop"
        default:
            return nil
        }
        return ["jsonrpc": "2.0", "method": .string(method), "params": [["gid": .string(gid)]]]
    }
}
