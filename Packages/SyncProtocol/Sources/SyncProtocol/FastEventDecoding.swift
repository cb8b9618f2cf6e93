import Foundation
import SyncModels

/// The fast path of `WireCodec` for the bodies that carry events (`PushRequest`, `SyncRequest`).
///
/// Every value it returns is the one `JSONDecoder` would return for the same bytes; whenever it is not
/// certain (see `FastJSONReader`), it returns nil and the caller uses `JSONDecoder`.
enum FastEventDecoding {
    static func pushRequest(_ data: Data) -> PushRequest? {
        data.withUnsafeBytes { bytes in
            var reader = FastJSONReader(bytes)
            var replica: ReplicaID?
            var events: [Event]?
            do throws(FastJSONReader.Bail) {
                try reader.readObject { reader, key throws(FastJSONReader.Bail) in
                    switch key {
                    case "replica":
                        guard replica == nil else { throw FastJSONReader.Bail() }
                        replica = try Self.replica(&reader)
                    case "events":
                        guard events == nil else { throw FastJSONReader.Bail() }
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
            var reader = FastJSONReader(bytes)
            var replica: ReplicaID?
            var events: [Event]?
            var cursor: String??
            var scopes: [Scope]??
            var limit: Int??
            do throws(FastJSONReader.Bail) {
                try reader.readObject { reader, key throws(FastJSONReader.Bail) in
                    switch key {
                    case "replica":
                        guard replica == nil else { throw FastJSONReader.Bail() }
                        replica = try Self.replica(&reader)
                    case "events":
                        guard events == nil else { throw FastJSONReader.Bail() }
                        events = try Self.events(&reader)
                    case "cursor":
                        guard cursor == nil else { throw FastJSONReader.Bail() }
                        cursor = .some(try reader.readNull() ? nil : try reader.readString())
                    case "scopes":
                        guard scopes == nil else { throw FastJSONReader.Bail() }
                        if try reader.readNull() {
                            scopes = .some(nil)
                        } else {
                            var list: [Scope] = []
                            try reader.readArray { reader throws(FastJSONReader.Bail) in
                                guard let scope = try? Scope(try reader.readString()) else {
                                    throw FastJSONReader.Bail()
                                }
                                list.append(scope)
                            }
                            scopes = .some(list)
                        }
                    case "limit":
                        guard limit == nil else { throw FastJSONReader.Bail() }
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

    static func replica(_ reader: inout FastJSONReader) throws(FastJSONReader.Bail) -> ReplicaID {
        guard let replica = try? ReplicaID(try reader.readString()) else { throw FastJSONReader.Bail() }
        return replica
    }

    static func events(_ reader: inout FastJSONReader) throws(FastJSONReader.Bail) -> [Event] {
        var events: [Event] = []
        try reader.readArray { reader throws(FastJSONReader.Bail) in events.append(try event(&reader)) }
        return events
    }

    /// One event; bails on a missing, repeated or doubtful field, and on `receivedAt` (server-written).
    static func event(_ reader: inout FastJSONReader) throws(FastJSONReader.Bail) -> Event {
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
        try reader.readObject { reader, key throws(FastJSONReader.Bail) in
            switch key {
            case "id":
                guard id == nil, let value = try? EventID(try reader.readString()) else { throw FastJSONReader.Bail() }
                id = value
            case "scope":
                guard scope == nil, let value = try? Scope(try reader.readString()) else { throw FastJSONReader.Bail() }
                scope = value
            case "stream":
                guard stream == nil else { throw FastJSONReader.Bail() }
                stream = try reader.readString()
            case "streamVersion":
                guard streamVersion == nil else { throw FastJSONReader.Bail() }
                streamVersion = try reader.readInt64()
            case "type":
                guard type == nil else { throw FastJSONReader.Bail() }
                type = try reader.readString()
            case "schemaVersion":
                guard schemaVersion == nil else { throw FastJSONReader.Bail() }
                schemaVersion = Int(try reader.readInt64())
            case "hlc":
                guard hlc == nil, let value = try? HLCTimestamp(try reader.readString()) else {
                    throw FastJSONReader.Bail()
                }
                hlc = value
            case "dot":
                guard dot == nil else { throw FastJSONReader.Bail() }
                dot = try Self.dot(&reader)
            case "payload":
                guard payload == nil else { throw FastJSONReader.Bail() }
                payload = try reader.readValue()
            case "seq":
                guard seq == nil else { throw FastJSONReader.Bail() }
                seq = .some(try reader.readNull() ? nil : try reader.readInt64())
            default:
                // `receivedAt` (a date) and anything unknown: let JSONDecoder judge.
                throw FastJSONReader.Bail()
            }
        }
        guard let id, let scope, let stream, let streamVersion, let type, let schemaVersion, let hlc, let dot,
            let payload
        else { throw FastJSONReader.Bail() }
        return Event(
            id: id, scope: scope, stream: stream, streamVersion: streamVersion, type: type,
            schemaVersion: schemaVersion, hlc: hlc, dot: dot, payload: payload, seq: seq ?? nil)
    }

    static func dot(_ reader: inout FastJSONReader) throws(FastJSONReader.Bail) -> Dot {
        var replica: ReplicaID?
        var counter: Int64?
        try reader.readObject { reader, key throws(FastJSONReader.Bail) in
            switch key {
            case "replica":
                guard replica == nil else { throw FastJSONReader.Bail() }
                replica = try Self.replica(&reader)
            case "counter":
                guard counter == nil else { throw FastJSONReader.Bail() }
                counter = try reader.readInt64()
            default:
                throw FastJSONReader.Bail()
            }
        }
        guard let replica, let counter, counter >= 0 else { throw FastJSONReader.Bail() }
        return Dot(replica: replica, counter: UInt64(counter))
    }
}
