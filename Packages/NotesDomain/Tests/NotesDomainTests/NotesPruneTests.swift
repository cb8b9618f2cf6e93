import Foundation
import GRDB
import NotesDomain
import NotesStore
import SyncEventStore
import SyncEventStoreTestSupport
import SyncModels
import Testing

/// Pruning the notes projection: a stable prune folds confirmed history into the snapshot, purges it (deleted
/// notes gone, states compacted), and keeps one copy of each note until it changes again (copy-on-write); a
/// rebuild or a rejection's rollback afterwards still ends where the log says.
@Suite struct NotesPruneTests {
    /// Rows in the snapshot table, and rows marked changed since the snapshot.
    static func copies(_ client: NotesClient) async throws -> (snapshot: Int, changed: Int) {
        try await client.store.database.writer.read { db in
            (
                try Int.fetchOne(db, sql: "SELECT count(*) FROM notes_snapshot") ?? 0,
                try Int.fetchOne(db, sql: "SELECT count(*) FROM notes WHERE changed = 1") ?? 0
            )
        }
    }

    @Test func aStablePruneKeepsOneCopyPurgesAndRebuildsTheSameState() async throws {
        let directory = try TemporaryDirectory()
        let (a, b) = try NotesClientTests.pair(directory)
        var ids: [NoteID] = []
        for index in 0..<6 {
            let id = try await a.create(scope: "team-1", title: "note \(index)", body: "first draft of \(index)")
            try await a.setBody(id, "second \(index)")
            try await a.addTag(id, "work")
            try await a.removeTag(id, "work")
            ids.append(id)
        }
        try await a.delete(ids[5])
        let first = ids[0]
        var seq: Int64 = 0
        try await NotesClientTests.exchange(a, b, seq: &seq)
        let before = try await b.exportState()
        let stable =
            try await b.store.database.writer.read { db in try Int64.fetchOne(db, sql: "SELECT max(seq) FROM events") }
            ?? 0
        let confirmed = try await b.store.counts()[.confirmed] ?? 0
        var compacted = try #require(
            try await b.store.database.writer.read { db in try NotesProjection.state(of: first, in: db) })
        compacted.compactStable()
        let report = try await b.store.prune(stablePoints: ["team-1": stable])
        #expect(report.foldedEvents == confirmed && confirmed > 20)
        #expect(try await b.exportState() == before, "pruning changes no state")
        #expect(try await Self.copies(b) == (0, 0), "one copy: every row is its own snapshot")
        #expect(
            try await b.store.database.writer.read { db in
                try Int.fetchOne(db, sql: "SELECT count(*) FROM notes")
            } == 5, "the deleted note is gone")
        let state = try #require(
            try await b.store.database.writer.read { db in try NotesProjection.state(of: first, in: db) })
        #expect(state == compacted, "the snapshot's states are compacted")
        // A local edit copies its note once; a rebuild restores the snapshot and replays the edit.
        try await b.setTitle(ids[0], "edited after the prune")
        try await b.setTitle(ids[0], "edited twice")
        #expect(try await Self.copies(b) == (1, 1))
        let edited = try await b.exportState()
        try await b.store.rebuildAll()
        #expect(try await b.exportState() == edited)
        // Rolling the edits back (the server refused them) restores the snapshot's note.
        let pending = try await b.store.pendingEvents().map(\.event.id)
        try await b.store.markRejected(pending, code: "validation.failed", message: "refused")
        #expect(try await b.exportState() == before)
        #expect(try await Self.copies(b) == (0, 0))
        // A second prune with nothing new keeps it so.
        _ = try await b.store.prune(stablePoints: ["team-1": stable])
        #expect(try await b.exportState() == before)
    }

    /// The versions the store keeps for local appends (`streams`), by stream.
    static func versions(_ client: NotesClient) async throws -> [String: Int64] {
        try await client.store.database.writer.read { db in
            Dictionary(
                try Row.fetchAll(db, sql: "SELECT stream, version FROM streams").map { ($0[0], $0[1]) },
                uniquingKeysWith: { a, _ in a })
        }
    }

    /// A device that churns through notes keeps a version for each live stream, not for every stream it ever
    /// saw: a stable prune forgets the streams of the deleted notes it purges, but only once the log holds
    /// none of their events.
    @Test func aStablePruneForgetsTheVersionsOfDeletedNotes() async throws {
        let directory = try TemporaryDirectory()
        let (a, b) = try NotesClientTests.pair(directory)
        let c = try NotesClient.open(path: directory.path("c.sqlite"))
        var ids: [NoteID] = []
        for index in 0..<4 {
            ids.append(try await a.create(scope: "team-1", title: "note \(index)", body: "body \(index)"))
        }
        var seq: Int64 = 0
        var seqOfC: Int64 = 0
        try await NotesClientTests.exchange(a, b, seq: &seq)
        try await NotesClientTests.exchange(a, c, seq: &seqOfC)
        let beforeDelete = seq
        // c edits note 1 before it hears of its delete; the server orders the edit after the delete.
        try await c.setTitle(ids[1], "edited on c")
        try await a.delete(ids[0])
        try await a.delete(ids[1])
        try await NotesClientTests.exchange(a, b, seq: &seq)
        let deletesAt = seq
        try await NotesClientTests.exchange(c, b, seq: &seq)
        #expect(seq == deletesAt + 1)
        #expect(Set(try await Self.versions(b).keys) == Set(ids.map(\.stream)))
        let versionOfEdited = try #require(try await Self.versions(b)[ids[1].stream])
        // What a prune step asks (the streams it folds) agrees with the whole list of deleted notes.
        let projection = NotesProjection()
        let asked: Set<String> = Set(ids[1...].map(\.stream)).union(["note:not-a-uuid", "list:other"])
        let (among, all) = try await b.store.database.writer.read { db in
            (try projection.retiredStreams(among: asked, in: db), try projection.retiredStreams(in: db))
        }
        #expect(all == Set(ids[0...1].map(\.stream)))
        #expect(among == [ids[1].stream])

        // Stable only up to the creations: the deletes are still in the log, every version stays.
        _ = try await b.store.prune(stablePoints: ["team-1": beforeDelete])
        #expect(Set(try await Self.versions(b).keys) == Set(ids.map(\.stream)))

        // Stable up to the deletes: note 0's version goes; note 1's stays while the log holds c's edit of it.
        _ = try await b.store.prune(stablePoints: ["team-1": deletesAt])
        let versions = try await Self.versions(b)
        #expect(Set(versions.keys) == Set(ids[1...].map(\.stream)), "the deleted note's version is gone")
        #expect(versions[ids[1].stream] == versionOfEdited)

        // Local appends go on as before, and a rebuild still ends where the log says.
        try await b.setTitle(ids[3], "edited on b")
        let state = try await b.exportState()
        try await b.store.rebuildAll()
        #expect(try await b.exportState() == state)
        #expect(try await Self.versions(b)[ids[3].stream] ?? 0 > 0)
    }

    /// A stable prune in small steps touches only the notes it folds events of, and ends where the log says:
    /// the same notes, a rebuild gives them again, and rolling back the device's own pending edits afterwards
    /// gives exactly what a device that never made them holds. Notes with events left after a step (pending
    /// edits, later confirmed ones, a stream not known to be of one scope) get the step folded into their
    /// snapshot copy; the others take their current state as their snapshot.
    @Test func aSteppedPruneFoldsOnlyWhatItDeletesAndEndsWhereTheLogSays() async throws {
        let directory = try TemporaryDirectory()
        let (a, b) = try NotesClientTests.pair(directory)
        let reference = try NotesClient.open(path: directory.path("reference.sqlite"))
        var ids: [NoteID] = []
        for index in 0..<8 {
            let id = try await a.create(scope: "team-1", title: "note \(index)", body: "draft \(index)")
            try await a.setBody(id, "second draft of \(index)")
            try await a.addTag(id, "tag-\(index % 3)")
            if index % 2 == 0 { try await a.removeTag(id, "tag-\(index % 3)") }
            ids.append(id)
        }
        try await a.delete(ids[7])
        var seq: Int64 = 0
        var referenceSeq: Int64 = 0
        try await NotesClientTests.exchange(a, b, seq: &seq)
        try await NotesClientTests.exchange(a, reference, seq: &referenceSeq)
        let stable = seq
        // Above the stable point: b's own pending edits, and a's later edits and a delete, confirmed.
        try await b.setTitle(ids[1], "edited on b")
        try await b.setBody(ids[2], "b's body")
        try await a.setTitle(ids[3], "later on a")
        try await a.delete(ids[4])
        try await NotesClientTests.exchange(a, b, seq: &seq)
        try await NotesClientTests.exchange(a, reference, seq: &referenceSeq)
        // Note 5's stream as if the log held events of it in another scope too.
        let crossing = ids[5].stream
        try await b.store.database.writer.write { db in
            try db.execute(sql: "UPDATE streams SET scope = '' WHERE stream = ?", arguments: [crossing])
        }
        let before = try await b.exportState()
        let confirmedBelow =
            try await b.store.database.writer.read { db in
                try Int.fetchOne(db, sql: "SELECT count(*) FROM events WHERE seq <= ?", arguments: [stable])
            } ?? 0

        let report = try await b.store.prune(stablePoints: ["team-1": stable], eventsPerStep: 3)
        #expect(report.foldedEvents == confirmedBelow && confirmedBelow > 30)
        #expect(try await b.exportState() == before, "pruning changes no state")
        let left = try await b.store.database.writer.read { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM events WHERE seq <= ?", arguments: [stable])
        }
        #expect(left == 0)
        let versions = try await Self.versions(b)
        #expect(versions[ids[7].stream] == nil, "the note deleted below the stable point is forgotten")
        #expect(versions[ids[4].stream] != nil, "the note deleted above it is not")
        // The notes with events left (pending, later, or possibly in another scope) keep their state and get a
        // copy of their fold; every other note is its own snapshot.
        let (changed, copies) = try await b.store.database.writer.read { db in
            (
                Set(try String.fetchAll(db, sql: "SELECT id FROM notes WHERE changed = 1")),
                Set(try String.fetchAll(db, sql: "SELECT id FROM notes_snapshot"))
            )
        }
        #expect(changed == Set([ids[1], ids[2], ids[3], ids[4], ids[5]].map(\.description)))
        #expect(copies == changed)
        try await b.store.rebuildAll()
        #expect(try await b.exportState() == before, "the snapshot and what is left of the log give the notes")
        let pending = try await b.store.pendingEvents().map(\.event.id)
        try await b.store.markRejected(pending, code: "validation.failed", message: "refused")
        #expect(try await b.exportState() == (try await reference.exportState()))
        // The same prune again finds nothing to fold.
        #expect(try await b.store.prune(stablePoints: ["team-1": stable], eventsPerStep: 3).foldedEvents == 0)
    }

    struct StoppedPrune: Error {}

    /// A device that stops between two steps of a prune (the process killed) reopens with the same notes,
    /// rebuilds them from what the steps left, and a second prune finishes the work.
    @Test func aPruneStoppedBetweenStepsLeavesAConsistentStoreAndResumes() async throws {
        let directory = try TemporaryDirectory()
        let (a, b) = try NotesClientTests.pair(directory)
        var ids: [NoteID] = []
        for index in 0..<12 {
            let id = try await a.create(scope: "team-1", title: "note \(index)", body: "draft \(index)")
            try await a.setBody(id, "second draft of \(index)")
            ids.append(id)
        }
        try await a.delete(ids[11])
        var seq: Int64 = 0
        try await NotesClientTests.exchange(a, b, seq: &seq)
        let stable = seq
        try await b.setTitle(ids[0], "pending on b")
        let before = try await b.exportState()
        let path = b.store.database.path

        await #expect(throws: StoppedPrune.self) {
            try await EventStore.$pruneStepFault.withValue({ committed in
                if committed == 3 { throw StoppedPrune() }
            }) {
                _ = try await b.store.prune(stablePoints: ["team-1": stable], eventsPerStep: 4)
            }
        }
        let reopened = try NotesClient.open(path: path)
        #expect(try await reopened.exportState() == before)
        let (left, total) = try await reopened.store.database.writer.read { db in
            (
                try Int.fetchOne(db, sql: "SELECT count(*) FROM events WHERE seq <= ?", arguments: [stable]) ?? 0,
                try Int.fetchOne(db, sql: "SELECT count(*) FROM events") ?? 0
            )
        }
        #expect(left > 0 && left < stable, "some steps were done, not all")
        try await reopened.store.rebuildAll()
        #expect(try await reopened.exportState() == before)
        let report = try await reopened.store.prune(stablePoints: ["team-1": stable], eventsPerStep: 4)
        #expect(report.foldedEvents == left)
        #expect(try await reopened.store.counts()[.confirmed] == 0 && total - left == 1)
        try await reopened.store.rebuildAll()
        #expect(try await reopened.exportState() == before)
    }
}
