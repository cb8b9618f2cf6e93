import Foundation
import Logging
import Synchronization

/// The identity provider's public keys, read from its JWKS and read again: on a schedule
/// (`JWKSRefreshService`), and when a token names a key id the set does not list (the provider may have
/// rotated a key in), at most once per `unknownKeyRefreshInterval` so that tokens with made-up key ids
/// cannot make the server hammer the provider. One reading at a time: callers that need one while it runs
/// wait for it. A reading that fails keeps the keys there were.
final class ProviderKeys: Sendable {
    let source: JWKSSource
    let unknownKeyRefreshInterval: Duration
    let fetchTimeout: Duration
    let logger: Logger
    /// Told the key ids that a reading removed or replaced (the verifier forgets the tokens they signed).
    private let keysDropped: @Sendable (Set<String>) -> Void
    private let state = Mutex(State())

    private struct State {
        var ring = JWKSKeyRing.empty
        var reading: Task<Void, Never>?
        var lastUnknownKeyReading: ContinuousClock.Instant?
        var readings = 0
    }

    init(
        source: JWKSSource, unknownKeyRefreshInterval: Duration, fetchTimeout: Duration, logger: Logger,
        keysDropped: @escaping @Sendable (Set<String>) -> Void
    ) {
        self.source = source
        self.unknownKeyRefreshInterval = unknownKeyRefreshInterval
        self.fetchTimeout = fetchTimeout
        self.logger = logger
        self.keysDropped = keysDropped
    }

    /// How many times the JWKS was read again, on schedule or for an unknown key (successful or not).
    var readings: Int { state.withLock { $0.readings } }

    /// The key `keyID` for `algorithm`; when the set does not list it, after reading the JWKS again if no
    /// reading for an unknown key was made within `unknownKeyRefreshInterval`.
    func key(_ keyID: String, _ algorithm: TokenAlgorithm) async -> ProviderKey? {
        if let key = state.withLock({ $0.ring.key(keyID, algorithm) }) { return key }
        let reading: Task<Void, Never>? = state.withLock { state in
            if let reading = state.reading { return reading }
            let now = ContinuousClock.now
            if let last = state.lastUnknownKeyReading, now - last < unknownKeyRefreshInterval { return nil }
            state.lastUnknownKeyReading = now
            return startReading(&state)
        }
        guard let reading else { return nil }
        await reading.value
        return state.withLock { $0.ring.key(keyID, algorithm) }
    }

    /// Reads the JWKS now and installs its keys.
    /// - Throws: `JWKSUnavailable`, or the HTTP client's error; the keys there were are kept.
    func load() async throws {
        let ring = try await JWKSKeyRing(jwks: try await source.load(timeout: fetchTimeout))
        let (dropped, count) = state.withLock { state in
            let dropped = state.ring.keyIDs(droppedIn: ring)
            let count = state.ring.keys.count
            state.ring = ring
            return (dropped, count)
        }
        if !dropped.isEmpty { keysDropped(dropped) }
        let level: Logger.Level = dropped.isEmpty && count == ring.keys.count ? .debug : .info
        logger.log(
            level: level, "identity provider keys read",
            metadata: ["sync.jwks.keys": "\(ring.keys.count)", "sync.jwks.skipped": "\(ring.skipped)"])
    }

    /// Reads the JWKS again (or waits for the reading under way); a failure is logged and the keys are kept.
    func refresh() async {
        let reading = state.withLock { state in state.reading ?? startReading(&state) }
        await reading.value
    }

    /// Starts a reading; the caller holds the lock.
    private func startReading(_ state: inout State) -> Task<Void, Never> {
        state.readings += 1
        let reading = Task {
            do {
                try await self.load()
            } catch {
                self.logger.warning(
                    "identity provider keys could not be read; keeping the keys read before",
                    metadata: ["error": "\(error)"])
            }
            self.state.withLock { $0.reading = nil }
        }
        state.reading = reading
        return reading
    }
}
