import Foundation
import GRDB
import SyncEventStore
import SyncModels

/// A small domain for the contract tests of `StreamStateProjection`: labels (streams `label:…`) with a name
/// (last writer wins by HLC), a counter (each `label.counted` event adds once, by its dot), tags (added
/// only) and a delete that retires the label. Its state is a CRDT: any order of the same events, and any
/// repetition, gives the same state.
public struct LabelModel: StreamStateModel {
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
        ]
    }

    public func handles(stream: String) -> Bool { stream.hasPrefix("label:") }

    public func initialState() -> State { State() }

    public func apply(_ event: StoredEvent, to state: inout State) {
        let payload = event.event.payload
        switch event.event.type {
        case "label.named":
            let hlc = event.event.hlc
            if hlc > state.named, let name = payload["name"]?.stringValue {
                state.name = name
                state.named = hlc
            }
        case "label.counted":
            state.counts[event.event.dot.description] = payload["by"]?.intValue ?? 1
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
        return [state.name.databaseValue, state.count.databaseValue, (tags ?? "[]").databaseValue]
    }

    /// Counts every replica has seen are added into `base`: their dots are no longer needed.
    public func compactStable(_ state: inout State) -> Bool {
        guard !state.counts.isEmpty else { return false }
        state.base = state.count
        state.counts = [:]
        return true
    }

    public func isRetired(_ state: State) -> Bool { state.deleted }

    /// The rows of `table` (stream, scope, retired, state and the read columns), as text, in stream order:
    /// what two stores that hold the same labels show alike, byte for byte.
    public static func rows(_ store: EventStore, table: String = "labels") async throws -> [String] {
        try await store.database.read { db in
            try Row.fetchAll(
                db, sql: "SELECT stream, scope, retired, hex(state), name, count, tags FROM \(table) ORDER BY stream"
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
