import Foundation

/// A token that verified: who it proves, until when the verifier accepts it, and the provider key that
/// signed it (nil for the shared secret), so that it stops being accepted from the cache once that key is
/// gone from the provider's key set.
struct AcceptedToken: Sendable {
    var identity: TokenIdentity
    /// `exp` plus the leeway.
    var acceptedUntil: Date
    var keyID: String? = nil
}
