import CoreMetrics
import Prometheus
import Tessera

/// The daemon's metrics: a Prometheus registry (what `/metrics` exports), the swift-metrics
/// ``factory`` over it, and the counters the daemon keeps from the manager's events.
///
/// The engine and the cache report their own families through a factory: `tessera serve`
/// bootstraps `MetricsSystem` with ``factory`` before it creates them (and Hummingbird's
/// `MetricsMiddleware` reports requests through the same global factory). An app that embeds the
/// daemon passes ``factory`` to `CurlEngine.Configuration.metricsFactory` and to its
/// `SegmentCache` instead, or bootstraps `MetricsSystem` with it.
public final class DaemonMetrics: Sendable {
    private struct Counts {
        var added = 0
        var removedByRPC = 0
        var completed = 0
        /// Tasks that ended failed or invalid, by the error's code.
        var failures: [String: Int] = [:]
        /// Errors that were retried, by code.
        var retried: [String: Int] = [:]
        /// Bytes done over every task, as the last progress told.
        var bytesByTask: [DownloadTaskID: Int64] = [:]
        /// Bytes of tasks that are gone (removed), so the total never goes down.
        var bytesOfGoneTasks: Int64 = 0
        /// The counters by code, made at a code's first count.
        var failureCounters: [String: CoreMetrics.Counter] = [:]
        var retriedCounters: [String: CoreMetrics.Counter] = [:]
    }

    /// The instruments, made once.
    private struct Instruments: Sendable {
        let downloadedBytes: CoreMetrics.Counter
        let added: CoreMetrics.Counter
        let removed: CoreMetrics.Counter
        let completed: CoreMetrics.Counter
        let transfersActive: CoreMetrics.Gauge
        let transfersQueued: CoreMetrics.Gauge
        let tasksByState: [DownloadTaskState.Kind: CoreMetrics.Gauge]
        let groups: CoreMetrics.Gauge
        let speed: CoreMetrics.Gauge

        init(factory: any MetricsFactory) {
            func counter(_ family: MetricFamily) -> CoreMetrics.Counter { CoreMetrics.Counter(label: family.name, factory: factory) }
            func gauge(_ family: MetricFamily) -> CoreMetrics.Gauge { CoreMetrics.Gauge(label: family.name, factory: factory) }
            downloadedBytes = counter(MetricsCatalogue.downloadedBytes)
            added = counter(MetricsCatalogue.tasksAdded)
            removed = counter(MetricsCatalogue.tasksRemoved)
            completed = counter(MetricsCatalogue.tasksCompleted)
            transfersActive = gauge(MetricsCatalogue.transfersActive)
            transfersQueued = gauge(MetricsCatalogue.transfersQueued)
            var byState: [DownloadTaskState.Kind: CoreMetrics.Gauge] = [:]
            for kind in DownloadTaskState.Kind.allCases where kind != .removed {
                byState[kind] = CoreMetrics.Gauge(label: MetricsCatalogue.tasks.name, dimensions: [("state", kind.rawValue)], factory: factory)
            }
            tasksByState = byState
            groups = gauge(MetricsCatalogue.groups)
            speed = gauge(MetricsCatalogue.downloadSpeed)
        }
    }

    /// What `/metrics` exports.
    public let registry: PrometheusCollectorRegistry
    /// The swift-metrics factory over ``registry``, with the catalogue's help texts.
    public let factory: DaemonMetricsFactory
    private let instruments: Instruments
    private let counts = Locked(Counts())
    /// The cache's gauges, made at the first scrape that has a cache (without one, they are not
    /// exported).
    private let cacheGauges = Locked<(entries: CoreMetrics.Gauge, bytes: CoreMetrics.Gauge)?>(nil)

    /// Creates the counters in a registry of their own (or `registry`), with every family the
    /// daemon and the engine export registered at zero.
    public init(registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()) {
        self.registry = registry
        self.factory = DaemonMetricsFactory(registry: registry)
        self.instruments = Instruments(factory: factory)
        // The engine's families are there from the first scrape, as they always were.
        _ = EngineMetrics(factory: factory)
    }

