import Foundation

// Parsers that read the text forms straight from UTF-8 bytes (a SQLite column, a JSON buffer) without
// making a `String` first: a replay of the local log parses millions of them. The `String` initializers
// call these, so there is one definition of each form.

extension EventID {
    /// Parses the 36-character UUID form (either case) from UTF-8 bytes.
    /// - Throws: `SyncModelsError` with code `eventID.invalid`.
    public init(utf8 bytes: UnsafeRawBufferPointer) throws {
        guard bytes.count == 36, bytes[8] == UInt8(ascii: "-"), bytes[13] == UInt8(ascii: "-"),
            bytes[18] == UInt8(ascii: "-"), bytes[23] == UInt8(ascii: "-"),
            let a = Hex.decode(bytes, from: 0, count: 8), let b = Hex.decode(bytes, from: 9, count: 4),
            let c = Hex.decode(bytes, from: 14, count: 4), let d = Hex.decode(bytes, from: 19, count: 4),
            let e = Hex.decode(bytes, from: 24, count: 12)
        else { throw SyncModelsError.invalid("eventID", "an event id is a UUID") }
        self.init(high: a << 32 | b << 16 | c, low: d << 48 | e)
    }

    /// An id from its two 64-bit halves, most significant first.
    init(high: UInt64, low: UInt64) {
        let h = high.bigEndian
        let l = low.bigEndian
        self.init(uuid: UUID(uuid: unsafeBitCast((h, l), to: uuid_t.self)))
    }

    /// The lowercase 36-character form, written by hand (Foundation's `uuidString` then `lowercased()`
    /// allocates twice).
    var lowercaseString: String {
        let (high, low) = halves
        return String(unsafeUninitializedCapacity: 36) { buffer in
            Hex.write(high >> 32, count: 8, to: buffer, at: 0)
            buffer[8] = UInt8(ascii: "-")
            Hex.write(high >> 16 & 0xFFFF, count: 4, to: buffer, at: 9)
            buffer[13] = UInt8(ascii: "-")
            Hex.write(high & 0xFFFF, count: 4, to: buffer, at: 14)
            buffer[18] = UInt8(ascii: "-")
            Hex.write(low >> 48, count: 4, to: buffer, at: 19)
            buffer[23] = UInt8(ascii: "-")
            Hex.write(low & 0xFFFF_FFFF_FFFF, count: 12, to: buffer, at: 24)
            return 36
        }
    }
}

extension ReplicaID {
    /// Parses 32 hexadecimal digits from UTF-8 bytes.
    /// - Throws: `SyncModelsError` with code `replica.invalid`.
    public init(utf8 bytes: UnsafeRawBufferPointer) throws {
        guard bytes.count == 32, let high = Hex.decode(bytes, from: 0, count: 16),
            let low = Hex.decode(bytes, from: 16, count: 16)
        else { throw SyncModelsError.invalid("replica", "a replica id is 32 hexadecimal digits") }
        self.init(high: high, low: low)
    }
}

extension HLCTimestamp {
    /// Parses the `16:4:16` hexadecimal form from UTF-8 bytes.
    /// - Throws: `SyncModelsError` with code `hlc.invalid`.
    public init(utf8 bytes: UnsafeRawBufferPointer) throws {
        guard bytes.count == 38, bytes[16] == UInt8(ascii: ":"), bytes[21] == UInt8(ascii: ":"),
            let physical = Hex.decode(bytes, from: 0, count: 16), physical <= Self.maxPhysical,
            let counter = Hex.decode(bytes, from: 17, count: 4), let node = Hex.decode(bytes, from: 22, count: 16)
        else {
            throw SyncModelsError.invalid("hlc", "an HLC is 16:4:16 hexadecimal digits with a 48-bit physical time")
        }
        self.init(physical: physical, counter: UInt16(counter), node: node)
    }
}

