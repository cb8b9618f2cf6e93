/// A JSON value among a token's claims, kept as sent so that any claim can be read by name.
public enum ClaimValue: Sendable, Hashable, Codable {
    case string(String)
    case integer(Int64)
    case number(Double)
    case bool(Bool)
    case array([ClaimValue])
    case object([String: ClaimValue])
    case null

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .integer(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode([ClaimValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: ClaimValue].self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .string(let value): try container.encode(value)
        case .integer(let value): try container.encode(value)
        case .number(let value): try container.encode(value)
        case .bool(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        case .null: try container.encodeNil()
        }
    }

    /// The value when it is a string.
    public var string: String? {
        guard case .string(let value) = self else { return nil }
        return value
    }

    /// The value when it is a number (a NumericDate such as `exp` is seconds since 1970).
    public var number: Double? {
        switch self {
        case .integer(let value): Double(value)
        case .number(let value): value
        default: nil
        }
    }

    /// The value when it is an array of strings only.
    public var strings: [String]? {
        guard case .array(let values) = self else { return nil }
        var strings: [String] = []
        strings.reserveCapacity(values.count)
        for value in values {
            guard let string = value.string else { return nil }
            strings.append(string)
        }
        return strings
    }
}
