/// The pure bookkeeping of per-key concurrency caps: how many requests each key has in flight.
///
/// Invariant: a key's count is between 0 and `limit`; keys at 0 are dropped, so the ledger only holds
/// keys with requests in flight.
struct ConcurrencyLedger: Sendable {
    let limit: Int
    private(set) var counts: [String: Int] = [:]

    init(limit: Int) {
        self.limit = limit
    }

    /// Takes a slot for `key`; false when the key already has `limit` requests in flight.
    mutating func acquire(_ key: String) -> Bool {
        let count = counts[key, default: 0]
        guard count < limit else { return false }
        counts[key] = count + 1
        return true
    }

    /// Gives back a slot taken by `acquire`.
    mutating func release(_ key: String) {
        guard let count = counts[key] else { return }
        counts[key] = count > 1 ? count - 1 : nil
    }
}
