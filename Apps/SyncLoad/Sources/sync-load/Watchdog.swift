import Foundation

/// Stops a step that no longer moves: when for `timeout` seconds no request was answered, no event
/// accepted, applied or received and no edit made, while work is outstanding (an outbox not empty, a
/// replica stuck in a step of its driver), it says what every stuck device waits on and hands the
/// finding to the run, which writes the partial report and exits non-zero.
struct Watchdog: Sendable {
    struct Stall: Sendable {
        var seconds: Double
        /// How many stuck devices wait on what (their first clause).
        var summary: [String: Int]
        var devices: [Finding]
    }

    let metrics: LoadMetrics
    let devices: [Device]
    let thin: [ThinDevice]
    let timeout: Double

    /// Watches until cancelled (nil) or until it finds the step stalled.
    func run() async -> Stall? {
        guard timeout > 0 else { return nil }
        var last = metrics.progress
        var since = ContinuousClock.now
        while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(1))
            if Task.isCancelled { return nil }
            let progress = metrics.progress
            if progress != last {
                last = progress
                since = .now
                continue
            }
            let quiet = (ContinuousClock.now - since).secondsValue
            guard quiet >= timeout, let stall = diagnose(quiet: quiet) else { continue }
            say(
                "sync-load: STALLED: nothing answered, accepted, applied or edited for \(Int(quiet)) s with work outstanding; "
                    + "\(stall.devices.count) devices stuck:")
            for (what, count) in stall.summary.sorted(by: { $0.value > $1.value }) { say("  \(count) × \(what)") }
            for finding in stall.devices.prefix(20) { say("  \(finding)") }
            return stall
        }
        return nil
    }

    /// The first clause of a device's `waitingOn`, without its duration: what to count devices by.
    static func label(_ waiting: String) -> String {
        let first = waiting.split(separator: ";").first.map(String.init) ?? waiting
        guard let range = first.range(of: " for ", options: .backwards) else { return first }
        return String(first[..<range.lowerBound])
    }

    private func diagnose(quiet: Double) -> Stall? {
        var summary: [String: Int] = [:]
        var stuck: [Finding] = []
        for device in devices {
            let pending = device.engine?.status.pending ?? 0
            guard pending > 0 || device.busyFor >= timeout else { continue }
            let waiting = device.waitingOn
            summary[Self.label(waiting), default: 0] += 1
            stuck.append(Finding(device: device.plan.index, scope: device.plan.scope, detail: "replica: " + waiting))
        }
        for device in thin where device.pending > 0 {
            let waiting = device.waitingOn
            summary[Self.label(waiting), default: 0] += 1
            stuck.append(Finding(device: device.plan.index, scope: device.plan.scope, detail: "thin: " + waiting))
        }
        return stuck.isEmpty ? nil : Stall(seconds: quiet, summary: summary, devices: stuck)
    }
}

extension Verdict {
    /// The verdict of a step the watchdog stopped: failed, with what the stuck devices waited on.
    static func stalled(_ stall: Watchdog.Stall, serverEvents: Int) -> Verdict {
        Verdict(
            passed: false, settleSeconds: 0, serverEvents: serverEvents, deviceEvents: 0, rejected: 0,
            rejectedByCode: [:], lost: 0, duplicated: 0, diverged: 0, rejectedOnServer: 0,
            unsettled: stall.devices.count, gaps: 0, bootstrap: 0,
            findings: [
                "stalled": [
                    Finding(
                        scope: "*",
                        detail: "no progress for \(Int(stall.seconds)) s; "
                            + stall.summary.sorted { $0.value > $1.value }.map { "\($0.value) × \($0.key)" }
                            .joined(separator: ", "))
                ] + stall.devices.prefix(20)
            ])
    }
}
