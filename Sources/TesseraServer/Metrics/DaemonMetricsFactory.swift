import CoreMetrics
import Prometheus
import Tessera

/// A swift-metrics factory over the daemon's Prometheus registry: what the engine, the cache, the
/// daemon and Hummingbird's `MetricsMiddleware` report through it is exported on `/metrics`.
///
/// Unlike swift-prometheus's own `PrometheusMetricsFactory`, which registers every family with an
/// empty help text, it gives each family of ``MetricsCatalogue`` its help. And since the registry
/// stops the process (`fatalError`) when one name is registered with another kind, another help
/// text, or both with and without labels, the first registration of a name fixes its kind and
/// label names (the catalogue's, for the families it lists): a later request with another kind
/// or other label names gets an instrument that records nothing, and dimensions given in another
/// order are put in the fixed one.
public struct DaemonMetricsFactory: MetricsFactory {
    /// The registry every instrument is made in.
    public let registry: PrometheusCollectorRegistry
    /// The buckets of every timer's histogram.
    let durationBuckets: [Duration] = [
        .milliseconds(1), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
        .milliseconds(250), .milliseconds(500), .seconds(1), .milliseconds(2500), .seconds(5), .seconds(10), .seconds(30), .seconds(60),
    ]
    /// The buckets of every aggregating recorder's histogram.
    let valueBuckets: [Double] = [5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000]

    struct Shape: Equatable {
        var kind: MetricFamily.Kind
        var dimensions: [String]
        /// Whether values are histograms (an aggregating recorder); gauges otherwise.
        var histogram = false
    }

    private let shapes: Locked<[String: Shape]>

    /// A factory over `registry`.
    public init(registry: PrometheusCollectorRegistry) {
        self.registry = registry
        self.shapes = Locked(MetricsCatalogue.byName.mapValues { Shape(kind: $0.kind, dimensions: $0.dimensions) })
    }

    /// `dimensions` in the order the name's first registration fixed, or `nil` when the name is
    /// taken by another kind or other label names.
    func admit(_ label: String, _ kind: MetricFamily.Kind, histogram: Bool = false, _ dimensions: [(String, String)]) -> [(String, String)]? {
        shapes.withLock { shapes -> [(String, String)]? in
            let names = dimensions.map(\.0)
            guard let shape = shapes[label] else {
                guard Set(names).count == names.count else { return nil }
                shapes[label] = Shape(kind: kind, dimensions: names, histogram: histogram)
                return dimensions
            }
            guard shape.kind == kind, shape.histogram == histogram, shape.dimensions.count == names.count else { return nil }
            if shape.dimensions == names { return dimensions }
            var ordered: [(String, String)] = []
            for name in shape.dimensions {
                guard let value = dimensions.first(where: { $0.0 == name }) else { return nil }
                ordered.append(value)
            }
            return ordered
        }
    }

    /// The family's name with the catalogue's help text (none for a family it does not list).
    func descriptor(_ label: String) -> MetricNameDescriptor {
        MetricNameDescriptor(metricName: label, unitName: "", helpText: MetricsCatalogue.byName[label]?.help ?? "")
    }

    /// Makes a counter (or finds the registry's).
    public func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        guard let labels = admit(label, .counter, dimensions) else { return Discarded() }
        return registry.makeCounter(descriptor: descriptor(label), labels: labels)
    }

    /// Makes a floating-point counter (a registry counter).
    public func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler {
        guard let labels = admit(label, .counter, dimensions) else { return Discarded() }
        return registry.makeCounter(descriptor: descriptor(label), labels: labels)
    }

    /// Makes a gauge, or for an aggregating recorder a histogram of values.
    public func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        guard let labels = admit(label, .gauge, histogram: aggregate, dimensions) else { return Discarded() }
        guard aggregate else { return registry.makeGauge(descriptor: descriptor(label), labels: labels) }
        return registry.makeValueHistogram(descriptor: descriptor(label), labels: labels, buckets: valueBuckets)
    }

    /// Makes a meter (a registry gauge).
    public func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler {
        guard let labels = admit(label, .gauge, dimensions) else { return Discarded() }
        return registry.makeGauge(descriptor: descriptor(label), labels: labels)
    }

    /// Makes a timer (a histogram of durations).
    public func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        guard let labels = admit(label, .timer, dimensions) else { return Discarded() }
        return registry.makeDurationHistogram(descriptor: descriptor(label), labels: labels, buckets: durationBuckets)
    }

    /// Takes the counter out of the registry.
    public func destroyCounter(_ handler: any CounterHandler) {
        if let counter = handler as? Prometheus.Counter { registry.unregisterCounter(counter) }
    }

    /// Takes the counter out of the registry.
    public func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) {
        if let counter = handler as? Prometheus.Counter { registry.unregisterCounter(counter) }
    }

    /// Takes the gauge or histogram out of the registry.
    public func destroyRecorder(_ handler: any RecorderHandler) {
        if let gauge = handler as? Prometheus.Gauge { registry.unregisterGauge(gauge) }
        if let histogram = handler as? ValueHistogram { registry.unregisterValueHistogram(histogram) }
    }

    /// Takes the gauge out of the registry.
    public func destroyMeter(_ handler: any MeterHandler) {
        if let gauge = handler as? Prometheus.Gauge { registry.unregisterGauge(gauge) }
    }

    /// Takes the histogram out of the registry.
    public func destroyTimer(_ handler: any TimerHandler) {
        if let histogram = handler as? DurationHistogram { registry.unregisterDurationHistogram(histogram) }
    }

    /// What a refused request gets: it records nothing.
    final class Discarded: CounterHandler, FloatingPointCounterHandler, RecorderHandler, MeterHandler, TimerHandler {
        func increment(by: Int64) {}
        func increment(by: Double) {}
        func reset() {}
        func record(_ value: Int64) {}
        func record(_ value: Double) {}
        func set(_ value: Int64) {}
        func set(_ value: Double) {}
        func decrement(by: Double) {}
        func recordNanoseconds(_ duration: Int64) {}
    }
}
