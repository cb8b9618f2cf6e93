import Metrics
import SyncProtocol

/// The sync-specific metrics of `/metrics` (request counts and latencies by route and status come from
/// Hummingbird's `MetricsMiddleware`; pool and long-poll gauges from `Database` and `LongPollHub`).
struct ServerMetrics: Sendable {
    private let accepted = Counter(label: "sync_events_total", dimensions: [("status", "accepted")])
    private let duplicate = Counter(label: "sync_events_total", dimensions: [("status", "duplicate")])
    private let rejected = Counter(label: "sync_events_total", dimensions: [("status", "rejected")])
    private let batchSize = Recorder(label: "sync_push_batch_size", aggregate: true)
    private let pulled = Counter(label: "sync_events_pulled_total")
    private let requestRaw = Counter(
        label: "sync_body_bytes_total", dimensions: [("direction", "in"), ("form", "raw")])
    private let requestWire = Counter(
        label: "sync_body_bytes_total", dimensions: [("direction", "in"), ("form", "wire")])
    private let responseRaw = Counter(
        label: "sync_body_bytes_total", dimensions: [("direction", "out"), ("form", "raw")])
    private let responseWire = Counter(
        label: "sync_body_bytes_total", dimensions: [("direction", "out"), ("form", "wire")])

    func recordPush(_ results: [PushResult]) {
        batchSize.record(results.count)
        var counts = (0, 0, 0)
        for result in results {
            switch result.status {
            case .accepted: counts.0 += 1
            case .duplicate: counts.1 += 1
            case .rejected: counts.2 += 1
            }
        }
        if counts.0 > 0 { accepted.increment(by: counts.0) }
        if counts.1 > 0 { duplicate.increment(by: counts.1) }
        if counts.2 > 0 { rejected.increment(by: counts.2) }
    }

    func recordPulled(_ count: Int) {
        if count > 0 { pulled.increment(by: count) }
    }

    /// A request body: bytes as received and after decompression.
    func recordRequestBody(wire: Int, raw: Int) {
        requestWire.increment(by: wire)
        requestRaw.increment(by: raw)
    }

    /// A response body: bytes before and after compression.
    func recordResponseBody(raw: Int, wire: Int) {
        responseRaw.increment(by: raw)
        responseWire.increment(by: wire)
    }
}
