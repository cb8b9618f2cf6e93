import CoreMetrics

/// What the engine counts through swift-metrics (`Configuration.metricsFactory`, or the global
/// `MetricsSystem` an app bootstraps; without one they cost nothing):
///
/// | metric | type | what |
/// |---|---|---|
/// | `sync_client_open_conflicts` | gauge | records holding concurrent values kept for review (`EngineStatus.openConflicts`) |
/// | `sync_client_conflicts_total{change="opened"\|"resolved"}` | counter | conflicts opened and resolved (journaled `conflict.open`, `conflict.resolved`) |
/// | `sync_client_verifications_total{outcome}` | counter | scopes verified against the server's checksums, by `ScopeVerification.Outcome` |
/// | `sync_client_repairs_total` | counter | ranges repaired and resets made by verification (`EngineStatus.repairs`) |
struct EngineMetrics: Sendable {
    let openConflicts: Gauge
    let conflictsOpened: Counter
    let conflictsResolved: Counter
    let verifications: [ScopeVerification.Outcome: Counter]
    let repairs: Counter

    init(factory: (any MetricsFactory)?) {
        let factory = factory ?? MetricsSystem.factory
        openConflicts = Gauge(label: "sync_client_open_conflicts", factory: factory)
        conflictsOpened = Counter(
            label: "sync_client_conflicts_total", dimensions: [("change", "opened")], factory: factory)
        conflictsResolved = Counter(
            label: "sync_client_conflicts_total", dimensions: [("change", "resolved")], factory: factory)
        let outcomes: [ScopeVerification.Outcome] = [.matched, .repaired, .reset, .mismatched, .unavailable]
        verifications = Dictionary(
            uniqueKeysWithValues: outcomes.map {
                (
                    $0,
                    Counter(
                        label: "sync_client_verifications_total", dimensions: [("outcome", $0.rawValue)],
                        factory: factory)
                )
            })
        repairs = Counter(label: "sync_client_repairs_total", factory: factory)
    }
}
