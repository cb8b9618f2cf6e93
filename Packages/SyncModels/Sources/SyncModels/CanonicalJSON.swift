import Foundation

/// The one JSON form used for hashing, storage and golden files: sorted keys, no escaped slashes, dates as
/// RFC 3339 with milliseconds in UTC. Decoding then encoding a canonical document gives the same bytes.
///
/// For a `JSONValue` (an event's payload), `JSONValue.canonicalData()` (`JSONWriter`) writes the same bytes
/// faster, but for `-0.0` and non-finite doubles (see `JSONWriter`); code that hashes or stores payloads
/// uses it, and reads them with `JSONValue(parsing:)`.
public enum CanonicalJSON {
    public static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(RFC3339.string(from: date))
        }
        return encoder
    }

    public static func decoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            guard let date = RFC3339.date(from: text) else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "not an RFC 3339 time")
            }
            return date
        }
        return decoder
    }

    public static func encode<T: Encodable>(_ value: T) throws -> Data {
        try encoder().encode(value)
    }

    public static func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T {
        try decoder().decode(type, from: data)
    }
}

/// RFC 3339 times in UTC with millisecond precision, e.g. `2026-11-22T05:06:37.793Z`.
public enum RFC3339 {
    /// Formats from whole milliseconds (rounded), so a time parsed from this form formats back to the same
    /// text despite `Date`'s binary floating point.
    public static func string(from date: Date) -> String {
        let milliseconds = Int64((date.timeIntervalSince1970 * 1000).rounded())
        if let text = fastString(milliseconds: milliseconds) { return text }
        let seconds = milliseconds.quotientAndRemainder(dividingBy: 1000)
        let whole = seconds.remainder < 0 ? seconds.quotient - 1 : seconds.quotient
        let fraction = seconds.remainder < 0 ? seconds.remainder + 1000 : seconds.remainder
        let base = Date(timeIntervalSince1970: TimeInterval(whole)).formatted(
            Date.ISO8601FormatStyle(timeZone: .gmt))
        let digits = String(fraction)
        return base.dropLast() + "." + String(repeating: "0", count: 3 - digits.count) + digits + "Z"
    }

    /// Parses an RFC 3339 time with or without fractional seconds.
    public static func date(from text: String) -> Date? {
        var text = text
        if let date = text.withUTF8({ date(utf8: UnsafeRawBufferPointer($0)) }) { return date }
        if let date = try? Date.ISO8601FormatStyle(includingFractionalSeconds: true, timeZone: .gmt).parse(text) {
            return date
        }
        return try? Date.ISO8601FormatStyle(timeZone: .gmt).parse(text)
    }
}
