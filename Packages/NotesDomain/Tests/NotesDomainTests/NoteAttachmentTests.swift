import Foundation
import GRDB
import NotesDomain
import NotesStore
import SyncCRDT
import SyncEventStore
import SyncEventStoreTestSupport
import SyncModels
import Testing

/// Attachments of notes (issue 46): the set's element, the add-wins semantics, the stored state's formats, the
/// rules, and the client's commands.
@Suite struct NoteAttachmentTests {
    static let hash = try! BlobHash(String(repeating: "3c", count: 32))
    static let report = NoteAttachment(
        name: "Q3 report (final).pdf", blob: BlobReference(hash: hash, size: 48_213, type: "application/pdf"))
    static let a = ReplicaID(high: 1, low: 0xa)
    static let b = ReplicaID(high: 2, low: 0xb)

    // MARK: The element

    @Test func anAttachmentIsOneElementThatReadsBack() throws {
        let element = Self.report.element
        #expect(element == "\(Self.hash.hex) 48213 application/pdf Q3 report (final).pdf")
        #expect(NoteAttachment(element: element) == Self.report)
        let empty = NoteAttachment(
            name: " leading space, ünïcode 🙂", blob: BlobReference(hash: Self.hash, size: 0, type: "text/plain"))
        #expect(NoteAttachment(element: empty.element) == empty)
    }

    @Test(arguments: [
        // The hash: short, not hexadecimal, upper case (not the name the blob goes by).
        "\(String(repeating: "3c", count: 31)) 12 text/plain a.txt",
        "\(String(repeating: "zz", count: 32)) 12 text/plain a.txt",
        "\(String(repeating: "3C", count: 32)) 12 text/plain a.txt",
        // The size.
        "\(String(repeating: "3c", count: 32)) -1 text/plain a.txt",
        "\(String(repeating: "3c", count: 32)) twelve text/plain a.txt",
        "\(String(repeating: "3c", count: 32))  text/plain a.txt",
        // The media type.
        "\(String(repeating: "3c", count: 32)) 12 textplain a.txt",
        "\(String(repeating: "3c", count: 32)) 12 /plain a.txt",
        "\(String(repeating: "3c", count: 32)) 12 text/ a.txt",
        "\(String(repeating: "3c", count: 32)) 12 text/plain/x a.txt",
        // The name: empty, missing, a control character, too long.
        "\(String(repeating: "3c", count: 32)) 12 text/plain ",
        "\(String(repeating: "3c", count: 32)) 12 text/plain",
        "\(String(repeating: "3c", count: 32)) 12 text/plain a\u{7}.txt",
        "\(String(repeating: "3c", count: 32)) 12 text/plain \(String(repeating: "n", count: 256))",
        "",
    ])
    func anInvalidElementIsNoAttachment(element: String) {
        #expect(NoteAttachment(element: element) == nil)
    }

    @Test func theLongestNameIsStillOne() {
        let name = String(repeating: "n", count: 255)
        #expect(NoteAttachment(element: "\(Self.hash.hex) 12 text/plain \(name)")?.name == name)
    }

    // MARK: Add-wins

    static func hlc(_ index: UInt64, _ replica: ReplicaID) -> HLCTimestamp {
        HLCTimestamp(physical: 1_700_000_000_000 + index, counter: 0, node: replica.high)
    }

    static func added(_ attachment: NoteAttachment, _ op: ORSet<String, AddWins>.Operation) -> NotePayload {
        .attachmentAdded(.init(attachment: attachment.element, op: op))
    }

    static func removed(_ attachment: NoteAttachment, _ op: ORSet<String, AddWins>.Operation) -> NotePayload {
        .attachmentRemoved(.init(attachment: attachment.element, op: op))
    }

    @Test func aConcurrentAttachAndDetachOfTheSameFileConvergeWithTheFileAttached() {
        var onA = NoteState()
        var onB = NoteState()
        let element = Self.report.element
        let first = Self.added(Self.report, onA.attachments.add(element, replica: Self.a))
        onB.apply(first, hlc: Self.hlc(1, Self.a), dot: Dot(replica: Self.a, counter: 1))
        #expect(onA.attachmentList == [Self.report] && onB.attachmentList == [Self.report])
        // A detaches while B, not having seen that, attaches the same file again.
        let detach = Self.removed(Self.report, onA.attachments.remove(element, replica: Self.a))
        let attachAgain = Self.added(Self.report, onB.attachments.add(element, replica: Self.b))
        #expect(onA.attachmentList.isEmpty)
        onA.apply(attachAgain, hlc: Self.hlc(2, Self.b), dot: Dot(replica: Self.b, counter: 1))
        onB.apply(detach, hlc: Self.hlc(2, Self.a), dot: Dot(replica: Self.a, counter: 2))
        #expect(onA.attachmentList == [Self.report], "add wins")
        #expect(onB.attachmentList == [Self.report], "add wins")
        #expect(onA == onB)
        #expect(onA.view.attachments == [Self.report])
        // A detach that saw both adds removes it everywhere.
        let last = Self.removed(Self.report, onB.attachments.remove(element, replica: Self.b))
        onA.apply(last, hlc: Self.hlc(3, Self.b), dot: Dot(replica: Self.b, counter: 2))
        #expect(onA.attachmentList.isEmpty && onB.attachmentList.isEmpty && onA == onB)
        #expect(onA.view.attachments == nil, "absent from the view when there is none")
    }

