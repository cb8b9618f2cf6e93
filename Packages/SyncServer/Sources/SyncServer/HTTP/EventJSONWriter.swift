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
    /// Events of one push share their commit time: formatting it once per distinct time saves most of the
    /// date formatting of a page.
    private var lastTime: (Date, String)?

    init(capacity: Int = 4096) {
        bytes.reserveCapacity(capacity)
    }

    /// `{"results":[…]}`, the answer to a push.
    static func pushResponse(_ results: [PushResult]) -> [UInt8] {
        var writer = EventJSONWriter(capacity: 16 + results.count * 80)
        writer.raw("{\"results\":")
        writer.results(results)
        writer.raw("}")
        return writer.bytes
    }

    /// `{"events":[…],"cursor":"…","hasMore":…}`, with `"results":[…],` first when `results` is given.
    static func page(events: [StoredEvent], cursor: String, hasMore: Bool, results: [PushResult]? = nil) -> [UInt8] {
        var writer = EventJSONWriter(
            capacity: 256 + (results?.count ?? 0) * 80 + events.reduce(0) { $0 + 320 + $1.payloadJSON.utf8.count })
        writer.raw("{")
        if let results {
            writer.raw("\"results\":")
            writer.results(results)
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
        if let lastTime, lastTime.0 == event.receivedAt {
            string(lastTime.1)
        } else {
            let text = RFC3339.string(from: event.receivedAt)
            lastTime = (event.receivedAt, text)
            string(text)
        }
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

    /// The results array as `JSONEncoder` would write `[PushResult]` (absent fields left out).
    mutating func results(_ results: [PushResult]) {
        raw("[")
        for (index, result) in results.enumerated() {
            if index > 0 { raw(",") }
            raw("{\"id\":")
            string(result.id.description)
            raw(",\"status\":")
            string(result.status.rawValue)
            if let seq = result.seq {
                raw(",\"seq\":")
                raw(String(seq))
            }
            if let code = result.code {
                raw(",\"code\":")
                string(code.rawValue)
            }
            if let message = result.message {
                raw(",\"message\":")
                string(message)
            }
            if let currentVersion = result.currentVersion {
                raw(",\"currentVersion\":")
                raw(String(currentVersion))
            }
            raw("}")
        }
        raw("]")
    }

    mutating func raw(_ text: String) {
        bytes.append(contentsOf: text.utf8)
    }

    /// A JSON string literal: quotes, backslashes and control characters escaped, everything else as UTF-8.
    mutating func string(_ text: String) {
        bytes.append(UInt8(ascii: "\""))
        if !text.utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
            bytes.append(contentsOf: text.utf8)
            bytes.append(UInt8(ascii: "\""))
            return
        }
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
