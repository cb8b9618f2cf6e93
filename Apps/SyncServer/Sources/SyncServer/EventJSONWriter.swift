import Foundation
import SyncModels
import SyncProtocol

/// Writes pull and sync answers as JSON bytes directly from stored rows.
///
/// The output is what `JSONEncoder` would write for `PullResponse` / `SyncResponse` (field names of
/// PROTOCOL.md, RFC 3339 times), but the payload text PostgreSQL returns is copied in as is instead of
/// being parsed into `JSONValue` and encoded again. Tests decode it with `WireCodec` to hold it to that.
struct EventJSONWriter {
    private(set) var bytes: [UInt8] = []

    init(capacity: Int = 4096) {
        bytes.reserveCapacity(capacity)
    }

    /// `{"events":[…],"cursor":"…","hasMore":…}`, with `"results":[…],` first when `results` is given.
    static func page(events: [StoredEvent], cursor: String, hasMore: Bool, results: Data? = nil) -> [UInt8] {
        var writer = EventJSONWriter(capacity: 256 + events.reduce(0) { $0 + 320 + $1.payloadJSON.utf8.count })
        writer.raw("{")
        if let results {
            writer.raw("\"results\":")
            writer.bytes.append(contentsOf: results)
            writer.raw(",")
        }
        writer.raw("\"events\":[")
        for (index, event) in events.enumerated() {
            if index > 0 { writer.raw(",") }
            writer.event(event)
        }
        writer.raw("],\"cursor\":")
        writer.string(cursor)
        writer.raw(",\"hasMore\":")
        writer.raw(hasMore ? "true" : "false")
        writer.raw("}")
        return writer.bytes
    }

    mutating func event(_ event: StoredEvent) {
        raw("{\"dot\":{\"counter\":")
        raw(String(UInt64(bitPattern: event.dotCounter)))
        raw(",\"replica\":")
        string(event.dotReplica)
        raw("},\"hlc\":")
        string(event.hlc)
        raw(",\"id\":")
        string(event.id.uuidString.lowercased())
        raw(",\"payload\":")
        raw(event.payloadJSON)
        raw(",\"receivedAt\":")
        string(RFC3339.string(from: event.receivedAt))
        raw(",\"schemaVersion\":")
        raw(String(event.schemaVersion))
        raw(",\"scope\":")
        string(event.scope.name)
        raw(",\"seq\":")
        raw(String(event.seq))
        raw(",\"stream\":")
        string(event.stream)
        raw(",\"streamVersion\":")
        raw(String(event.streamVersion))
        raw(",\"type\":")
        string(event.type)
        raw("}")
    }

    mutating func raw(_ text: String) {
        bytes.append(contentsOf: text.utf8)
    }

    /// A JSON string literal: quotes, backslashes and control characters escaped, everything else as UTF-8.
    mutating func string(_ text: String) {
        bytes.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): raw("\\\"")
            case UInt8(ascii: "\\"): raw("\\\\")
            case 0x0A: raw("\\n")
            case 0x0D: raw("\\r")
            case 0x09: raw("\\t")
            case 0x00..<0x20:
                let hex = String(byte, radix: 16)
                raw("\\u00" + (hex.count == 1 ? "0" + hex : hex))
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}
