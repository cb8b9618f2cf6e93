import Foundation
import GRDB
import SyncEventStore
import SyncModels

/// A small domain for the contract tests of `StreamStateProjection`: labels (streams `label:…`) with a name
/// (last writer wins by HLC), a counter (each `label.counted` event adds once, by its dot), tags (added
/// only) and a delete that retires the label. Its state is a CRDT: any order of the same events, and any
/// repetition, gives the same state.
public struct LabelModel: StreamStateReplayModel {
    public struct State: Sendable, Hashable, Codable {
        public var name = ""
        /// The HLC of the assignment `name` holds.
        public var named = HLCTimestamp.zero
        /// What compacted counts add up to.
        public var base: Int64 = 0
        /// Counts not compacted yet, by the dot of their event.
        public var counts: [String: Int64] = [:]
        public var tags: Set<String> = []
        public var deleted = false

        public init() {}

        public var count: Int64 { counts.values.reduce(base, +) }
    }

    public init() {}

    public var name: String { "labels" }
    public var version: Int { 1 }
    public var table: String { "labels" }
    public var columns: [StreamStateColumn] {
        [
            StreamStateColumn("name", "TEXT NOT NULL DEFAULT ''"),
            StreamStateColumn("count", "INTEGER NOT NULL DEFAULT 0"),
            StreamStateColumn("tags", "TEXT NOT NULL DEFAULT '[]'"),
            StreamStateColumn("deleted", "INTEGER NOT NULL DEFAULT 0"),
        ]
    }
    public var retiredColumn: String? { "deleted" }

    /// A label's key is its stream's name.
    public func key(ofStream stream: String) -> String? { stream.hasPrefix("label:") ? stream : nil }

    public func stream(of key: String) -> String { key }

    public func initialState() -> State { State() }

    public func apply(_ event: StoredEvent, to state: inout State) {
        Self.apply(type: event.event.type, event.event.payload, hlc: event.event.hlc, dot: event.event.dot, to: &state)
    }

    /// A replay's events, by type.
    public enum Kind: Sendable {
        case named, counted, tagged, deleted
    }

    public func kind(ofType type: UnsafeRawBufferPointer) -> Kind? {
        switch String(decoding: type, as: UTF8.self) {
        case "label.named": .named
        case "label.counted": .counted
        case "label.tagged": .tagged
        case "label.deleted": .deleted
        default: nil
        }
    }

    public func apply(_ kind: Kind, payload: UnsafeRawBufferPointer, hlc: HLCTimestamp, dot: Dot, to state: inout State)
    {
        let type = "label.\(kind)"
        Self.apply(type: type, (try? JSONValue(parsing: payload)) ?? .object([:]), hlc: hlc, dot: dot, to: &state)
    }

    static func apply(type: String, _ payload: JSONValue, hlc: HLCTimestamp, dot: Dot, to state: inout State) {
        switch type {
        case "label.named":
            if hlc > state.named, let name = payload["name"]?.stringValue {
                state.name = name
                state.named = hlc
            }
        case "label.counted":
            state.counts[dot.description] = payload["by"]?.intValue ?? 1
        case "label.tagged":
            if let tag = payload["tag"]?.stringValue { state.tags.insert(tag) }
        case "label.deleted":
            state.deleted = true
        default:
            break
        }
    }

    public func encode(_ state: State) -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        var sorted = state
        sorted.tags = []
        // Sets encode in hash order: as a sorted array, the bytes depend only on the state.
        struct Stored: Encodable {
            var state: State
            var tags: [String]
        }
        return (try? encoder.encode(Stored(state: sorted, tags: state.tags.sorted()))) ?? Data()
    }

    public func decode(_ data: Data) throws -> State {
        struct Stored: Decodable {
            var state: State
            var tags: [String]
        }
        let stored = try JSONDecoder().decode(Stored.self, from: data)
        var state = stored.state
        state.tags = Set(stored.tags)
        return state
    }

    public func values(of state: State) -> [DatabaseValue] {
        let tags = (try? JSONEncoder().encode(state.tags.sorted())).map { String(decoding: $0, as: UTF8.self) }
        return [
            state.name.databaseValue, state.count.databaseValue, (tags ?? "[]").databaseValue,
            state.deleted.databaseValue,
        ]
    }

    /// Counts every replica has seen are added into `base`: their dots are no longer needed.
    public func compactStable(_ state: inout State) -> Bool {
        guard !state.counts.isEmpty else { return false }
        state.base = state.count
        state.counts = [:]
        return true
    }

    public func isRetired(_ state: State) -> Bool { state.deleted }

    /// The rows of `table` (stream, scope, state and the read columns), as text, in stream order:
    /// what two stores that hold the same labels show alike, byte for byte.
    public static func rows(_ store: EventStore, table: String = "labels") async throws -> [String] {
        try await store.database.read { db in
            try Row.fetchAll(
                db, sql: "SELECT stream, scope, hex(state), name, count, tags, deleted FROM \(table) ORDER BY stream"
            ).map { $0.description }
        }
    }
}

/// Drafts of `LabelModel`'s events.
public enum LabelEvents {
    public static func named(_ label: String, _ name: String, scope: Scope = "team-1") -> EventDraft {
        EventDraft(
            scope: scope, stream: "label:\(label)", type: "label.named", payload: .object(["name": .string(name)]))
    }

    public static func counted(_ label: String, by: Int64 = 1, scope: Scope = "team-1") -> EventDraft {
        EventDraft(scope: scope, stream: "label:\(label)", type: "label.counted", payload: .object(["by": .int(by)]))
    }

    public static func tagged(_ label: String, _ tag: String, scope: Scope = "team-1") -> EventDraft {
        EventDraft(
            scope: scope, stream: "label:\(label)", type: "label.tagged", payload: .object(["tag": .string(tag)]))
    }

    public static func deleted(_ label: String, scope: Scope = "team-1") -> EventDraft {
        EventDraft(scope: scope, stream: "label:\(label)", type: "label.deleted", payload: .object([:]))
    }
}
