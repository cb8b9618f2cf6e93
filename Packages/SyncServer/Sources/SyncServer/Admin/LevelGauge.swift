import Metrics
import Synchronization

/// A gauge of `/metrics` whose last value can be read back (for the admin API's status), which a swift-metrics
/// `Gauge` cannot.
final class LevelGauge: Sendable {
    private let gauge: Gauge
    private let level = Atomic<Int>(0)
    private let counting = Mutex(())

    init(label: String, dimensions: [(String, String)] = [], factory: any MetricsFactory) {
        gauge = Gauge(label: label, dimensions: dimensions, factory: factory)
    }

    func record(_ value: Int) {
        level.store(value, ordering: .relaxed)
        gauge.record(value)
    }

    /// Adds `delta` to the level and records it: for a count kept by the gauge itself (the connections a pool
    /// has leased). Under a lock, so that two changes at once are recorded in the order they were counted and
    /// the gauge never stays at the earlier one's value.
    func adjust(by delta: Int) {
        counting.withLock { _ in
            let value = level.add(delta, ordering: .relaxed).newValue
            gauge.record(value)
        }
    }

    /// The value last recorded.
    var value: Int { level.load(ordering: .relaxed) }
}
