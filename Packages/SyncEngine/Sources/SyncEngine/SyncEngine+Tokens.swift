import SyncModels

/// Short-lived tokens (`Configuration.tokenProvider`): a new one when the server refuses the one the transport
/// has.
extension SyncEngine {
    /// Asks the provider for a token and gives it to the transport and the blob queue's transport; journals
    /// `token` (never the token). Returns false, journaling why, when there is no provider or it failed.
    func refreshToken(after failure: SyncFailure) async -> Bool {
        guard let provider = configuration.tokenProvider else { return false }
        let code = if case .authentication(let code, _) = failure { code } else { "\(failure)" }
        do {
            let token = try await provider()
            transport.setToken(token)
            blobs?.setToken(token)
            await journal.record("token", "a new token after \(code)")
            return true
        } catch {
            await journal.record("token", "the token provider failed after \(code): \(error)")
            return false
        }
    }

    /// With a provider, an authentication failure that a new token did not cure is retried with backoff,
    /// as a network failure is (the provider is asked again then); without one it pauses sync.
    func tokenFailureToRetry(_ failure: SyncFailure) -> SyncFailure {
        guard configuration.tokenProvider != nil, case .authentication = failure else { return failure }
        return .retryable(reason: "authentication, even with a new token: \(failure)", retryAfter: nil)
    }
}
