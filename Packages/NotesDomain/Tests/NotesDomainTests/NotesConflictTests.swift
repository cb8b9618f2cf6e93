import Foundation
import GRDB
import NotesDomain
import NotesStore
import SyncEventStore
import SyncEventStoreTestSupport
import SyncModels
import Testing

/// Titles written on two devices without seeing each other: both devices show the same winner and the same
/// open conflict (in `title_conflict` and `NotesClient.conflicts()`), a resolution closes it everywhere, and
/// a device file of the previous schema migrates.
@Suite struct NotesConflictTests {
    @Test func concurrentTitlesAreKeptAndAResolutionClosesThem() async throws {
        let directory = try TemporaryDirectory()
        let (a, b) = try NotesClientTests.pair(directory)
        let id = try await a.create(scope: "team-1", title: "Groceries")
        var seq: Int64 = 0
        try await NotesClientTests.exchange(a, b, seq: &seq)
        await #expect(throws: EventStoreError.self) { try await b.resolveTitle(id, to: "nothing to resolve") }

        try await a.setTitle(id, "Groceries (Sat)")
        try await b.setTitle(id, "Party shopping")
        try await NotesClientTests.exchange(a, b, seq: &seq)
        try await NotesClientTests.exchange(b, a, seq: &seq)

        let conflicts = try await a.conflicts()
        #expect(try await b.conflicts() == conflicts)
        let conflict = try #require(conflicts.first)
        #expect(conflicts.count == 1 && conflict.note == id && conflict.field == .title)
        #expect(Set(conflict.values.map(\.value)) == ["Groceries (Sat)", "Party shopping"])
        #expect(Set(conflict.values.map(\.replica)) == [a.store.replica, b.store.replica])
        #expect(try await a.note(id)?.title == conflict.winner.value)
        #expect(try await b.note(id)?.title == conflict.winner.value)
        #expect(try await a.exportState() == (try await b.exportState()))
        let column = try await a.store.database.read { db in
            try String.fetchOne(db, sql: "SELECT title_conflict FROM notes WHERE id = ?", arguments: [id.description])
        }
        let text = try #require(column)
        let values = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: String]])
        #expect(values.map { $0["value"] } == conflict.values.map(\.value))
        #expect(values.map { $0["replica"] } == conflict.values.map(\.replica.description))

        try await b.resolveTitle(id, to: "Groceries for the party")
        try await NotesClientTests.exchange(b, a, seq: &seq)
        for client in [a, b] {
            #expect(try await client.conflicts().isEmpty)
            #expect(try await client.note(id)?.title == "Groceries for the party")
            let open = try await client.store.database.read { db in
                try Int.fetchOne(db, sql: "SELECT count(*) FROM notes WHERE title_conflict IS NOT NULL")
            }
            #expect(open == 0)
        }
    }

    /// The previous schema: no `title_conflict` column, the triggers that copy the columns before it, states
    /// in binary format 2 (a last-writer-wins title), and the projection at version 1.
    static func downgradeToPreviousSchema(_ writer: any DatabaseWriter) async throws {
        try await writer.write { db in
            for table in ["notes", "notes_snapshot"] {
                for row in try Row.fetchAll(db, sql: "SELECT id, state FROM \(table)") {
                    let state = try NoteState(stored: [UInt8](row["state"] as Data))
                    try db.execute(
                        sql: "UPDATE \(table) SET state = ? WHERE id = ?",
                        arguments: [Data(NoteTitleConflictTests.formatTwoBytes(state)), row["id"] as String])
                }
            }
            let columns = "id, scope, title, body, tags, pinned, view_count, checklist, deleted, created, state"
            let old = columns.split(separator: ",").map { "OLD." + $0.trimmingCharacters(in: .whitespaces) }
                .joined(separator: ", ")
            try db.execute(
                sql: """
                    DROP TRIGGER notes_copy_on_update;
                    DROP TRIGGER notes_copy_on_delete;
                    DROP INDEX notes_with_conflict;
                    ALTER TABLE notes DROP COLUMN title_conflict;
                    ALTER TABLE notes_snapshot DROP COLUMN title_conflict;
                    CREATE TRIGGER notes_copy_on_update BEFORE UPDATE ON notes
                    WHEN OLD.changed = 0 AND NEW.changed = 1 BEGIN
                        INSERT OR REPLACE INTO notes_snapshot (\(columns)) VALUES (\(old));
                    END;
                    CREATE TRIGGER notes_copy_on_delete BEFORE DELETE ON notes WHEN OLD.changed = 0 BEGIN
                        INSERT OR REPLACE INTO notes_snapshot (\(columns)) VALUES (\(old));
                    END;
                    DELETE FROM grdb_migrations WHERE identifier = 'notes.v3.title-conflict';
                    UPDATE projection_checkpoint SET version = 1 WHERE name = 'notes';
                    """)
        }
    }

    @Test func aDeviceFileOfThePreviousSchemaMigratesAndShowsItsNotes() async throws {
        let directory = try TemporaryDirectory()
        let (a, b) = try NotesClientTests.pair(directory)
        let first = try await a.create(scope: "team-1", title: "Groceries", body: "milk")
        try await a.setTitle(first, "Shopping")
        let second = try await a.create(scope: "team-1", title: "Trip")
        var seq: Int64 = 0
        try await NotesClientTests.exchange(a, b, seq: &seq)
        // Folded into the snapshot: the log no longer holds these events, only the states do.
        _ = try await b.store.prune(stablePoints: ["team-1": seq])
        try await b.setTitle(second, "Trip to Lyon")
        let before = try await b.exportState()
        let path = b.store.database.path
        try await Self.downgradeToPreviousSchema(b.store.database.writer)

        let reopened = try NotesClient.open(path: path)
        #expect(try await reopened.exportState() == before)
        #expect(try await reopened.note(first)?.title == "Shopping")
        #expect(try await reopened.note(second)?.title == "Trip to Lyon")
        #expect(try await reopened.conflicts().isEmpty)
        let (version, titles) = try await reopened.store.database.read { db in
            (
                try Int.fetchOne(db, sql: "SELECT version FROM projection_checkpoint WHERE name = 'notes'"),
                try String.fetchAll(db, sql: "SELECT title FROM notes WHERE title_conflict IS NULL ORDER BY title")
            )
        }
        #expect(version == NoteState.version && titles == ["Shopping", "Trip to Lyon"])

        // The migrated device takes part in conflicts like any other.
        try await NotesClientTests.exchange(b, a, seq: &seq)
        try await a.setTitle(first, "Shopping list")
        try await reopened.setTitle(first, "Market")
        try await NotesClientTests.exchange(a, reopened, seq: &seq)
        try await NotesClientTests.exchange(reopened, a, seq: &seq)
        #expect(try await reopened.conflicts().first?.values.count == 2)
        #expect(try await reopened.conflicts() == (try await a.conflicts()))
    }
}
