import Metrics
import Synchronization

/// A gauge of `/metrics` whose last value can be read back (for the admin API's status), which a swift-metrics
/// `Gauge` cannot.
final class LevelGauge: Sendable {
    private let gauge: Gauge
    private let level = Atomic<Int>(0)

    init(label: String, dimensions: [(String, String)] = [], factory: any MetricsFactory) {
        gauge = Gauge(label: label, dimensions: dimensions, factory: factory)
    }

    func record(_ value: Int) {
        level.store(value, ordering: .relaxed)
        gauge.record(value)
    }

    /// The value last recorded.
    var value: Int { level.load(ordering: .relaxed) }
}
