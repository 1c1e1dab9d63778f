import Foundation
import Tessera

/// The objects of `tessera get --json` (docs/json-events.md), one per ``DownloadEvent``: the one
/// encoding of both the command line's JSON lines and the daemon's `/events` stream, which adds
/// ``serveKeys`` (`tessera get --json` leaves them out with ``commandLineObject(for:)``).
public enum EventJSON {
    /// The keys `/events` and `/api/tasks` add for the dashboard and aria2's clients: a task's
    /// `gid`, `plugin`, `files` and `groupGID`, a group's `gid` and `groupType`.
    public static let serveKeys: Set<String> = ["gid", "plugin", "files", "groupGID", "groupType"]

    /// The object of `tessera get --json`: ``object(for:)`` without ``serveKeys``.
    public static func commandLineObject(for event: DownloadEvent) -> RPCValue {
        guard case .object(let members) = object(for: event) else { return object(for: event) }
        return .object(members.filter { !serveKeys.contains($0.key) })
    }

    /// The `error` object of an event or summary line: `code`, `message`, and `url` and
    /// `httpStatus` when known.
    public static func error(_ error: DownloadError) -> RPCValue {
        .object(errorFields(error))
    }

    /// The object for an event.
    public static func object(for event: DownloadEvent) -> RPCValue {
        switch event {
        case .taskAdded(let info): return task("task_added", info)
        case .taskStateChanged(let info, let previous):
            var object = taskFields("task_state", info)
            object["previousState"] = .string(previous.description)
            return .object(object)
        case .taskProgress(let info): return task("task_progress", info)
        case .taskRemoved(let id): return ["type": "task_removed", "id": .string(id.description)]
        case .taskError(let id, let error, let willRetry):
            var object = errorFields(error)
            object["type"] = "task_error"
            object["id"] = .string(id.description)
            object["willRetry"] = .bool(willRetry)
            return .object(object)
        case .groupUpdated(let group): return self.group(group)
        case .groupRemoved(let key): return ["type": "group_removed", "key": .string(key)]
        case .notice(let notice):
            var object: [String: RPCValue] = ["type": "notice", "kind": .string(notice.kind.rawValue), "message": .string(notice.message)]
            if let id = notice.taskID { object["id"] = .string(id.description) }
            return .object(object)
        case .taskMerge(let info, let status):
            var object = taskFields("task_merge", info)
            object["merge"] = merge(status)
            return .object(object)
        }
    }

    /// The object for an event of a fleet's worker: a task's object names `worker` (`host:pid`),
    /// the worker whose manager runs it.
    public static func object(for event: DownloadEvent, worker: String?) -> RPCValue {
        let object = object(for: event)
        guard let worker, case .object(var members) = object else { return object }
        switch event {
        case .taskAdded, .taskStateChanged, .taskProgress, .taskMerge: members["worker"] = .string(worker)
        default: break
        }
        return .object(members)
    }

    /// A merge step's object: `status` (`started`, `merged`, `failed`, `interrupted` or
    /// `skipped`), the merged file's `path` (planned or made) and `size`, the `inputs` merged,
    /// and a `message` when it did not happen.
    public static func merge(_ status: MergeStatus) -> RPCValue {
        switch status {
        case .started(let plan):
            return ["status": "started", "path": .string(plan.output), "inputs": .array(plan.inputs.map { .string($0) })]
        case .merged(let result):
            return [
                "status": "merged", "path": .string(result.path), "size": .int(result.size),
                "inputs": .array(result.removedInputs.map { .string($0) }),
            ]
        case .failed(let error):
            return ["status": error == .cancelled ? "interrupted" : "failed", "message": .string(error.message)]
        case .skipped(let reason):
            return ["status": "skipped", "message": .string(reason)]
        }
    }

    /// A task's object (`type` as given), with its GID and plugin for the dashboard, and for a
    /// fleet's task the worker running it (`host:pid`).
    public static func task(_ type: String, _ info: DownloadTaskInfo, worker: String? = nil) -> RPCValue {
        var object = taskFields(type, info)
        if let worker { object["worker"] = .string(worker) }
        return .object(object)
    }

