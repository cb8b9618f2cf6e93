import Foundation
import Synchronization

/// Identities of tokens verified lately, until each token stops being accepted. Holds at most `capacity`
/// tokens; when full, it starts over (a burst of new tokens costs one verification each again, nothing
/// more).
///
/// Entries are keyed by the whole token, signature included: a token that differs in any byte is verified
/// afresh. An entry remembers the provider key that signed it, and `forget(keyIDs:)` drops the entries of
/// keys the provider no longer lists.
final class VerifiedTokens: Sendable {
    private struct Entry {
        var identity: TokenIdentity
        var expiresAt: Date
        var keyID: String?
    }

    private let entries = Mutex<[String: Entry]>([:])
    let capacity: Int

    init(capacity: Int = 65_536) {
        self.capacity = capacity
    }

    /// The identity `token` proved, when it did so lately and has not expired since.
    func identity(for token: String, at now: Date) -> TokenIdentity? {
        entries.withLock { entries in
            guard let entry = entries[token] else { return nil }
            guard entry.expiresAt > now else {
                entries[token] = nil
                return nil
            }
            return entry.identity
        }
    }

    /// Remembers that `token` proves `identity` until `expiresAt`; `keyID` is the provider key that signed
    /// it (nil for the shared secret).
    func store(_ token: String, _ identity: TokenIdentity, expiresAt: Date, keyID: String? = nil) {
        entries.withLock { entries in
            if entries.count >= capacity { entries.removeAll(keepingCapacity: true) }
            entries[token] = Entry(identity: identity, expiresAt: expiresAt, keyID: keyID)
        }
    }

    /// Drops the tokens signed by the provider keys `keyIDs` (keys the provider removed or replaced).
    func forget(keyIDs: Set<String>) {
        guard !keyIDs.isEmpty else { return }
        entries.withLock { entries in
            entries = entries.filter { _, entry in entry.keyID.map { !keyIDs.contains($0) } ?? true }
        }
    }
}