    func record(_ event: DownloadEvent) {
        counts.withLock { counts in
            switch event {
            case .taskAdded(let info), .taskProgress(let info):
                count(info, in: &counts)
            case .taskStateChanged(let info, _):
                count(info, in: &counts)
                if info.state == .completed {
                    counts.completed += 1
                    instruments.completed.increment()
                }
                if info.state == .failed || info.state == .invalid {
                    let code = info.error?.code.description ?? "unknown"
                    counts.failures[code, default: 0] += 1
                    counter(code, MetricsCatalogue.taskFailures, in: &counts.failureCounters).increment()
                }
            case .taskError(_, let error, let willRetry):
                if willRetry {
                    let code = error.code.description
                    counts.retried[code, default: 0] += 1
                    counter(code, MetricsCatalogue.errorsRetried, in: &counts.retriedCounters).increment()
                }
            case .taskRemoved(let id):
                let bytes = counts.bytesByTask.removeValue(forKey: id) ?? 0
                counts.bytesOfGoneTasks = counts.bytesOfGoneTasks.saturatingAdding(bytes)
            case .groupUpdated, .groupRemoved, .notice, .taskMerge:
                break
            }
        }
    }

    /// Takes a task's bytes done when they grew, and counts what they grew by.
    private func count(_ info: DownloadTaskInfo, in counts: inout Counts) {
        let before = counts.bytesByTask[info.id] ?? 0
        guard info.bytesDone > before else {
            if counts.bytesByTask[info.id] == nil { counts.bytesByTask[info.id] = before }
            return
        }
        counts.bytesByTask[info.id] = info.bytesDone
        instruments.downloadedBytes.increment(by: info.bytesDone - before)
    }

    private func counter(_ code: String, _ family: MetricFamily, in counters: inout [String: CoreMetrics.Counter]) -> CoreMetrics.Counter {
        if let counter = counters[code] { return counter }
        let counter = CoreMetrics.Counter(label: family.name, dimensions: [("code", code)], factory: factory)
        counters[code] = counter
        return counter
    }

    func added(_ count: Int) {
        counts.withLock { $0.added += count }
        instruments.added.increment(by: Int64(count))
    }

    func removedByRPC() {
        counts.withLock { $0.removedByRPC += 1 }
        instruments.removed.increment()
    }

    /// Sets the gauges of what stands now (tasks by state, groups, speed, the engine's transfers,
    /// the cache) and returns the registry's exposition, Prometheus's text format 0.0.4.
    public func exposition(
        tasks: [DownloadTaskInfo], groups: Int, engine: CurlEngine.Statistics, cache: (entries: Int, bytes: Int64)?
    ) -> String {
        var byState: [DownloadTaskState.Kind: Int] = [:]
        for info in tasks { byState[info.state.kind, default: 0] += 1 }
        for (kind, gauge) in instruments.tasksByState { gauge.record(byState[kind] ?? 0) }
        instruments.groups.record(groups)
        let speed = tasks.reduce(0.0) { $0 + ($1.bytesPerSecond.isFinite ? max(0, $1.bytesPerSecond) : 0) }
        instruments.speed.record(Int64(min(speed, 9e18)))
        instruments.transfersActive.record(engine.activeTransfers)
        instruments.transfersQueued.record(engine.queuedTransfers)
        if let cache {
            let gauges = cacheGauges.withLock { gauges in
                if gauges == nil {
                    gauges = (
                        CoreMetrics.Gauge(label: MetricsCatalogue.cacheEntries.name, factory: factory),
                        CoreMetrics.Gauge(label: MetricsCatalogue.cacheBytes.name, factory: factory)
                    )
                }
                return gauges!
            }
            gauges.entries.record(cache.entries)
            gauges.bytes.record(cache.bytes)
        }
        return registry.emitToString()
    }

    /// A copy of the counters.
    public struct Snapshot: Sendable {
        /// Tasks added over RPC.
        public var added: Int
        /// Tasks removed over RPC.
        public var removedByRPC: Int
        /// Tasks that completed while the daemon ran.
        public var completed: Int
        /// Tasks that failed, by error code.
        public var failures: [String: Int]
        /// Errors retried, by code.
        public var retried: [String: Int]
        /// Bytes the tasks have done (saturating).
        public var bytesDone: Int64
    }

    /// The counters now.
    public var snapshot: Snapshot {
        counts.withLock { counts in
            Snapshot(
                added: counts.added, removedByRPC: counts.removedByRPC, completed: counts.completed, failures: counts.failures,
                retried: counts.retried, bytesDone: counts.bytesByTask.values.reduce(counts.bytesOfGoneTasks) { $0.saturatingAdding($1) })
        }
    }
}
