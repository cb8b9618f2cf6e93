import ServiceLifecycle

/// The scheduled reading of the identity provider's JWKS, as a service of the server's `ServiceGroup`:
/// every `interval`, the keys are read again (`ProviderKeys.refresh`). A graceful shutdown stops it.
struct JWKSRefreshService: Service {
    let keys: ProviderKeys
    let interval: Duration

    func run() async throws {
        try? await cancelWhenGracefulShutdown { [keys, interval] in
            while true {
                try await Task.sleep(for: interval)
                await keys.refresh()
            }
        }
    }
}