    @Test func mergingStatesGivesTheSameAttachmentsAsApplyingTheirEvents() {
        var onA = NoteState()
        var onB = NoteState()
        let photo = NoteAttachment(name: "photo.png", blob: BlobReference(hash: Self.hash, size: 5, type: "image/png"))
        _ = onA.attachments.add(Self.report.element, replica: Self.a)
        _ = onB.attachments.add(photo.element, replica: Self.b)
        var ab = onA
        ab.merge(onB)
        var ba = onB
        ba.merge(onA)
        #expect(ab == ba && ab.attachmentList == [photo, Self.report].sorted())
        // Through a snapshot payload, as the server's compaction sends it.
        var fresh = NoteState()
        fresh.apply(.snapshot(.init(state: ab)), hlc: Self.hlc(9, Self.a), dot: Dot(replica: Self.a, counter: 9))
        #expect(fresh.attachmentList == ab.attachmentList)
    }

    // MARK: The stored state

    /// The bytes format 3 wrote: every field but the attachments, after the format byte.
    static func formatThreeBytes(_ state: NoteState) -> [UInt8] {
        var writer = BinaryWriter()
        writer.writeByte(3)
        state.created.encode(to: &writer)
        state.title.encode(to: &writer)
        state.body.encode(to: &writer)
        state.tags.encode(to: &writer)
        state.pinned.encode(to: &writer)
        state.views.encode(to: &writer)
        state.checklist.encode(to: &writer)
        state.itemText.encode(to: &writer)
        state.itemDone.encode(to: &writer)
        state.deleted.encode(to: &writer)
        return writer.bytes
    }

    @Test(arguments: [1, 2, 3] as [UInt64])
    func aNoteWithoutAttachmentsKeepsFormatThreeAndItsBytes(seed: UInt64) throws {
        let state = NoteStateEncodingTests.note(seed: seed, events: 200)
        let bytes = state.binaryEncoded
        #expect(bytes.first == 3)
        #expect(bytes == Self.formatThreeBytes(state), "the bytes readers before attachments read")
        #expect(try NoteState(stored: bytes) == state)
    }

    @Test(arguments: [1, 2, 3] as [UInt64])
    func aNoteWithAttachmentsIsFormatFourAndRoundTrips(seed: UInt64) throws {
        var state = NoteStateEncodingTests.note(seed: seed, events: 200)
        let photo = NoteAttachment(name: "photo.png", blob: BlobReference(hash: Self.hash, size: 5, type: "image/png"))
        _ = state.attachments.add(photo.element, replica: Self.a)
        _ = state.attachments.add(Self.report.element, replica: Self.b)
        let bytes = state.binaryEncoded
        #expect(bytes.first == 4)
        var attachments = BinaryWriter()
        state.attachments.encode(to: &attachments)
        #expect(bytes == [4] + Self.formatThreeBytes(state).dropFirst() + attachments.bytes, "format 3, then the set")
        let decoded = try NoteState(stored: bytes)
        #expect(decoded == state && decoded.attachmentList == [photo, Self.report].sorted())
        #expect(decoded.binaryEncoded == bytes)
        // Detached again: the set keeps the remove's context, so the note stays in format 4 and round-trips.
        _ = state.attachments.remove(photo.element, replica: Self.a)
        _ = state.attachments.remove(Self.report.element, replica: Self.a)
        #expect(state.attachmentList.isEmpty && state.binaryEncoded.first == 4)
        #expect(try NoteState(stored: state.binaryEncoded) == state)
    }

    // MARK: The rules

