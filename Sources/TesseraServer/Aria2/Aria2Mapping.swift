import Foundation
import Tessera

/// How Tessera's tasks and groups are shown in aria2's model (`aria2.tellStatus` and friends):
/// pure functions of snapshots, so the mapping is tested without a server. README.md ("tessera
/// serve") has the table.
public enum Aria2Mapping {
    /// aria2's status of a task in `state`: `active`, `waiting`, `paused`, `error`, `complete`
    /// or `removed`.
    ///
    /// Tessera has states aria2 has not: `resolving` is `active` (the task holds a slot);
    /// `interrupted` (no network, low disk: it resumes by itself) is `waiting`; `idle` (added
    /// with `pause=true`, not queued) is `paused`; `failed` and `invalid` are both `error`.
    public static func status(of state: DownloadTaskState) -> String {
        switch state.kind {
        case .idle, .paused: "paused"
        case .waiting, .interrupted: "waiting"
        case .resolving, .downloading: "active"
        case .completed: "complete"
        case .failed, .invalid: "error"
        case .removed: "removed"
        }
    }

    /// aria2's status of a group, from its roll-up.
    public static func status(of state: DownloadGroupInfo.State) -> String {
        switch state {
        case .waiting, .interrupted: "waiting"
        case .downloading, .recording: "active"
        case .paused: "paused"
        case .completed: "complete"
        case .failed: "error"
        }
    }

    /// aria2's exit code (its `errorCode`) for a Tessera error: the closest of aria2's list
    /// (`man aria2c`, "EXIT STATUS"); 1, "unknown error", when none is close.
    public static func errorCode(for error: DownloadError) -> Int {
        switch error.code {
        case .timeout: return 2
        case .dnsFailure: return 19
        case .connectionRefused, .networkUnreachable, .connectionLost, .tlsFailure: return 6
        case .tooManyRedirects: return 23
        case .rangeNotSupported: return 8
        case .diskFull: return 9
        case .writeFailed: return 17
        case .checksumMismatch: return 32
        case .httpStatus:
            switch error.httpStatus ?? 0 {
            case 404, 410: return 3
            case 401, 403: return 24
            case 429, 503: return 29
            default: return 22
            }
        default: return 1
        }
    }

    /// What aria2 says of one download, before `keys` filtering: every value a string (as aria2
    /// sends numbers), `files` and `uris` arrays of objects.
    public struct Status: Sendable, Equatable {
        /// The GID.
        public var gid: String
        /// active, waiting, paused, error, complete or removed.
        public var status: String
        /// Bytes in all (0 while unknown, as aria2 before the first response).
        public var totalLength: Int64
        /// Bytes done.
        public var completedLength: Int64
        /// Bytes per second.
        public var downloadSpeed: Int64
        /// Transfers of the task now (an estimate: Tessera counts transfers per engine).
        public var connections: Int
        /// The download directory (absolute).
        public var dir: String
        /// The files.
        public var files: [File]
        /// aria2's exit code, for `error` (and `0` for `complete`).
        public var errorCode: Int?
        /// The error's message.
        public var errorMessage: String?
        /// The GIDs this download produced (a group's tasks).
        public var followedBy: [String] = []
        /// The group's GID, for a task in a group.
        public var belongsTo: String?
        /// Tessera's own identity of the download (not an aria2 key).
        public var tesseraID: String
        /// The plugin (not an aria2 key).
        public var plugin: String
        /// The title (not an aria2 key).
        public var title: String
        /// The fleet's worker running it (`host:pid`; not an aria2 key), for a task of a fleet.
        public var worker: String? = nil

        /// One file.
        public struct File: Sendable, Equatable {
            /// Absolute path; empty while the manifest is not known yet.
            public var path: String
            /// Bytes in all (0 while unknown).
            public var length: Int64
            /// Bytes done.
            public var completedLength: Int64
            /// The URIs (the input, or a mirror), each `used` or `waiting`.
            public var uris: [String]
        }

        /// The object aria2 sends, limited to `keys` when some are given (aria2's behaviour:
        /// unknown keys are left out silently).
        public func json(keys: [String]? = nil) -> RPCValue {
            var object: [String: RPCValue] = [
                "gid": .string(gid),
                "status": .string(status),
                "totalLength": .string(String(totalLength)),
                "completedLength": .string(String(completedLength)),
                "uploadLength": "0",
                "downloadSpeed": .string(String(downloadSpeed)),
                "uploadSpeed": "0",
                "connections": .string(String(connections)),
                "numPieces": .string(String(max(1, files.count))),
                "pieceLength": .string(String(max(totalLength, 1))),
                "bitfield": "",
                "dir": .string(dir),
                "files": .array(files.enumerated().map { index, file in file.json(index: index + 1) }),
                "tessera": .object(
                    ["id": .string(tesseraID), "plugin": .string(plugin), "title": .string(title)].merging(
                        worker.map { ["worker": .string($0)] } ?? [:], uniquingKeysWith: { $1 })),
            ]
            if let errorCode {
                object["errorCode"] = .string(String(errorCode))
                object["errorMessage"] = .string(errorMessage ?? "")
            }
            if !followedBy.isEmpty { object["followedBy"] = .array(followedBy.map(RPCValue.string)) }
            if let belongsTo {
                object["belongsTo"] = .string(belongsTo)
                object["following"] = .string(belongsTo)
            }
            if let keys, !keys.isEmpty {
                let wanted = Set(keys)
                object = object.filter { wanted.contains($0.key) }
            }
            return .object(object)
        }
    }

