import Tessera

/// `/metrics`: Prometheus's text exposition format (version 0.0.4), written by swift-prometheus's
/// registry (``DaemonMetrics/registry``). Counters are counted as things happen (by the engine,
/// the cache and the daemon, through swift-metrics); the states (tasks by state, groups, speed,
/// transfers active and queued, the cache's size) are read now. The families are listed in
/// ``MetricsCatalogue``.
public enum MetricsText {
    /// The exposition for a daemon now.
    public static func render(daemon: TesseraDaemon) async -> String {
        let tasks = await daemon.manager.checkAll()
        let groups = await daemon.manager.checkAllGroups()
        return daemon.metrics.exposition(
            tasks: tasks, groups: groups.count, engine: daemon.manager.engine.statistics,
            cache: daemon.manager.cache.map { (entries: $0.entryCount, bytes: $0.totalBytes) })
    }
}
