import Dispatch
import GRDB
import GRDBSQLite
import NotesDomain
import SyncCRDT
import SyncEventStore
import SyncModels
import Synchronization

/// A note's row as `NotesModel.writeRows` writes it: the text and blob columns' bytes back to back in one
/// buffer (made on a worker thread, bound in place), and the numbers.
struct SavedRow: Sendable {
    /// `id`, `scope`, `title`, `body`, `tags` and `checklist` (UTF-8), then `state`, then `title_conflict`
    /// when there is one, back to back.
    var bytes: [UInt8]
    /// Where each of the first seven ends in `bytes`.
    var ends: (Int, Int, Int, Int, Int, Int, Int)
    /// Whether the bytes after `state` are a `title_conflict` (else the column is NULL).
    var hasTitleConflict: Bool
    var pinned: Bool
    var viewCount: Int64
    var deleted: Bool
    var created: Bool
}

extension NoteState {
    /// A note's row: the columns of `view`, written straight into one buffer, and the binary state.
    ///
    /// `state` is `inout` only so that a note's state, a class property, is read in place: passed any other
    /// way it is copied first (a dozen retains, then releases). Nothing in it changes.
    static func savedRow(of state: inout NoteState, id: String, scope: String) -> SavedRow {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(512)
        bytes.append(contentsOf: id.utf8)
        let idEnd = bytes.count
        bytes.append(contentsOf: scope.utf8)
        let scopeEnd = bytes.count
        if let title = state.title.value { bytes.append(contentsOf: title.utf8) }
        let titleEnd = bytes.count
        state.body.appendUTF8(to: &bytes)
        let bodyEnd = bytes.count
        NotesColumnJSON.writeTags(state.tags.elements.sorted(), to: &bytes)
        let tagsEnd = bytes.count
        NotesColumnJSON.writeChecklist(state.checklistItems, to: &bytes)
        let checklistEnd = bytes.count
        var writer = BinaryWriter(appendingTo: consume bytes)
        state.encode(to: &writer)
        bytes = writer.bytes
        let stateEnd = bytes.count
        let hasTitleConflict = state.title.hasConflict
        if hasTitleConflict { NotesColumnJSON.writeTitleConflict(state.title.candidates, to: &bytes) }
        return SavedRow(
            bytes: bytes, ends: (idEnd, scopeEnd, titleEnd, bodyEnd, tagsEnd, checklistEnd, stateEnd),
            hasTitleConflict: hasTitleConflict,
            pinned: state.pinned.value ?? false, viewCount: state.views.value, deleted: state.deleted.value ?? false,
            created: state.created)
    }
}

/// The read columns' JSON, canonical (sorted keys), written directly: building `JSONValue` trees was a sixth
/// of saving a note.
enum NotesColumnJSON {
    /// The `title_conflict` column: nil without an open conflict, else a JSON array of
    /// `{"hlc", "replica", "value"}`, the shown title first.
    static func titleConflict(of state: NoteState) -> [UInt8]? {
        guard state.title.hasConflict else { return nil }
        var output: [UInt8] = []
        writeTitleConflict(state.title.candidates, to: &output)
        return output
    }

