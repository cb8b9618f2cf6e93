import Foundation

/// The live progress line on standard error, once a second: devices online, events accepted per second,
/// write-to-visible p50/p99 over the last second, outbox depth, errors by code. On a terminal one line
/// updates in place; otherwise (a log, CI) plain lines.
final class Progress: Sendable {
    let metrics: LoadMetrics
    let devices: [Device]
    let thin: [ThinDevice]
    let start: ContinuousClock.Instant
    let terminal = isatty(2) == 1

    init(metrics: LoadMetrics, devices: [Device], thin: [ThinDevice], start: ContinuousClock.Instant) {
        self.metrics = metrics
        self.devices = devices
        self.thin = thin
        self.start = start
    }

    func run() async {
        var last = ContinuousClock.now
        while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(1))
            let now = ContinuousClock.now
            write(line(seconds: (now - last).secondsValue))
            last = now
        }
    }

    func finish() {
        if terminal { FileHandle.standardError.write(Data("\n".utf8)) }
    }

    private func write(_ text: String) {
        FileHandle.standardError.write(Data((terminal ? "\r\u{1B}[K" + text : text + "\n").utf8))
    }

    private func line(seconds: Double) -> String {
        let window = metrics.takeWindow()
        let opened = devices.filter { $0.engine != nil }
        let online = opened.filter { $0.transport.isOnline }.count + thin.filter { $0.transport.isOnline }.count
        let outbox =
            opened.reduce(0) { $0 + ($1.engine?.status.pending ?? 0) } + thin.reduce(0) { $0 + $1.pending }
        let w2v = LatencySummary(window.writeToVisible)
        let errors = window.errors.sorted { $0.value > $1.value }.prefix(3).map { "\($0.key) \($0.value)" }
        let elapsed = Int((ContinuousClock.now - start).secondsValue)
        return
            "[\(elapsed) s] online \(online)/\(devices.count + thin.count) · accepted \(Int(Double(window.accepted) / max(seconds, 0.001)))/s"
            + " · write-to-visible p50 \(w2v.p50) ms p99 \(w2v.p99) ms · outbox \(outbox)"
            + (errors.isEmpty ? "" : " · errors " + errors.joined(separator: ", "))
    }
}
