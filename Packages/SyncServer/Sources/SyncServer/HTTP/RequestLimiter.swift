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
        guard acquire(subject) else {
            throw SyncProtocolError(.rateLimited, "too many concurrent requests for this token; retry shortly")
        }
        defer { release(subject) }
        return try await body()
    }

    /// Takes one of `subject`'s slots; false when none is free.
    func acquire(_ subject: String) -> Bool {
        ledger.withLock { $0.acquire(subject) }
    }

    /// Gives back a slot `acquire` took.
    func release(_ subject: String) {
        ledger.withLock { $0.release(subject) }
    }
}
