import SyncModels

/// `GET /v1/checksum?scope=…&through=…[&after=…]`: the checksum of one scope's events in `(after, through]`
/// (docs/PROTOCOL.md, "Checksums"), the sum of their `EventChecksum`s. Without `after`, the whole prefix up to
/// `through`, which a device compares with the sum it kept; with it, a range, which a device bisects with to
/// find where it differs.
public struct ChecksumRequest: Hashable, Sendable {
    public var scope: Scope
    public var after: Int64?
    public var through: Int64

    public init(scope: Scope, after: Int64? = nil, through: Int64) {
        self.scope = scope
        self.after = after
        self.through = through
    }

    /// The query string's items.
    public var queryItems: [(name: String, value: String)] {
        var items = [(name: "scope", value: scope.name), (name: "through", value: String(through))]
        if let after { items.append((name: "after", value: String(after))) }
        return items
    }

    /// Parses the query items of a request.
    /// - Throws: `SyncProtocolError` `request.invalid` naming the first missing or malformed parameter.
    public init(query: [(name: String, value: String)]) throws(SyncProtocolError) {
        var scope: Scope?
        var after: Int64?
        var through: Int64?
        for (name, value) in query {
            switch name {
            case "scope":
                guard let parsed = try? Scope(value) else { throw .invalid("scope is not a valid scope name") }
                scope = parsed
            case "after":
                guard let number = Int64(value), number >= 0 else {
                    throw .invalid("after must be a position (an integer, 0 or more)")
                }
                after = number
            case "through":
                guard let number = Int64(value), number >= 0 else {
                    throw .invalid("through must be a position (an integer, 0 or more)")
                }
                through = number
            default: continue
            }
        }
        guard let scope else { throw .invalid("scope is required") }
        guard let through else { throw .invalid("through is required") }
        if let after, after > through { throw .invalid("after must not be greater than through") }
        self.init(scope: scope, after: after, through: through)
    }
}

/// The answer to `GET /v1/checksum`.
public struct ChecksumResponse: Codable, Hashable, Sendable {
    public var scope: String
    /// The range's start (exclusive); 0 for a whole prefix.
    public var after: Int64
    /// The range's end (inclusive).
    public var through: Int64
    /// The sum of the checksums of the scope's events in `(after, through]`.
    public var checksum: Int64
    /// How many events the range holds (the server's rows: for a range above the folded history, its
    /// events); nil for a whole prefix.
    public var events: Int64?
    /// The scope's head when the answer was read.
    public var head: Int64
    /// How far the server has folded the scope: ranges must start at or above it.
    public var compactedThrough: Int64

    public init(
        scope: String, after: Int64, through: Int64, checksum: Int64, events: Int64?, head: Int64,
        compactedThrough: Int64
    ) {
        self.scope = scope
        self.after = after
        self.through = through
        self.checksum = checksum
        self.events = events
        self.head = head
        self.compactedThrough = compactedThrough
    }
}