extension RFC3339 {
    /// Parses an RFC 3339 time (`YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`, `T` and `Z` in either case) from
    /// UTF-8 bytes; nil for anything else. Up to three fraction digits give exactly the `Date` of
    /// `Double(milliseconds) / 1000`, the value `string(from:)` formats back to the same text.
    public static func date(utf8 bytes: UnsafeRawBufferPointer) -> Date? {
        func digits(_ start: Int, _ count: Int) -> Int? {
            guard start + count <= bytes.count else { return nil }
            var value = 0
            for index in start..<start + count {
                let digit = bytes[index] &- UInt8(ascii: "0")
                guard digit < 10 else { return nil }
                value = value * 10 + Int(digit)
            }
            return value
        }
        guard bytes.count >= 20, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"),
            bytes[10] | 0x20 == UInt8(ascii: "t"), bytes[13] == UInt8(ascii: ":"), bytes[16] == UInt8(ascii: ":"),
            let year = digits(0, 4), let month = digits(5, 2), let day = digits(8, 2), let hour = digits(11, 2),
            let minute = digits(14, 2), let second = digits(17, 2),
            (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year), hour < 24, minute < 60,
            second < 61
        else { return nil }
        var index = 19
        var fraction = 0
        var fractionDigits = 0
        if bytes[index] == UInt8(ascii: ".") {
            index += 1
            while index < bytes.count, bytes[index] &- UInt8(ascii: "0") < 10 {
                if fractionDigits < 9 {
                    fraction = fraction * 10 + Int(bytes[index] &- UInt8(ascii: "0"))
                    fractionDigits += 1
                }
                index += 1
            }
            guard fractionDigits > 0 else { return nil }
        }
        guard index < bytes.count else { return nil }
        var offset = 0
        switch bytes[index] {
        case UInt8(ascii: "Z"), UInt8(ascii: "z"):
            index += 1
        case UInt8(ascii: "+"), UInt8(ascii: "-"):
            guard index + 6 == bytes.count, bytes[index + 3] == UInt8(ascii: ":"),
                let hours = digits(index + 1, 2), let minutes = digits(index + 4, 2), hours < 24, minutes < 60
            else { return nil }
            offset = (hours * 60 + minutes) * 60 * (bytes[index] == UInt8(ascii: "-") ? -1 : 1)
            index += 6
        default:
            return nil
        }
        guard index == bytes.count else { return nil }
        let seconds =
            daysFromCivil(year: year, month: month, day: day) * 86_400 + hour * 3600 + minute * 60 + second
            - offset
        if fractionDigits <= 3 {
            var milliseconds = fraction
            for _ in fractionDigits..<3 { milliseconds *= 10 }
            return Date(timeIntervalSince1970: Double(seconds * 1000 + milliseconds) / 1000)
        }
        var scale = 1.0
        for _ in 0..<fractionDigits { scale *= 10 }
        return Date(timeIntervalSince1970: Double(seconds) + Double(fraction) / scale)
    }

    static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days from 1970-01-01 to the proleptic Gregorian date (H. Hinnant's `days_from_civil`).
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The civil date of a day count from 1970-01-01 (H. Hinnant's `civil_from_days`).
    static func civil(fromDays days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}

extension RFC3339 {
    /// `YYYY-MM-DDTHH:MM:SS.mmmZ` for whole milliseconds (rounded), written by hand; nil outside years
    /// 0000-9999.
    static func fastString(milliseconds: Int64) -> String? {
        let (seconds, millisecond) = milliseconds.quotientAndRemainder(dividingBy: 1000)
        let whole = millisecond < 0 ? seconds - 1 : seconds
        let fraction = Int(millisecond < 0 ? millisecond + 1000 : millisecond)
        let (days, secondOfDay) = whole.quotientAndRemainder(dividingBy: 86_400)
        let day = Int(secondOfDay < 0 ? days - 1 : days)
        let second = Int(secondOfDay < 0 ? secondOfDay + 86_400 : secondOfDay)
        let date = civil(fromDays: day)
        guard (0...9999).contains(date.year) else { return nil }
        return String(unsafeUninitializedCapacity: 24) { buffer in
            func put(_ value: Int, _ count: Int, at start: Int) {
                var value = value
                for index in stride(from: start + count - 1, through: start, by: -1) {
                    buffer[index] = UInt8(ascii: "0") + UInt8(value % 10)
                    value /= 10
                }
            }
            put(date.year, 4, at: 0)
            buffer[4] = UInt8(ascii: "-")
            put(date.month, 2, at: 5)
            buffer[7] = UInt8(ascii: "-")
            put(date.day, 2, at: 8)
            buffer[10] = UInt8(ascii: "T")
            put(second / 3600, 2, at: 11)
            buffer[13] = UInt8(ascii: ":")
            put(second / 60 % 60, 2, at: 14)
            buffer[16] = UInt8(ascii: ":")
            put(second % 60, 2, at: 17)
            buffer[19] = UInt8(ascii: ".")
            put(fraction, 3, at: 20)
            buffer[23] = UInt8(ascii: "Z")
            return 24
        }
    }
}