    /// The status of a task. `uris`: what it was added from, when known; `dir`: where its
    /// outputs go (absolute).
    /// `sizeOnDisk` gives a complete output's size when the manifest did not (DASH, HLS, a
    /// plain URL without a length).
    public static func status(
        of info: DownloadTaskInfo, dir: String, uris: [String], connections: Int = 0, sizeOnDisk: (String) -> Int64? = { _ in nil }
    ) -> Status {
        Status(
            gid: Aria2GID.of(info.id), status: status(of: info.state), totalLength: max(0, info.bytesTotal ?? 0),
            completedLength: max(0, info.bytesDone),
            downloadSpeed: info.bytesPerSecond.isFinite ? Int64(max(0, min(info.bytesPerSecond, 1e15))) : 0,
            connections: info.state.isRunning ? connections : 0, dir: dir, files: files(of: info, uris: uris, sizeOnDisk: sizeOnDisk),
            errorCode: errorCode(of: info), errorMessage: info.state == .completed ? nil : info.error.map { UntrustedText.printable($0.message, limit: 500) },
            belongsTo: info.groupKey.map { Aria2GID.of(group: $0) }, tesseraID: info.id.description, plugin: info.id.entityType,
            title: info.title)
    }

    /// `errorCode`: aria2 sends it for every stopped download (`0` when complete).
    static func errorCode(of info: DownloadTaskInfo) -> Int? {
        switch info.state.kind {
        case .completed: 0
        case .failed, .invalid: info.error.map(errorCode(for:)) ?? 1
        case .removed: 31  // aria2's "reserved" code for a removed download.
        default: nil
        }
    }

    /// A task's outputs as aria2's `files` (one file with the input's URI while the manifest is
    /// not known). Tessera tells bytes done per task, not per output: a complete output counts
    /// its size, and what remains of the task's bytes is given to the first incomplete one.
    public static func files(of info: DownloadTaskInfo, uris: [String], sizeOnDisk: (String) -> Int64? = { _ in nil }) -> [Status.File] {
        guard !info.outputs.isEmpty else {
            return [Status.File(path: "", length: max(0, info.bytesTotal ?? 0), completedLength: max(0, info.bytesDone), uris: uris)]
        }
        var remaining = max(0, info.bytesDone)
        var files: [Status.File] = []
        func size(_ output: DownloadTaskInfo.OutputInfo) -> Int64 {
            if let size = output.expectedSize { return max(0, size) }
            if info.outputs.count == 1, let total = info.bytesTotal, !info.bytesTotalIsEstimate { return max(0, total) }
            return output.isComplete ? max(0, sizeOnDisk(output.path) ?? 0) : 0
        }
        for output in info.outputs where output.isComplete {
            remaining = max(0, remaining - size(output))
        }
        for output in info.outputs {
            let length = size(output)
            var done: Int64
            if output.isComplete {
                done = length
            } else {
                done = length > 0 ? min(length, remaining) : remaining
                remaining -= done
            }
            files.append(Status.File(path: output.path, length: length, completedLength: done, uris: uris))
        }
        return files
    }

    /// The status of a group: its roll-up, its children's files, and their GIDs as `followedBy`.
    public static func status(of group: DownloadGroupInfo, dir: String, sizeOnDisk: (String) -> Int64? = { _ in nil }) -> Status {
        let children = group.children
        return Status(
            gid: Aria2GID.of(group: group.key), status: status(of: group.state), totalLength: max(0, group.rollUp.bytesTotal ?? 0),
            completedLength: max(0, group.rollUp.bytesDone),
            downloadSpeed: group.rollUp.bytesPerSecond.isFinite ? Int64(max(0, min(group.rollUp.bytesPerSecond, 1e15))) : 0,
            connections: 0, dir: dir,
            files: children.flatMap { files(of: $0, uris: [], sizeOnDisk: sizeOnDisk) },
            errorCode: group.state == .completed ? 0 : group.state == .failed ? (children.compactMap(errorCode(of:)).first { $0 != 0 } ?? 1) : nil,
            errorMessage: group.state == .failed ? children.compactMap(\.error).first.map { UntrustedText.printable($0.message, limit: 500) } : nil,
            followedBy: children.map { Aria2GID.of($0.id) }, tesseraID: "group:" + group.key, plugin: group.groupType, title: group.title)
    }

    /// `files[].json`: aria2's file object.
    static let fileKeys = ["index", "path", "length", "completedLength", "selected", "uris"]
}

extension Aria2Mapping.Status.File {
    /// aria2's file object; `index` counts from 1.
    func json(index: Int) -> RPCValue {
        [
            "index": .string(String(index)), "path": .string(path), "length": .string(String(length)),
            "completedLength": .string(String(completedLength)), "selected": "true",
            "uris": .array(uris.enumerated().map { offset, uri in ["uri": .string(uri), "status": offset == 0 ? "used" : "waiting"] }),
        ]
    }
}
