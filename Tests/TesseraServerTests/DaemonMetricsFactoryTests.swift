import CoreMetrics
import Prometheus
import Testing
@testable import TesseraServer

/// The factory over the daemon's registry: swift-prometheus stops the process (`fatalError`) when
/// a name comes back with another kind, another help text, or with and without labels; the factory
/// keeps each name's first shape and hands anything else an instrument that records nothing.
@Suite struct DaemonMetricsFactoryTests {
    @Test func aCataloguedFamilyGetsItsHelpAndItsFixedLabels() {
        let registry = PrometheusCollectorRegistry()
        let factory = DaemonMetricsFactory(registry: registry)
        CoreMetrics.Counter(label: "tessera_task_failures_total", dimensions: [("code", "timeout")], factory: factory).increment()
        let text = registry.emitToString()
        #expect(text.contains("# HELP tessera_task_failures_total Tasks that failed or became invalid, by error code.\n"))
        #expect(text.contains("tessera_task_failures_total{code=\"timeout\"} 1\n"))
        // The same family without its label, with another, or as another kind: dropped.
        CoreMetrics.Counter(label: "tessera_task_failures_total", factory: factory).increment()
        CoreMetrics.Counter(label: "tessera_task_failures_total", dimensions: [("reason", "x")], factory: factory).increment()
        CoreMetrics.Gauge(label: "tessera_task_failures_total", dimensions: [("code", "timeout")], factory: factory).record(5)
        CoreMetrics.Timer(label: "tessera_groups", factory: factory).recordNanoseconds(1)
        let after = registry.emitToString()
        #expect(after.contains("tessera_task_failures_total{code=\"timeout\"} 1\n"))
        #expect(after.split(separator: "\n").filter { $0.hasPrefix("tessera_task_failures_total") }.count == 1)
        #expect(!after.contains("tessera_groups"))
    }

    @Test func anUnknownNameIsFixedByItsFirstRegistration() {
        let registry = PrometheusCollectorRegistry()
        let factory = DaemonMetricsFactory(registry: registry)
        CoreMetrics.Counter(label: "other_total", dimensions: [("a", "1"), ("b", "2")], factory: factory).increment()
        // The same labels in another order are the same series; without labels, or as a gauge: dropped.
        CoreMetrics.Counter(label: "other_total", dimensions: [("b", "2"), ("a", "1")], factory: factory).increment()
        CoreMetrics.Counter(label: "other_total", factory: factory).increment()
        CoreMetrics.Gauge(label: "other_total", factory: factory).record(3)
        CoreMetrics.Meter(label: "other_total", factory: factory).set(3)
        let text = registry.emitToString()
        #expect(text.contains("# TYPE other_total counter\n"))
        #expect(text.contains("other_total{a=\"1\",b=\"2\"} 2\n"))
        #expect(!text.contains("# HELP other_total"), "no help text for a name the catalogue does not list")
    }

    @Test func everyCatalogueNameIsListedOnce() {
        let names = MetricsCatalogue.families.map(\.name)
        #expect(Set(names).count == names.count)
        #expect(MetricsCatalogue.families.allSatisfy { !$0.help.isEmpty })
    }
}