    @Test func theRulesRefuseAMalformedAttachment() {
        let stream = NoteID().stream
        var state = NoteState()
        let element = Self.report.element
        let add = state.attachments.add(element, replica: Self.a)
        let remove = state.attachments.remove(element, replica: Self.a)
        #expect(NoteRules.violation(Self.added(Self.report, add)) == nil)
        #expect(NoteRules.violation(Self.removed(Self.report, remove)) == nil)
        let added = Self.added(Self.report, add)
        #expect(NoteRules.violation(type: added.type.rawValue, stream: stream, payload: added.json) == nil)

        // An element that is not an attachment, as the add's field and its operation's element.
        var bad = NoteState()
        let badElement = "\(Self.hash.hex) -3 application/pdf x.pdf"
        let badAdd = NotePayload.attachmentAdded(
            .init(attachment: badElement, op: bad.attachments.add(badElement, replica: Self.a)))
        let message = NoteRules.violation(badAdd)
        #expect(message?.contains("attachment is") == true, "\(message ?? "nil")")
        #expect(NoteRules.violation(type: badAdd.type.rawValue, stream: stream, payload: badAdd.json) == message)
        // A field and an operation that disagree.
        let photo = NoteAttachment(name: "photo.png", blob: BlobReference(hash: Self.hash, size: 5, type: "image/png"))
        #expect(
            NoteRules.violation(.attachmentAdded(.init(attachment: photo.element, op: add)))
                == "op adds the attachment")
        #expect(
            NoteRules.violation(.attachmentAdded(.init(attachment: element, op: remove))) == "op adds the attachment")
        #expect(
            NoteRules.violation(.attachmentRemoved(.init(attachment: element, observed: [], op: add)))
                == "op removes the attachment")
        // A payload without its operation, or with an attachment that is not a string.
        #expect(
            NoteRules.violation(type: "note.attachmentAdded", stream: stream, payload: ["attachment": .string(element)])
                != nil)
        guard case .object(var members) = added.json else {
            Issue.record("an attachment's payload is an object")
            return
        }
        members["attachment"] = 3
        #expect(NoteRules.violation(type: "note.attachmentAdded", stream: stream, payload: .object(members)) != nil)
    }

    // MARK: The client

    @Test func attachShowsTheFileAtOnceAndItsEventWaitsForTheUpload() async throws {
        let directory = try TemporaryDirectory()
        let client = try NotesClient.open(path: directory.path("a.sqlite"))
        let id = try await client.create(scope: "team-1", title: "Quarterly")
        try await client.attach(id, name: Self.report.name, blob: Self.report.blob)
        #expect(try await client.note(id)?.attachments == [Self.report])
        let listed = try #require(try await client.attachments(id))
        #expect(listed.scope == "team-1" && listed.attachments == [Self.report])
        #expect(try await client.attachments(NoteID()) == nil)

        let pending = try await client.store.pendingEvents()
        #expect(pending.map(\.event.type) == ["note.created", "note.attachmentAdded"])
        #expect(
            try await client.store.outboxSnapshot(after: 0, limit: 100).pending.map(\.event.id)
                == [pending[0].event.id], "the attachment waits for its blob")
        let queued = try await client.store.database.writer.read { db in
            try String.fetchAll(db, sql: "SELECT scope || ' ' || hash || ' ' || size || ' ' || type FROM local_blobs")
        }
        #expect(queued == ["team-1 \(Self.hash.hex) 48213 application/pdf"])
        try await client.store.database.writer.write { db in
            try db.execute(sql: "UPDATE local_blobs SET uploaded = 1")
        }
        #expect(try await client.store.outboxSnapshot(after: 0, limit: 100).pending.count == 2)

        // The same file under the same name again: still one attachment.
        try await client.attach(id, name: Self.report.name, blob: Self.report.blob)
        #expect(try await client.note(id)?.attachments == [Self.report])
        try await client.detach(id, name: Self.report.name)
        #expect(try await client.note(id)?.attachments == nil)
        await #expect(throws: EventStoreError.self) { try await client.detach(id, name: Self.report.name) }
    }

    @Test func anInvalidAttachmentIsRefusedBeforeItIsWritten() async throws {
        let directory = try TemporaryDirectory()
        let client = try NotesClient.open(path: directory.path("a.sqlite"))
        let id = try await client.create(scope: "team-1", title: "x")
        await #expect(throws: EventStoreError.self) {
            try await client.attach(id, name: "", blob: Self.report.blob)
        }
        await #expect(throws: EventStoreError.self) {
            try await client.attach(
                id, name: "a.bin", blob: BlobReference(hash: Self.hash, size: 1, type: "not a media type"))
        }
        #expect(try await client.store.pendingEvents().count == 1)
        let queued = try await client.store.database.writer.read { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM local_blobs")
        }
        #expect(queued == 0, "nothing joined the upload queue")
    }

    @Test func twoClientsConvergeWithAddWins() async throws {
        let directory = try TemporaryDirectory()
        let (a, b) = try NotesClientTests.pair(directory)
        var seq: Int64 = 0
        let id = try await a.create(scope: "team-1", title: "Shared")
        try await a.attach(id, name: Self.report.name, blob: Self.report.blob)
        try await NotesClientTests.exchange(a, b, seq: &seq)
        #expect(try await b.note(id)?.attachments == [Self.report])
        // Concurrently: a detaches, b attaches the same file under the same name again.
        try await a.detach(id, name: Self.report.name)
        try await b.attach(id, name: Self.report.name, blob: Self.report.blob)
        try await NotesClientTests.exchange(a, b, seq: &seq)
        try await NotesClientTests.exchange(b, a, seq: &seq)
        #expect(try await a.note(id)?.attachments == [Self.report])
        #expect(try await b.note(id)?.attachments == [Self.report])
    }
}
