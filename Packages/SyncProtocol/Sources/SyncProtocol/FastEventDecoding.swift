import Foundation
import SyncModels

/// The fast path of `WireCodec` for the bodies that carry events (`PushRequest`, `SyncRequest`).
///
/// Every value it returns is the one `JSONDecoder` would return for the same bytes; whenever it is not
/// certain (see `JSONReader`), it returns nil and the caller uses `JSONDecoder`.
enum FastEventDecoding {
    static func pushRequest(_ data: Data) -> PushRequest? {
        data.withUnsafeBytes { bytes in
            var reader = JSONReader(bytes)
            var replica: ReplicaID?
            var events: [Event]?
            do throws(JSONReader.Bail) {
                try reader.readObject { reader, key throws(JSONReader.Bail) in
                    switch key {
                    case "replica":
                        guard replica == nil else { throw JSONReader.Bail() }
                        replica = try reader.readReplica()
                    case "events":
                        guard events == nil else { throw JSONReader.Bail() }
                        events = try Self.events(&reader)
                    default:
                        _ = try reader.readValue()
                    }
                }
                guard reader.atEnd(), let replica, let events else { return nil }
                return PushRequest(replica: replica, events: events)
            } catch {
                return nil
            }
        }
    }

    static func syncRequest(_ data: Data) -> SyncRequest? {
        data.withUnsafeBytes { bytes in
            var reader = JSONReader(bytes)
            var replica: ReplicaID?
            var events: [Event]?
            var cursor: String??
            var scopes: [Scope]??
            var limit: Int??
            do throws(JSONReader.Bail) {
                try reader.readObject { reader, key throws(JSONReader.Bail) in
                    switch key {
                    case "replica":
                        guard replica == nil else { throw JSONReader.Bail() }
                        replica = try reader.readReplica()
                    case "events":
                        guard events == nil else { throw JSONReader.Bail() }
                        events = try Self.events(&reader)
                    case "cursor":
                        guard cursor == nil else { throw JSONReader.Bail() }
                        cursor = .some(try reader.readNull() ? nil : try reader.readString())
                    case "scopes":
                        guard scopes == nil else { throw JSONReader.Bail() }
                        if try reader.readNull() {
                            scopes = .some(nil)
                        } else {
                            var list: [Scope] = []
                            try reader.readArray { reader throws(JSONReader.Bail) in
                                guard let scope = try? Scope(try reader.readString()) else {
                                    throw JSONReader.Bail()
                                }
                                list.append(scope)
                            }
                            scopes = .some(list)
                        }
                    case "limit":
                        guard limit == nil else { throw JSONReader.Bail() }
                        if try reader.readNull() {
                            limit = .some(nil)
                        } else {
                            limit = .some(Int(try reader.readInt64()))
                        }
                    default:
                        _ = try reader.readValue()
                    }
                }
                guard reader.atEnd(), let replica, let events else { return nil }
                return SyncRequest(
                    replica: replica, events: events, cursor: cursor ?? nil, scopes: scopes ?? nil, limit: limit ?? nil)
            } catch {
                return nil
            }
        }
    }

    static func events(_ reader: inout JSONReader) throws(JSONReader.Bail) -> [Event] {
        var events: [Event] = []
        try reader.readArray { reader throws(JSONReader.Bail) in events.append(try event(&reader)) }
        return events
    }

    /// One event; bails on a missing, repeated or doubtful field, and on `receivedAt` (server-written).
    static func event(_ reader: inout JSONReader) throws(JSONReader.Bail) -> Event {
        var id: EventID?
        var scope: Scope?
        var stream: String?
        var streamVersion: Int64?
        var type: String?
        var schemaVersion: Int?
        var hlc: HLCTimestamp?
        var dot: Dot?
        var payload: JSONValue?
        var seq: Int64??
        try reader.readObject { reader, key throws(JSONReader.Bail) in
            switch key {
            case "id":
                guard id == nil else { throw JSONReader.Bail() }
                id = try reader.readASCIIString { try? EventID(utf8: $0) }
            case "scope":
                guard scope == nil, let value = try? Scope(try reader.readString()) else { throw JSONReader.Bail() }
                scope = value
            case "stream":
                guard stream == nil else { throw JSONReader.Bail() }
                stream = try reader.readString()
            case "streamVersion":
                guard streamVersion == nil else { throw JSONReader.Bail() }
                streamVersion = try reader.readInt64()
            case "type":
                guard type == nil else { throw JSONReader.Bail() }
                type = try reader.readString()
            case "schemaVersion":
                guard schemaVersion == nil else { throw JSONReader.Bail() }
                schemaVersion = Int(try reader.readInt64())
            case "hlc":
                guard hlc == nil else { throw JSONReader.Bail() }
                hlc = try reader.readASCIIString { try? HLCTimestamp(utf8: $0) }
            case "dot":
                guard dot == nil else { throw JSONReader.Bail() }
                dot = try Self.dot(&reader)
            case "payload":
                guard payload == nil else { throw JSONReader.Bail() }
                payload = try reader.readValue()
            case "seq":
                guard seq == nil else { throw JSONReader.Bail() }
                seq = .some(try reader.readNull() ? nil : try reader.readInt64())
            default:
                // `receivedAt` (a date) and anything unknown: let JSONDecoder judge.
                throw JSONReader.Bail()
            }
        }
        guard let id, let scope, let stream, let streamVersion, let type, let schemaVersion, let hlc, let dot,
            let payload
        else { throw JSONReader.Bail() }
        return Event(
            id: id, scope: scope, stream: stream, streamVersion: streamVersion, type: type,
            schemaVersion: schemaVersion, hlc: hlc, dot: dot, payload: payload, seq: seq ?? nil)
    }

    static func dot(_ reader: inout JSONReader) throws(JSONReader.Bail) -> Dot {
        var replica: ReplicaID?
        var counter: Int64?
        try reader.readObject { reader, key throws(JSONReader.Bail) in
            switch key {
            case "replica":
                guard replica == nil else { throw JSONReader.Bail() }
                replica = try reader.readReplica()
            case "counter":
                guard counter == nil else { throw JSONReader.Bail() }
                counter = try reader.readInt64()
            default:
                throw JSONReader.Bail()
            }
        }
        guard let replica, let counter, counter >= 0 else { throw JSONReader.Bail() }
        return Dot(replica: replica, counter: UInt64(counter))
    }
}
