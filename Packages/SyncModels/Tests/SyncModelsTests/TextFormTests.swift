import Foundation
import PropertyBased
import Testing

@testable import SyncModels

/// The hand-written text forms (read from UTF-8 bytes, written without Foundation) against Foundation's.
@Suite struct TextFormTests {
    @Test func timesParseAndFormatAsFoundationDoes() async {
        let style = Date.ISO8601FormatStyle(timeZone: .gmt)
        // From 1583: before the Gregorian reform Foundation switches to the Julian calendar, while RFC 3339
        // (and this code) count in the proleptic Gregorian one.
        await propertyCheck(count: 500, input: Gen.int(in: -12_212_553_600_000...253_402_300_799_999)) { milliseconds in
            let date = Date(timeIntervalSince1970: Double(milliseconds) / 1000)
            let text = RFC3339.string(from: date)
            // Foundation writes the whole seconds; the milliseconds are exact integers.
            let (seconds, fraction) = milliseconds.quotientAndRemainder(dividingBy: 1000)
            let whole = fraction < 0 ? seconds - 1 : seconds
            let base = Date(timeIntervalSince1970: Double(whole)).formatted(style).dropLast()
            #expect(
                text == base + String(format: ".%03dZ", fraction < 0 ? fraction + 1000 : fraction), "ms \(milliseconds)"
            )
            #expect(RFC3339.date(from: text) == date, "\(text)")
            #expect(RFC3339.string(from: RFC3339.date(from: text)!) == text)
        }
    }

    @Test(arguments: [
        ("2023-11-14T22:13:20Z", 1_700_000_000_000.0),
        ("2023-11-14t22:13:20.5z", 1_700_000_000_500),
        ("2023-11-14T22:13:20.123456Z", 1_700_000_000_123.456),
        ("2023-11-15T00:13:20.000+02:00", 1_700_000_000_000),
        ("2023-11-14T20:13:20-02:00", 1_700_000_000_000),
        ("2024-02-29T00:00:00Z", 1_709_164_800_000),
        ("1969-12-31T23:59:59.999Z", -1),
    ])
    func readsTheForms(text: String, milliseconds: Double) throws {
        let date = try #require(RFC3339.date(from: text))
        #expect(abs(date.timeIntervalSince1970 * 1000 - milliseconds) < 0.001)
    }

    @Test(arguments: [
        "", "2023-11-14", "2023-11-14T22:13:20", "2023-13-14T22:13:20Z", "2023-02-29T00:00:00Z",
        "2023-11-14T24:00:00Z", "2023-11-14T22:13:20.Z", "2023-11-14T22:13:20Zx", "2023-11-14T22:13:20+0200",
        "2023-11-14X22:13:20Z", "２023-11-14T22:13:20Z",
    ])
    func refusesOtherText(text: String) {
        var text = text
        #expect(text.withUTF8 { RFC3339.date(utf8: UnsafeRawBufferPointer($0)) } == nil)
    }

    @Test func identifiersWriteAndReadTheirForms() async {
        await propertyCheck(count: 300, input: Gen.int(in: Int.min...Int.max).array(of: 7...7)) { draws in
            var values = draws.map { UInt64(bitPattern: Int64($0)) }.makeIterator()
            let uuid = UUID(uuid: withUnsafeBytes(of: (values.next()!, values.next()!)) { $0.load(as: uuid_t.self) })
            let id = EventID(uuid: uuid)
            #expect(id.description == uuid.uuidString.lowercased())
            #expect(try! EventID(id.description) == id)
            #expect(try! EventID(uuid.uuidString) == id, "either case")
            let replica = ReplicaID(high: values.next()!, low: values.next()!)
            #expect(try! ReplicaID(replica.description) == replica)
            #expect(replica.description.count == 32)
            let hlc = HLCTimestamp(
                physical: values.next()! & HLCTimestamp.maxPhysical,
                counter: UInt16(truncatingIfNeeded: values.next()!),
                node: values.next()!)
            #expect(try! HLCTimestamp(hlc.description) == hlc)
            #expect(hlc.description.count == 38)
        }
    }

    @Test(arguments: [
        "", "0190f0a8-4b2c-7d3e-8f10-123456789ab", "0190f0a8-4b2c-7d3e-8f10-123456789abg",
        "0190f0a84b2c-7d3e-8f10-123456789abcd", "0190f0a8-4b2c-7d3e-8f10_123456789abc",
    ])
    func refusesBadEventIDs(text: String) {
        #expect(throws: SyncModelsError.self) { try EventID(text) }
    }

    @Test func refusesBadReplicasAndHLCs() {
        #expect(throws: SyncModelsError.self) { try ReplicaID(String(repeating: "a", count: 31)) }
        #expect(throws: SyncModelsError.self) { try ReplicaID(String(repeating: "g", count: 32)) }
        #expect(throws: SyncModelsError.self) { try HLCTimestamp("0000000000000001:0000:000000000000000") }
        #expect(throws: SyncModelsError.self) { try HLCTimestamp("0000000000000001-0000:0000000000000001") }
        #expect(throws: SyncModelsError.self) { try HLCTimestamp("1000000000000001:0000:0000000000000001") }
    }
}