    static func writeTitleConflict(_ entries: [ReviewRegister<String>.Entry], to output: inout [UInt8]) {
        output.append(UInt8(ascii: "["))
        for (index, entry) in entries.enumerated() {
            if index > 0 { output.append(UInt8(ascii: ",")) }
            output.append(contentsOf: #"{"hlc":"#.utf8)
            JSONValue.writeString(entry.timestamp.description, to: &output)
            output.append(contentsOf: #","replica":"#.utf8)
            JSONValue.writeString(entry.author.description, to: &output)
            output.append(contentsOf: #","value":"#.utf8)
            JSONValue.writeString(entry.value, to: &output)
            output.append(UInt8(ascii: "}"))
        }
        output.append(UInt8(ascii: "]"))
    }

    /// The `tags` column: a JSON array of the sorted tags.
    static func writeTags(_ tags: [String], to output: inout [UInt8]) {
        output.append(UInt8(ascii: "["))
        for (index, tag) in tags.enumerated() {
            if index > 0 { output.append(UInt8(ascii: ",")) }
            JSONValue.writeString(tag, to: &output)
        }
        output.append(UInt8(ascii: "]"))
    }

    /// The `checklist` column: a JSON array of `{"done", "id", "text"}` in list order.
    static func writeChecklist(_ items: [NoteView.Item], to output: inout [UInt8]) {
        output.append(UInt8(ascii: "["))
        for (index, item) in items.enumerated() {
            if index > 0 { output.append(UInt8(ascii: ",")) }
            output.append(contentsOf: item.done ? #"{"done":true,"id":"#.utf8 : #"{"done":false,"id":"#.utf8)
            JSONValue.writeString(item.id, to: &output)
            output.append(contentsOf: #","text":"#.utf8)
            JSONValue.writeString(item.text, to: &output)
            output.append(UInt8(ascii: "}"))
        }
        output.append(UInt8(ascii: "]"))
    }
}

/// The upsert of note rows, with the values bound from each row's own bytes.
///
/// GRDB executes the statement, so transaction observers (and so ValueObservation) see every change as
/// usual. Only the binding is done here: `StatementArguments` box every value and copy every blob, which was
/// half the time of saving a row. GRDB is told once that the arguments are bound; `finish()` clears the
/// bindings, which point into rows that are gone by then.
struct NotesRowInsert {
    let statement: Statement

    /// Into `notes_snapshot` instead, replacing the note's copy there.
    init(snapshotOf db: Database) throws {
        statement = try db.cachedStatement(
            sql: """
                INSERT OR REPLACE INTO notes_snapshot (\(NotesProjection.columns))
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
        statement.setUncheckedArguments(StatementArguments([DatabaseValue](repeating: .null, count: 12)))
    }

    /// Into `notes`; with `asSnapshot`, a row that stays its own snapshot (`changed = 0`: events folded on
    /// arrival, into a note whose row was its snapshot), else a changed one (its snapshot copied first by
    /// the table's trigger).
    init(_ db: Database, asSnapshot: Bool = false) throws {
        let changed = asSnapshot ? 0 : 1
        statement = try db.cachedStatement(
            sql: """
                INSERT INTO notes (\(NotesProjection.columns), changed)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, \(changed))
                ON CONFLICT (id) DO UPDATE SET title = excluded.title, body = excluded.body, tags = excluded.tags,
                    pinned = excluded.pinned, view_count = excluded.view_count, checklist = excluded.checklist,
                    deleted = excluded.deleted, created = excluded.created, state = excluded.state,
                    title_conflict = excluded.title_conflict, changed = \(changed)
                """)
        statement.setUncheckedArguments(StatementArguments([DatabaseValue](repeating: .null, count: 12)))
    }

    func execute(_ row: SavedRow) throws {
        let handle = statement.sqliteStatement
        try row.bytes.withUnsafeBytes { bytes in
            sqlite3_reset(handle)
            let ends = row.ends
            func text(_ column: Int32, _ start: Int, _ end: Int) {
                // A nil pointer would bind NULL: an empty value points into the buffer, never empty.
                sqlite3_bind_text(
                    handle, column, (bytes.baseAddress! + start).assumingMemoryBound(to: CChar.self),
                    Int32(end - start), nil)
            }
            text(1, 0, ends.0)
            text(2, ends.0, ends.1)
            text(3, ends.1, ends.2)
            text(4, ends.2, ends.3)
            text(5, ends.3, ends.4)
            sqlite3_bind_int64(handle, 6, row.pinned ? 1 : 0)
            sqlite3_bind_int64(handle, 7, row.viewCount)
            text(8, ends.4, ends.5)
            sqlite3_bind_int64(handle, 9, row.deleted ? 1 : 0)
            sqlite3_bind_int64(handle, 10, row.created ? 1 : 0)
            sqlite3_bind_blob(handle, 11, bytes.baseAddress! + ends.5, Int32(ends.6 - ends.5), nil)
            if row.hasTitleConflict {
                text(12, ends.6, bytes.count)
            } else {
                sqlite3_bind_null(handle, 12)
            }
            try statement.execute()
        }
    }

    func finish() {
        sqlite3_reset(statement.sqliteStatement)
        sqlite3_clear_bindings(statement.sqliteStatement)
    }
}

/// Computes the rows of notes, in chunks, on worker threads, and hands them to the calling thread in order
/// as chunks complete: the caller inserts one chunk's rows while the workers compute the
/// next ones, and computes a chunk itself when the next one is not ready yet.
///
/// `@unchecked Sendable`: the notes are only read; each chunk's rows are written by the one
/// thread that took the chunk (an atomic counter hands each out once) and read by the caller only after
/// that chunk's semaphore is signalled. The caller does not return before every worker is done.
final class NotesRowProducer: @unchecked Sendable {
    /// Rows per chunk: small, so that inserting starts early and no thread waits long for the next one.
    static let chunkSize = 32

    let notes: UnsafeBufferPointer<StreamStateEntry<NoteID, NoteState>>
    let chunkCount: Int
    private let rows: UnsafeMutableBufferPointer<SavedRow?>
    /// Per chunk: whether its rows are computed (checked without a system call; a semaphore timed wait of
    /// zero is one, and with the kernel's timer slack it cost tens of microseconds per chunk).
    private let done: UnsafeMutablePointer<Atomic<Bool>>
    /// Per chunk: signalled once its rows are computed, for the caller to wait on when all are taken.
    private let ready: [DispatchSemaphore]
    private let nextChunk = Atomic<Int>(0)

    init(entries: UnsafeBufferPointer<StreamStateEntry<NoteID, NoteState>>) {
        self.notes = entries
        chunkCount = (entries.count + Self.chunkSize - 1) / Self.chunkSize
        rows = .allocate(capacity: entries.count)
        rows.initialize(repeating: nil)
        done = .allocate(capacity: chunkCount)
        for chunk in 0..<chunkCount { (done + chunk).initialize(to: Atomic(false)) }
        ready = (0..<chunkCount).map { _ in DispatchSemaphore(value: 0) }
    }

    deinit {
        rows.deinitialize()
        rows.deallocate()
        done.deinitialize(count: chunkCount)
        done.deallocate()
    }

    /// Computes the rows of the next chunk nobody has taken, if any; returns whether there was one.
    private func computeNextChunk() -> Bool {
        let chunk = nextChunk.wrappingAdd(1, ordering: .relaxed).oldValue
        guard chunk < chunkCount else { return false }
        for index in chunk * Self.chunkSize..<min((chunk + 1) * Self.chunkSize, notes.count) {
            let note = notes[index]
            rows[index] = NoteState.savedRow(of: &note.state, id: note.key.description, scope: note.scope ?? "")
        }
        done[chunk].store(true, ordering: .releasing)
        ready[chunk].signal()
        return true
    }

    /// Calls `body` with every row, in order; `workers` threads, this one included, compute them.
    func produce(workers: Int, _ body: (SavedRow) throws -> Void) throws {
        let group = DispatchGroup()
        let helpers = notes.count < 2 * Self.chunkSize ? 0 : min(workers, 8) - 1
        for _ in 0..<helpers {
            DispatchQueue.global().async(group: group) { while self.computeNextChunk() {} }
        }
        // The helpers read the notes: they must be done before this returns, thrown error or not.
        defer {
            nextChunk.store(chunkCount, ordering: .relaxed)
            group.wait()
        }
        for chunk in 0..<chunkCount {
            // Help while the next chunk is not ready; wait only when every chunk is taken.
            while !done[chunk].load(ordering: .acquiring) {
                if !computeNextChunk() {
                    ready[chunk].wait()
                    break
                }
            }
            for index in chunk * Self.chunkSize..<min((chunk + 1) * Self.chunkSize, notes.count) {
                guard let row = rows[index] else { continue }
                rows[index] = nil
                try body(row)
            }
        }
    }
}
