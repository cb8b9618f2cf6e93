import Foundation
import SyncModels
import SyncProtocol

/// Writes pull and sync answers as JSON bytes directly from stored rows.
///
/// The output is what `JSONEncoder` would write for `PullResponse` / `SyncResponse` (field names of
/// PROTOCOL.md, RFC 3339 times), but the payload text PostgreSQL returns is copied in as is instead of
/// being parsed into `JSONValue` and encoded again (it was written by `PayloadEncoder`, canonical). Strings
/// and numbers go through `JSONWriter`, the one writer and string escaper of the stack. Tests decode it with
/// `WireCodec` to hold it to that.
struct EventJSONWriter {
    private var writer: JSONWriter
    /// Events of one push share their commit time: formatting it once per distinct time saves most of the
    /// date formatting of a page.
    private var lastTime: (Date, String)?

    init(capacity: Int = 4096) {
        writer = JSONWriter(capacity: capacity)
    }

    /// The bytes written so far.
    var bytes: [UInt8] { writer.bytes }

    /// `{"results":[…]}`, the answer to a push.
    static func pushResponse(_ results: [PushResult]) -> [UInt8] {
        var writer = EventJSONWriter(capacity: 16 + results.count * 80)
        writer.raw("{\"results\":")
        writer.results(results)
        writer.raw("}")
        return writer.bytes
    }

    /// `{"events":[…],"cursor":"…","hasMore":…,"remaining":…}`, with `"results":[…],` first when `results`
    /// is given.
    static func page(
        events: [StoredEvent], cursor: String, hasMore: Bool, remaining: Int64, stable: [Scope: Int64] = [:],
        othersStable: [Scope: Int64]? = nil, results: [PushResult]? = nil, marks: [String]? = nil,
        purged: [Scope: Int64] = [:]
    ) -> [UInt8] {
        var writer = EventJSONWriter(capacity: 256 + (results?.count ?? 0) * 80 + capacity(events))
        writer.raw("{")
        if let results { writer.resultsField(results) }
        writer.tail(
            events: events, cursor: cursor, hasMore: hasMore, remaining: remaining, stable: stable,
            othersStable: othersStable, marks: marks, purged: purged)
        return writer.bytes
    }

    /// What follows the `{` and the results of `page`, from `"events":` to the closing `}`: the part of an
    /// answer that does not depend on what the request pushed, written ahead of time by `ReadAhead`.
    static func pageTail(
        events: [StoredEvent], cursor: String, hasMore: Bool, remaining: Int64, stable: [Scope: Int64],
        othersStable: [Scope: Int64]?, marks: [String]?, purged: [Scope: Int64] = [:]
    ) -> [UInt8] {
        var writer = EventJSONWriter(capacity: 256 + capacity(events))
        writer.tail(
            events: events, cursor: cursor, hasMore: hasMore, remaining: remaining, stable: stable,
            othersStable: othersStable, marks: marks, purged: purged)
        return writer.bytes
    }

    /// `{"scope":"…","after":…,"head":…,"events":[…]}`, a frame of the live stream (`LiveFrame`).
    static func liveFrame(scope: Scope, after: Int64, head: Int64, events: [StoredEvent]) -> [UInt8] {
        var writer = EventJSONWriter(capacity: 96 + capacity(events))
        writer.raw("{\"scope\":")
        writer.string(scope.name)
        writer.raw(",\"after\":")
        writer.writer.int(after)
        writer.raw(",\"head\":")
        writer.writer.int(head)
        writer.raw(",\"events\":[")
        for (index, event) in events.enumerated() {
            if index > 0 { writer.raw(",") }
            writer.event(event)
        }
        writer.raw("]}")
        return writer.bytes
    }

    /// What comes before `pageTail` in a sync answer: `{"results":[…],`.
    static func pageHead(results: [PushResult]) -> [UInt8] {
        var writer = EventJSONWriter(capacity: 16 + results.count * 80)
        writer.raw("{")
        writer.resultsField(results)
        return writer.bytes
    }

    private static func capacity(_ events: [StoredEvent]) -> Int {
        events.reduce(0) { $0 + 320 + $1.payloadJSON.utf8.count }
    }

    private mutating func resultsField(_ results: [PushResult]) {
        raw("\"results\":")
        self.results(results)
        raw(",")
    }

    private mutating func tail(
        events: [StoredEvent], cursor: String, hasMore: Bool, remaining: Int64, stable: [Scope: Int64],
        othersStable: [Scope: Int64]?, marks: [String]?, purged: [Scope: Int64]
    ) {
        raw("\"events\":[")
        for (index, event) in events.enumerated() {
            if index > 0 { raw(",") }
            self.event(event)
        }
        raw("],\"cursor\":")
        string(cursor)
        raw(",\"hasMore\":")
        raw(hasMore ? "true" : "false")
        raw(",\"remaining\":")
        writer.int(remaining)
        raw(",\"stable\":")
        points(stable)
        if let othersStable {
            raw(",\"othersStable\":")
            points(othersStable)
        }
        if let marks {
            raw(",\"marks\":[")
            for (index, mark) in marks.enumerated() {
                if index > 0 { raw(",") }
                string(mark)
            }
            raw("]")
        }
        if !purged.isEmpty {
            raw(",\"purged\":")
            points(purged)
        }
        raw("}")
    }

    /// `{"scope":seq,…}` in scope order.
    private mutating func points(_ points: [Scope: Int64]) {
        raw("{")
        for (index, scope) in points.keys.sorted().enumerated() {
            if index > 0 { raw(",") }
            string(scope.name)
            raw(":")
            writer.int(points[scope] ?? 0)
        }
        raw("}")
    }

    mutating func event(_ event: StoredEvent) {
        if event.isFolded, let carries = event.checksum {
            raw("{\"carries\":")
            writer.int(carries)
            raw(",\"dot\":{\"counter\":")
        } else {
            raw("{\"dot\":{\"counter\":")
        }
        writer.int(UInt64(bitPattern: event.dotCounter))
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
        writer.int(Int64(event.schemaVersion))
        raw(",\"scope\":")
        string(event.scope.name)
        raw(",\"seq\":")
        writer.int(event.seq)
        raw(",\"stream\":")
        string(event.stream)
        raw(",\"streamVersion\":")
        writer.int(event.streamVersion)
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
                writer.int(seq)
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
                writer.int(currentVersion)
            }
            raw("}")
        }
        raw("]")
    }

    mutating func raw(_ text: String) {
        writer.raw(text)
    }

    /// A JSON string literal, escaped by `JSONWriter` (the one escaper).
    mutating func string(_ text: String) {
        writer.string(text)
    }
}
