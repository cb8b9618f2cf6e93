import Foundation
import GRDB
import SyncEventStore
import SyncEventStoreTestSupport
import SyncModels
import Testing

/// `EventStore.streamsInConflict`: the records whose model's `conflictColumn` is set, retired ones left out,
/// read from the tables whichever way the rows were written; models without the column report none.
@Suite struct StreamsInConflictTests {
    /// `LabelModel`, with a label in conflict while it carries the tag `disputed` (a stand-in for a domain's
    /// concurrent values kept for review), shown in a `conflict` column.
    struct DisputedLabelModel: StreamStateModel {
        let labels = LabelModel()
        var name: String { "disputed_labels" }
        var version: Int { 1 }
        var table: String { "disputed_labels" }
        var columns: [StreamStateColumn] { labels.columns + [StreamStateColumn("conflict", "INTEGER")] }
        var retiredColumn: String? { "deleted" }
        var conflictColumn: String? { "conflict" }
        func key(ofStream stream: String) -> String? { labels.key(ofStream: stream) }
        func stream(of key: String) -> String { key }
        func initialState() -> LabelModel.State { labels.initialState() }
        func apply(_ event: StoredEvent, to state: inout LabelModel.State) { labels.apply(event, to: &state) }
        func encode(_ state: LabelModel.State) -> Data { labels.encode(state) }
        func decode(_ data: Data) throws -> LabelModel.State { try labels.decode(data) }
        func values(of state: LabelModel.State) -> [DatabaseValue] {
            labels.values(of: state) + [state.tags.contains("disputed") ? 1.databaseValue : .null]
        }
        func isRetired(_ state: LabelModel.State) -> Bool { state.deleted }
    }

    @Test func theStoreReportsTheRecordsInConflict() async throws {
        let directory = try TemporaryDirectory()
        let store = try EventStore(
            path: directory.path("a.sqlite"),
            projections: [StreamStateProjection(DisputedLabelModel()), StreamStateProjection(LabelModel())])
        try await store.append([LabelEvents.named("a", "first"), LabelEvents.named("b", "second")])
        #expect(try await store.streamsInConflict().isEmpty)
        try await store.append([LabelEvents.tagged("a", "disputed"), LabelEvents.tagged("b", "disputed")])
        #expect(try await store.streamsInConflict() == ["label:a", "label:b"])
        try await store.append([LabelEvents.deleted("b")])
        #expect(try await store.streamsInConflict() == ["label:a"], "a retired record's conflict is over")
        try await store.rebuildAll()
        #expect(try await store.streamsInConflict() == ["label:a"])
        let plain = try EventStore(path: directory.path("b.sqlite"), projections: [StreamStateProjection(LabelModel())])
        try await plain.append([LabelEvents.tagged("a", "disputed")])
        #expect(try await plain.streamsInConflict().isEmpty, "a model without a conflict column has none")
    }

    /// The default schema indexes the rows in conflict, and reading them goes through that index rather
    /// than the whole table.
    @Test func readingTheConflictsUsesThePartialIndex() async throws {
        let directory = try TemporaryDirectory()
        let store = try EventStore(
            path: directory.path("a.sqlite"), projections: [StreamStateProjection(DisputedLabelModel())])
        let plan = try await store.database.writer.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    EXPLAIN QUERY PLAN SELECT stream FROM disputed_labels
                    WHERE conflict IS NOT NULL AND conflict IS NOT 0 AND deleted = 0
                    """
            ).map { $0["detail"] as String }
        }
        #expect(plan.contains { $0.contains("disputed_labels_with_conflict") }, "\(plan)")
    }
}
