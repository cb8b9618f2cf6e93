import SyncProtocol
import Synchronization

/// Caps the requests one token subject may have in flight; past the cap a request gets 429
/// `rate.limited` at once instead of queueing, so one runaway client cannot take every connection.
final class RequestLimiter: Sendable {
    private let ledger: Mutex<ConcurrencyLedger>

    init(limit: Int) {
        self.ledger = Mutex(ConcurrencyLedger(limit: limit))
    }

    /// Runs `body` holding one of `subject`'s slots.
    /// - Throws: `SyncProtocolError` `rate.limited` when none is free, otherwise what `body` throws.
    func withSlot<Result>(for subject: String, _ body: () async throws -> Result) async throws -> Result {
        guard ledger.withLock({ $0.acquire(subject) }) else {
            throw SyncProtocolError(.rateLimited, "too many concurrent requests for this token; retry shortly")
        }
        defer { ledger.withLock { $0.release(subject) } }
        return try await body()
    }
}
