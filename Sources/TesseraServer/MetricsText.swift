import Tessera

/// `/metrics`: Prometheus's text exposition format (version 0.0.4), written by hand (a few
/// families; no client library needed).
public enum MetricsText {
    /// The exposition for a daemon now.
    public static func render(daemon: TesseraDaemon) async -> String {
        let tasks = await daemon.manager.checkAll()
        let groups = await daemon.manager.checkAllGroups()
        let engine = daemon.manager.engine.statistics
        let counters = daemon.metrics.snapshot
        let cache = daemon.manager.cache
        return render(
            tasks: tasks, groups: groups, engine: engine, counters: counters,
            cache: cache.map { (entries: $0.entryCount, bytes: $0.totalBytes, hits: $0.lookupCounts.hits, misses: $0.lookupCounts.misses) })
    }

    /// The exposition for the given values (tested without a daemon).
    public static func render(
        tasks: [DownloadTaskInfo], groups: [DownloadGroupInfo], engine: CurlEngine.Statistics, counters: DaemonMetrics.Snapshot,
        cache: (entries: Int, bytes: Int64, hits: Int, misses: Int)?
    ) -> String {
        var text = ""
        func family(_ name: String, _ type: String, _ help: String, _ samples: [(labels: String, value: String)]) {
            text += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
            for sample in samples { text += name + (sample.labels.isEmpty ? "" : "{\(sample.labels)}") + " " + sample.value + "\n" }
        }
        family("tessera_downloaded_bytes_total", "counter", "Bytes the daemon's tasks have downloaded (outputs).", [("", String(counters.bytesDone))])
        family("tessera_engine_received_bytes_total", "counter", "Body bytes received by finished transfers.", [("", String(engine.bytesReceived))])
        family("tessera_transfers_total", "counter", "Transfers finished, in success or failure.", [("", String(engine.finishedTransfers))])
        family("tessera_transfers_active", "gauge", "Transfers handed to libcurl now.", [("", String(engine.activeTransfers))])
        family("tessera_transfers_queued", "gauge", "Transfers waiting for a slot.", [("", String(engine.queuedTransfers))])
        var byState: [DownloadTaskState.Kind: Int] = [:]
        for info in tasks { byState[info.state.kind, default: 0] += 1 }
        family(
            "tessera_tasks", "gauge", "Tasks by state.",
            DownloadTaskState.Kind.allCases.filter { $0 != .removed }.map { ("state=\"\($0.rawValue)\"", String(byState[$0] ?? 0)) })
        family("tessera_groups", "gauge", "Groups.", [("", String(groups.count))])
        let speed = tasks.reduce(0.0) { $0 + ($1.bytesPerSecond.isFinite ? max(0, $1.bytesPerSecond) : 0) }
        family("tessera_download_speed_bytes", "gauge", "Summed download speed of the tasks, bytes per second.", [("", String(Int64(min(speed, 9e18))))])
        family("tessera_tasks_added_total", "counter", "Tasks added over RPC.", [("", String(counters.added))])
        family("tessera_tasks_completed_total", "counter", "Tasks that completed while the daemon ran.", [("", String(counters.completed))])
        family(
            "tessera_task_failures_total", "counter", "Tasks that failed or became invalid, by error code.",
            counters.failures.sorted { $0.key < $1.key }.map { ("code=\"\(escape($0.key))\"", String($0.value)) })
        family(
            "tessera_errors_retried_total", "counter", "Errors retried, by error code.",
            counters.retried.sorted { $0.key < $1.key }.map { ("code=\"\(escape($0.key))\"", String($0.value)) })
        if let cache {
            family("tessera_cache_entries", "gauge", "Segments in the segment cache.", [("", String(cache.entries))])
            family("tessera_cache_bytes", "gauge", "Bytes in the segment cache.", [("", String(cache.bytes))])
            family("tessera_cache_hits_total", "counter", "Segments taken from the cache (verified).", [("", String(cache.hits))])
            family("tessera_cache_misses_total", "counter", "Cache lookups that found no usable entry.", [("", String(cache.misses))])
        }
        return text
    }

    static func escape(_ value: String) -> String {
        value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"").replacingOccurrences(of: "\n", with: "\\n")
    }
}