    /// The fleet's workers (`type` `workers`), each with `name` (`host:pid`), `host`, `pid`,
    /// `port`, `health` (`alive`, `late`, `dead`, `gone`), `heartbeatSecondsAgo` (by the
    /// database's clock), `tasks` held and `maxTasks`: the whole list each time.
    public static func workers(_ workers: [DaemonFleetWorker]) -> RPCValue {
        .object([
            "type": "workers",
            "workers": .array(workers.map { worker in
                var object: [String: RPCValue] = [
                    "name": .string(worker.name), "host": .string(UntrustedText.printable(worker.host, limit: 80)),
                    "pid": .int(Int64(worker.pid)), "health": .string(worker.health),
                    "heartbeatSecondsAgo": .double(worker.secondsSinceHeartbeat.isFinite ? max(0, worker.secondsSinceHeartbeat) : 0),
                    "tasks": .int(Int64(worker.tasks)), "maxTasks": .int(Int64(worker.maxTasks)),
                ]
                if let port = worker.port { object["port"] = .int(Int64(port)) }
                return .object(object)
            }),
        ])
    }

    /// A group's object (`type` `group`).
    public static func group(_ group: DownloadGroupInfo) -> RPCValue {
        var object: [String: RPCValue] = [
            "type": "group", "key": .string(group.key), "title": .string(group.title), "state": .string(group.state.rawValue),
            "bytesDone": .int(group.rollUp.bytesDone), "bytesPerSecond": .int(clamped(group.rollUp.bytesPerSecond)),
            "childCount": .int(Int64(group.childCount)), "gid": .string(Aria2GID.of(group: group.key)),
            "groupType": .string(group.groupType),
        ]
        if let total = group.rollUp.bytesTotal { object["bytesTotal"] = .int(total) }
        if let eta = group.rollUp.eta { object["etaSeconds"] = .int(eta.components.seconds) }
        return .object(object)
    }

    static func taskFields(_ type: String, _ info: DownloadTaskInfo) -> [String: RPCValue] {
        var object: [String: RPCValue] = [
            "type": .string(type), "id": .string(info.id.description), "title": .string(info.title),
            "state": .string(info.state.description), "mode": .string(info.mode.rawValue), "bytesDone": .int(info.bytesDone),
            "segmentsDone": .int(Int64(info.segmentsDone)), "segmentsTotal": .int(Int64(info.segmentsTotal)),
            "bytesPerSecond": .int(clamped(info.bytesPerSecond)),
            "gid": .string(Aria2GID.of(info.id)), "plugin": .string(info.id.entityType),
            "files": .array(info.outputs.map { .string($0.path) }),
        ]
        if let total = info.bytesTotal {
            object["bytesTotal"] = .int(total)
            if info.bytesTotalIsEstimate { object["bytesTotalIsEstimate"] = true }
        }
        if let eta = info.eta { object["etaSeconds"] = .int(eta.components.seconds) }
        if let group = info.groupKey {
            object["group"] = .string(group)
            object["groupGID"] = .string(Aria2GID.of(group: group))
        }
        if let error = info.error { object["error"] = .object(errorFields(error)) }
        if let live = info.live { object["live"] = self.live(live, recording: info.isRecording) }
        return object
    }

    /// A live recording's object: `recording` (whether it is recording now), `recordedSeconds`,
    /// `segmentsRecorded`, `segmentsBehindLiveEdge`, `gaps`, `gapSeconds`, and `ending` once it
    /// ended (`streamEnded`, `durationReached`, `stalled`, `stopped`).
    public static func live(_ live: LiveRecordingInfo, recording: Bool? = nil) -> RPCValue {
        var object: [String: RPCValue] = [
            "recording": .bool(recording ?? live.isRecording), "recordedSeconds": .double(live.recordedSeconds),
            "segmentsRecorded": .int(Int64(live.segmentsRecorded)), "segmentsBehindLiveEdge": .int(Int64(live.segmentsBehindLiveEdge)),
            "gaps": .int(Int64(live.gaps)), "gapSeconds": .double(live.gapSeconds),
        ]
        if let ending = live.ending { object["ending"] = .string(ending.rawValue) }
        return .object(object)
    }

    static func errorFields(_ error: DownloadError) -> [String: RPCValue] {
        var object: [String: RPCValue] = ["code": .string(error.code.description), "message": .string(error.message)]
        if let url = error.url { object["url"] = .string(url) }
        if let status = error.httpStatus { object["httpStatus"] = .int(Int64(status)) }
        return object
    }

    static func clamped(_ value: Double) -> Int64 {
        value.isFinite ? Int64(max(0, min(value, 9e18))) : 0
    }
}
