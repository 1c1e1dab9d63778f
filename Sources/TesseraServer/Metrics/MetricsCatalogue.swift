import Tessera

/// Every metric family `/metrics` exports: one home for their names, kinds, help texts and label
/// names. Dashboards depend on them: a name, a kind or a label changed here is a change for every
/// user (`TesseraServerHTTPTests` scrapes `/metrics` and checks each one).
///
/// The library's own families (engine, cache) come from ``TesseraMetrics``; the daemon adds what
/// it counts from the manager's events and what it reads when `/metrics` is scraped; Hummingbird's
/// `MetricsMiddleware` reports the HTTP requests.
package enum MetricsCatalogue {
    // MARK: Counted from the manager's events (DaemonMetrics)

    /// Bytes the daemon's tasks have downloaded.
    package static let downloadedBytes = MetricFamily(
        "tessera_downloaded_bytes_total", .counter, "Bytes the daemon's tasks have downloaded (outputs).")
    /// Tasks added over RPC.
    package static let tasksAdded = MetricFamily("tessera_tasks_added_total", .counter, "Tasks added over RPC.")
    /// Tasks removed over RPC.
    package static let tasksRemoved = MetricFamily("tessera_tasks_removed_total", .counter, "Tasks removed over RPC.")
    /// Tasks completed.
    package static let tasksCompleted = MetricFamily(
        "tessera_tasks_completed_total", .counter, "Tasks that completed while the daemon ran.")
    /// Tasks that failed or became invalid, by error code.
    package static let taskFailures = MetricFamily(
        "tessera_task_failures_total", .counter, "Tasks that failed or became invalid, by error code.", dimensions: ["code"])
    /// Errors retried, by code.
    package static let errorsRetried = MetricFamily(
        "tessera_errors_retried_total", .counter, "Errors retried, by error code.", dimensions: ["code"])

    // MARK: States, set when /metrics is scraped

    /// Transfers in libcurl now.
    package static let transfersActive = MetricFamily("tessera_transfers_active", .gauge, "Transfers handed to libcurl now.")
    /// Transfers queued in the engine now.
    package static let transfersQueued = MetricFamily("tessera_transfers_queued", .gauge, "Transfers waiting for a slot.")
    /// Tasks by state (every state but `removed`).
    package static let tasks = MetricFamily("tessera_tasks", .gauge, "Tasks by state.", dimensions: ["state"])
    /// Groups now.
    package static let groups = MetricFamily("tessera_groups", .gauge, "Groups.")
    /// The summed speed of the tasks.
    package static let downloadSpeed = MetricFamily(
        "tessera_download_speed_bytes", .gauge, "Summed download speed of the tasks, bytes per second.")
    /// Entries in the segment cache (only with a cache).
    package static let cacheEntries = MetricFamily("tessera_cache_entries", .gauge, "Segments in the segment cache.")
    /// Bytes in the segment cache (only with a cache).
    package static let cacheBytes = MetricFamily("tessera_cache_bytes", .gauge, "Bytes in the segment cache.")

    // MARK: Hummingbird's MetricsMiddleware (swift-metrics labels; Prometheus writes `_` for `.`)

    /// Requests answered.
    package static let httpRequests = MetricFamily(
        "hb.requests", .counter, "HTTP requests answered, by route, method and status.",
        dimensions: ["http.route", "http.request.method", "http.response.status_code"])
    /// Requests that ended in an error.
    package static let httpRequestErrors = MetricFamily(
        "hb.request.errors", .counter, "HTTP requests that ended in an error, by route, method and status.",
        dimensions: ["http.route", "http.request.method", "error.type"])
    /// How long requests took.
    package static let httpRequestDuration = MetricFamily(
        "http.server.request.duration", .timer, "How long HTTP requests took, by route, method and status.",
        dimensions: ["http.route", "http.request.method", "http.response.status_code"])
    /// Requests being answered now.
    package static let httpActiveRequests = MetricFamily(
        "http.server.active_requests", .gauge, "HTTP requests being answered now, by method.", dimensions: ["http.request.method"])

    /// Every family, the library's first.
    package static let families: [MetricFamily] = TesseraMetrics.families + [
        downloadedBytes, tasksAdded, tasksRemoved, tasksCompleted, taskFailures, errorsRetried,
        transfersActive, transfersQueued, tasks, groups, downloadSpeed, cacheEntries, cacheBytes,
        httpRequests, httpRequestErrors, httpRequestDuration, httpActiveRequests,
    ]

    /// The families by name.
    package static let byName: [String: MetricFamily] = Dictionary(families.map { ($0.name, $0) }) { first, _ in first }
}
