import CoreMetrics

/// One metric family: its name (the label given to the swift-metrics factory, and the name a
/// Prometheus scrape shows), its kind, what it counts, and the names of its dimensions, which
/// never change (a backend such as swift-prometheus refuses a family registered with other label
/// names or another help text).
package struct MetricFamily: Sendable, Hashable {
    /// What kind of instrument reports it.
    package enum Kind: String, Sendable, Hashable {
        /// Only goes up (a swift-metrics `Counter`).
        case counter
        /// A value at a moment (a swift-metrics `Gauge` or `Meter`).
        case gauge
        /// Durations (a swift-metrics `Timer`; a histogram in Prometheus).
        case timer
    }

    /// The label given to the factory.
    package var name: String
    /// The kind of instrument.
    package var kind: Kind
    /// One sentence on what it counts (Prometheus's `# HELP`).
    package var help: String
    /// The names of its dimensions, in the order they are given.
    package var dimensions: [String]

    package init(_ name: String, _ kind: Kind, _ help: String, dimensions: [String] = []) {
        self.name = name
        self.kind = kind
        self.help = help
        self.dimensions = dimensions
    }
}

/// The metrics the library reports through swift-metrics (module CoreMetrics): one home for their
/// names, kinds, help texts and dimensions. The engine (``CurlEngine/Configuration/metricsFactory``)
/// and the cache (``SegmentCache/init(directory:byteBudget:metricsFactory:)``) report through the
/// factory they are given, or `MetricsSystem.factory` when none is.
package enum TesseraMetrics {
    /// Body bytes of finished transfers (a transfer started over counts both attempts).
    package static let engineReceivedBytes = MetricFamily(
        "tessera_engine_received_bytes_total", .counter, "Body bytes received by finished transfers.")
    /// Transfers finished, whatever the outcome.
    package static let transfers = MetricFamily(
        "tessera_transfers_total", .counter, "Transfers finished, in success or failure.")
    /// Transfers finished, by how they ended (``TransferOutcome``).
    package static let transferOutcomes = MetricFamily(
        "tessera_transfer_outcomes_total", .counter,
        "Transfers finished, by outcome: completed, failed (a connection, a timeout, an HTTP error status, the disk), cancelled.",
        dimensions: ["outcome"])
    /// How long finished transfers took.
    package static let transferDuration = MetricFamily(
        "tessera_transfer_duration_seconds", .timer, "How long finished transfers took, from their start in libcurl to their end.")
    /// Verified cache hits.
    package static let cacheHits = MetricFamily(
        "tessera_cache_hits_total", .counter, "Segments taken from the cache (verified).")
    /// Cache lookups that found nothing usable.
    package static let cacheMisses = MetricFamily(
        "tessera_cache_misses_total", .counter, "Cache lookups that found no usable entry.")

    /// Every family the library reports.
    package static let families: [MetricFamily] = [
        engineReceivedBytes, transfers, transferOutcomes, transferDuration, cacheHits, cacheMisses,
    ]

    /// How a finished transfer ended, the dimension of ``transferOutcomes``.
    package enum TransferOutcome: String, CaseIterable, Sendable {
        /// The response arrived as asked.
        case completed
        /// An error ended it (a connection, a timeout, an HTTP error status, a refused response,
        /// the disk).
        case failed
        /// Its caller cancelled it.
        case cancelled
    }
}

/// The engine's instruments, made once per engine (never per transfer): what a finished
/// transfer costs is three calls on them.
package struct EngineMetrics: Sendable {
    let receivedBytes: Counter
    let transfers: Counter
    let completed: Counter
    let failed: Counter
    let cancelled: Counter
    let duration: Timer

    /// Makes (or, in a backend that keeps them by name, finds) the engine's instruments.
    package init(factory: any MetricsFactory) {
        receivedBytes = Counter(label: TesseraMetrics.engineReceivedBytes.name, factory: factory)
        transfers = Counter(label: TesseraMetrics.transfers.name, factory: factory)
        func outcome(_ outcome: TesseraMetrics.TransferOutcome) -> Counter {
            Counter(label: TesseraMetrics.transferOutcomes.name, dimensions: [("outcome", outcome.rawValue)], factory: factory)
        }
        completed = outcome(.completed)
        failed = outcome(.failed)
        cancelled = outcome(.cancelled)
        duration = Timer(label: TesseraMetrics.transferDuration.name, factory: factory)
    }

    /// Counts the bytes of a transfer that ended or starts over.
    func received(_ bytes: Int64) {
        if bytes > 0 { receivedBytes.increment(by: bytes) }
    }

    /// Counts a finished transfer, how it ended and how long it took.
    func finished(_ outcome: TesseraMetrics.TransferOutcome, nanoseconds: UInt64) {
        transfers.increment()
        switch outcome {
        case .completed: completed.increment()
        case .failed: failed.increment()
        case .cancelled: cancelled.increment()
        }
        duration.recordNanoseconds(Int64(clamping: nanoseconds))
    }
}

/// The segment cache's instruments, made once per cache.
package struct CacheMetrics: Sendable {
    let hits: Counter
    let misses: Counter

    /// Makes (or finds) the cache's instruments.
    package init(factory: any MetricsFactory) {
        hits = Counter(label: TesseraMetrics.cacheHits.name, factory: factory)
        misses = Counter(label: TesseraMetrics.cacheMisses.name, factory: factory)
    }
}
