import Foundation
import Testing
@testable import Tessera
@testable import TesseraServer
@testable import TesseraEvents

@Suite struct Aria2MappingTests {
    @Test func gidsAreSixteenHexDigitsStableAndDistinct() {
        let a = DownloadTaskID(entityType: "direct", entityKey: "http://127.0.0.1/a")
        let b = DownloadTaskID(entityType: "direct", entityKey: "http://127.0.0.1/b")
        #expect(Aria2GID.isValid(Aria2GID.of(a)))
        #expect(Aria2GID.of(a) == Aria2GID.of(DownloadTaskID(entityType: "direct", entityKey: "http://127.0.0.1/a")))
        #expect(Aria2GID.of(a) != Aria2GID.of(b))
        #expect(Aria2GID.of(group: "x") != Aria2GID.of(DownloadTaskID(entityType: "x", entityKey: "")))
        // FNV-1a 64 of the empty string: the hash is the documented one, not whatever a Hasher seeds.
        #expect(Aria2GID.hash("") == "cbf29ce484222325")
        #expect(!Aria2GID.isValid("CBF29CE484222325"))
        #expect(!Aria2GID.isValid("cbf29ce48422232"))
    }

    @Test func statesMapOntoAriaStatuses() {
        let expected: [(DownloadTaskState, String)] = [
            (.idle, "paused"), (.waiting, "waiting"), (.resolving, "active"), (.downloading, "active"), (.paused, "paused"),
            (.interrupted(.network), "waiting"), (.completed, "complete"), (.failed, "error"), (.invalid, "error"),
            (.removed, "removed"),
        ]
        for (state, status) in expected { #expect(Aria2Mapping.status(of: state) == status, "\(state)") }
        #expect(Aria2Mapping.status(of: DownloadGroupInfo.State.downloading) == "active")
        #expect(Aria2Mapping.status(of: DownloadGroupInfo.State.failed) == "error")
    }

    @Test func errorsMapOntoAriaExitCodes() {
        #expect(Aria2Mapping.errorCode(for: DownloadError(.timeout, "t")) == 2)
        #expect(Aria2Mapping.errorCode(for: DownloadError(.dnsFailure, "d")) == 19)
        #expect(Aria2Mapping.errorCode(for: DownloadError(.checksumMismatch, "c")) == 32)
        #expect(Aria2Mapping.errorCode(for: DownloadError(.diskFull, "f")) == 9)
        var notFound = DownloadError(.httpStatus, "404")
        notFound.httpStatus = 404
        #expect(Aria2Mapping.errorCode(for: notFound) == 3)
        notFound.httpStatus = 403
        #expect(Aria2Mapping.errorCode(for: notFound) == 24)
        #expect(Aria2Mapping.errorCode(for: DownloadError(.manifestInvalid, "m")) == 1)
    }

    func info(state: DownloadTaskState, done: Int64, total: Int64?, outputs: [DownloadTaskInfo.OutputInfo]) -> DownloadTaskInfo {
        DownloadTaskInfo(
            id: DownloadTaskID(entityType: "dash", entityKey: "http://127.0.0.1/a.mpd"), title: "A", groupKey: "g", state: state,
            mode: .download, bytesDone: done, bytesTotal: total, segmentsDone: 0, segmentsTotal: 0, bytesPerSecond: 1234.7,
            eta: nil, outputs: outputs, error: nil, resolveCount: 1, weight: 0)
    }

    @Test func aGroupRecordingALiveStreamIsActive() {
        #expect(Aria2Mapping.status(of: DownloadGroupInfo.State.recording) == "active")
        var live = info(state: .downloading, done: 4096, total: nil, outputs: [])
        live.live = LiveRecordingInfo()
        let json = Aria2Mapping.status(of: live, dir: "/d", uris: [], connections: 1).json()
        #expect(json["status"] == "active" && json["totalLength"] == "0" && json["completedLength"] == "4096")
        let rollUp = DownloadTaskGroup(key: "g").rollUp(children: [live, info(state: .downloading, done: 1, total: 2, outputs: [])])
        #expect(rollUp.state == .recording && rollUp.bytesTotal == nil)
    }

    @Test func outputsAreFilesAndNumbersAreStrings() {
        let outputs = [
            DownloadTaskInfo.OutputInfo(name: "v.mp4", path: "/d/v.mp4", expectedSize: 100, isComplete: true),
            DownloadTaskInfo.OutputInfo(name: "a.m4a", path: "/d/a.m4a", expectedSize: 50, isComplete: false),
        ]
        let status = Aria2Mapping.status(of: info(state: .downloading, done: 130, total: 150, outputs: outputs), dir: "/d", uris: ["http://127.0.0.1/a.mpd"], connections: 2)
        let json = status.json()
        #expect(json["status"] == "active")
        #expect(json["totalLength"] == "150")
        #expect(json["completedLength"] == "130")
        #expect(json["downloadSpeed"] == "1234")
        #expect(json["connections"] == "2")
        #expect(json["belongsTo"] == .string(Aria2GID.of(group: "g")))
        let files = json["files"]?.arrayValue ?? []
        #expect(files.count == 2)
        #expect(files.first?["index"] == "1")
        #expect(files.first?["completedLength"] == "100")
        #expect(files.last?["completedLength"] == "30")
        #expect(files.last?["uris"]?.arrayValue?.first?["uri"] == "http://127.0.0.1/a.mpd")
        #expect(json["errorCode"] == nil)
        // keys: only those asked for, unknown ones ignored (as aria2).
        #expect(status.json(keys: ["gid", "status", "nonsense"]).objectValue?.keys.sorted() == ["gid", "status"])
    }

    @Test func aCompleteOutputOfUnknownSizeIsMeasuredOnDisk() {
        let outputs = [
            DownloadTaskInfo.OutputInfo(name: "v.mp4", path: "/d/v.mp4", expectedSize: nil, isComplete: true),
            DownloadTaskInfo.OutputInfo(name: "a.m4a", path: "/d/a.m4a", expectedSize: nil, isComplete: true),
        ]
        let files = Aria2Mapping.files(of: info(state: .completed, done: 30, total: 30, outputs: outputs), uris: []) { path in
            path.hasSuffix("mp4") ? 20 : 10
        }
        #expect(files.map(\.length) == [20, 10])
        #expect(files.map(\.completedLength) == [20, 10])
        #expect(Aria2Mapping.status(of: info(state: .completed, done: 30, total: 30, outputs: outputs), dir: "/d", uris: []).errorCode == 0)
    }

    @Test func windowsCountFromEitherEnd() {
        let list = Array(0..<5)
        #expect(Aria2RPC.window(list, offset: 0, count: 2) == [0, 1])
        #expect(Aria2RPC.window(list, offset: 3, count: 10) == [3, 4])
        #expect(Aria2RPC.window(list, offset: 7, count: 1) == [])
        #expect(Aria2RPC.window(list, offset: -1, count: 2) == [4, 3])
        #expect(Aria2RPC.window(list, offset: -9, count: 2) == [])
        #expect(Aria2RPC.window(list, offset: 0, count: Int.max) == list)
        #expect(Aria2RPC.window(list, offset: Int.min, count: Int.max) == [])
        #expect(Aria2RPC.window(list, offset: 0, count: -1) == [])
    }

    @Test func secretsCompareWholly() {
        #expect(ConstantTime.equal("secret", "secret"))
        #expect(!ConstantTime.equal("secret", "secreT"))
        #expect(!ConstantTime.equal("secret", "secret2"))
        #expect(!ConstantTime.equal("", "x"))
        #expect(ConstantTime.equal("", ""))
    }

    @Test func ariaSizesParseWithoutOverflow() {
        #expect(Aria2Size.parse("0") == 0)
        #expect(Aria2Size.parse("512K") == Int64(524_288))
        #expect(Aria2Size.parse("2M") == 2 << 20)
        #expect(Aria2Size.parse("99999999999999999G") == nil)
        #expect(Aria2Size.parse("-1") == nil)
        #expect(Aria2Size.parse("1.5M") == nil)
    }

    @Test func eventsBecomeNotifications() {
        let running = info(state: .downloading, done: 0, total: nil, outputs: [])
        let start = Aria2Notifications.notification(for: .taskStateChanged(running, previous: .waiting))
        #expect(start?["method"] == "aria2.onDownloadStart")
        #expect(start?["params"]?.arrayValue?.first?["gid"] == .string(Aria2GID.of(running.id)))
        // From resolving to downloading is no new start.
        #expect(Aria2Notifications.notification(for: .taskStateChanged(running, previous: .resolving)) == nil)
        let done = info(state: .completed, done: 1, total: 1, outputs: [])
        #expect(Aria2Notifications.notification(for: .taskStateChanged(done, previous: .downloading))?["method"] == "aria2.onDownloadComplete")
        let failed = info(state: .invalid, done: 1, total: 1, outputs: [])
        #expect(Aria2Notifications.notification(for: .taskStateChanged(failed, previous: .downloading))?["method"] == "aria2.onDownloadError")
        #expect(Aria2Notifications.notification(for: .taskRemoved(running.id))?["method"] == "aria2.onDownloadStop")
        #expect(Aria2Notifications.notification(for: .taskProgress(running)) == nil)
    }

    @Test func eventObjectsMatchTheJSONLinesOfGet() {
        let object = EventJSON.object(for: .taskStateChanged(info(state: .completed, done: 5, total: 5, outputs: []), previous: .downloading))
        #expect(object["type"] == "task_state")
        #expect(object["previousState"] == "downloading")
        #expect(object["state"] == "completed")
        #expect(object["bytesDone"] == 5)
        #expect(object["bytesPerSecond"] == 1234)
        #expect(object["plugin"] == "dash")
    }

    @Test func metricsAreInPrometheusTextFormat() {
        // Counters from the events, states from what is read at the scrape.
        let metrics = DaemonMetrics()
        var failed = info(state: .failed, done: 1, total: 5, outputs: [])
        failed.error = DownloadError(.httpStatus, "404")
        metrics.added(2)
        metrics.record(.taskProgress(info(state: .downloading, done: 3, total: 5, outputs: [])))
        metrics.record(.taskStateChanged(info(state: .completed, done: 5, total: 5, outputs: []), previous: .downloading))
        metrics.record(.taskStateChanged(failed, previous: .downloading))
        metrics.record(.taskError(failed.id, DownloadError(.httpStatus, "503"), willRetry: true))
        metrics.removedByRPC()
        let text = metrics.exposition(
            tasks: [info(state: .completed, done: 5, total: 5, outputs: []), failed], groups: 0,
            engine: CurlEngine.Statistics(activeTransfers: 1, queuedTransfers: 0, finishedTransfers: 7, bytesReceived: 99),
            cache: (entries: 3, bytes: 300))
        #expect(text.contains("# TYPE tessera_tasks gauge\n"))
        #expect(text.contains("tessera_tasks{state=\"completed\"} 1.0\n"))
        #expect(text.contains("tessera_tasks{state=\"failed\"} 1.0\n"))
        #expect(text.contains("tessera_transfers_active 1.0\n"))
        #expect(text.contains("tessera_transfers_total 0\n"), "the engine counts its own (none reported here)")
        #expect(text.contains("tessera_task_failures_total{code=\"httpStatus\"} 1\n"))
        #expect(text.contains("tessera_errors_retried_total{code=\"httpStatus\"} 1\n"))
        #expect(text.contains("tessera_cache_entries 3.0\n"))
        #expect(text.contains("tessera_downloaded_bytes_total 5\n"), "the most each task has done, counted once")
        #expect(text.contains("tessera_tasks_added_total 2\n"))
        #expect(text.contains("tessera_tasks_removed_total 1\n"))
        #expect(text.contains("tessera_tasks_completed_total 1\n"))
        #expect(!text.contains("tessera_cache_hits_total"), "counted by a cache, and there is none")
        // Every sample line is `name{labels} value` or `name value`.
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            #expect(line.wholeMatch(of: /[a-z_]+(\{[a-z]+="[^"]*"(,[a-z]+="[^"]*")*\})? -?[0-9]+(\.[0-9]+)?(e[+-]?[0-9]+)?/) != nil, "\(line)")
        }
        // A second scrape shows the same families (each registered once).
        #expect(metrics.exposition(tasks: [], groups: 0, engine: CurlEngine.Statistics(activeTransfers: 0, queuedTransfers: 0, finishedTransfers: 0, bytesReceived: 0), cache: nil)
            .split(separator: "\n").filter { $0.hasPrefix("# TYPE") }.count == text.split(separator: "\n").filter { $0.hasPrefix("# TYPE") }.count)
    }
}

extension Aria2MappingTests {
    @Test func theCommandLineObjectIsTheStreamsWithoutTheServeKeys() {
        let running = info(state: .downloading, done: 3, total: 9, outputs: [])
        let stream = EventJSON.object(for: .taskProgress(running)).objectValue ?? [:]
        let line = EventJSON.commandLineObject(for: .taskProgress(running)).objectValue ?? [:]
        #expect(Set(stream.keys).subtracting(line.keys) == ["gid", "plugin", "files", "groupGID"])
        #expect(line.keys.sorted() == [
            "bytesDone", "bytesPerSecond", "bytesTotal", "group", "id", "mode", "segmentsDone", "segmentsTotal", "state", "title", "type",
        ])
        #expect(line.allSatisfy { stream[$0.key] == $0.value })
        // What JSONSerialization gets (the command line writes with it).
        let foundation = EventJSON.commandLineObject(for: .taskProgress(running)).foundationObject as? [String: Any]
        #expect(foundation?["bytesDone"] as? Int64 == 3)
        #expect(foundation?["type"] as? String == "task_progress")
    }
}
