/// A sync partition: a notebook, a team space, a user. The unit of authorization, ordering and retention.
///
/// A scope name is 1-128 characters of `A-Z a-z 0-9 . _ : -`, so it is safe in URLs, cursors, SQL and logs.
public struct Scope: Hashable, Comparable, Sendable, Codable, CustomStringConvertible,
    ExpressibleByStringLiteral
{
    public let name: String

    /// - Throws: `SyncModelsError` with code `scope.invalid` for a name outside the rules.
    public init(_ name: String) throws {
        guard Self.isValid(name) else {
            throw SyncModelsError.invalid("scope", "a scope is 1-128 characters of A-Z a-z 0-9 . _ : -")
        }
        self.name = name
    }

    /// For literals in code; traps on an invalid name.
    public init(stringLiteral value: String) {
        precondition(Self.isValid(value), "invalid scope literal")
        self.name = value
    }

    public static func isValid(_ name: String) -> Bool {
        let utf8 = name.utf8
        guard (1...128).contains(utf8.count) else { return false }
        return utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: ":"),
                UInt8(ascii: "-"):
                return true
            default:
                return false
            }
        }
    }

    public var description: String { name }

    public static func < (lhs: Scope, rhs: Scope) -> Bool { lhs.name < rhs.name }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        do {
            try self.init(try container.decode(String.self))
        } catch let error as SyncModelsError {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: error.message)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(name)
    }
}
