import Foundation
import SyncModels

/// Who is calling: the token's subject and the scopes it grants.
public struct TokenIdentity: Sendable, Hashable {
    public var subject: String
    public var scopes: Set<Scope>
    /// When the token stops being accepted (its `exp`, with the configured leeway); nil when unknown. A live
    /// stream opened with the token ends with `auth.expired` then.
    public var expiresAt: Date?

    public init(subject: String, scopes: Set<Scope>, expiresAt: Date? = nil) {
        self.subject = subject
        self.scopes = scopes
        self.expiresAt = expiresAt
    }
}
