import Foundation
import Logging
import NotesDomain
import NotesServer
import SyncModels
import SyncProtocol
import SyncServer
import SyncServerTesting
import SyncTestSupport
import Testing

/// Server compaction with the Notes folder, on real PostgreSQL: replicas that pull through folds, one that
/// comes back from far behind, and a fresh one all end with the state of the unfolded history.
@Suite struct CompactionTests {
    static let scope = "c"

    /// One replica of the scope as a test drives it: its notes' states, its cursor, what it has pushed.
    struct Replica {
        var id: ReplicaID
        var states: [String: NoteState] = [:]
        var cursor = ScopeCursor()
        var counter: UInt64 = 0
        /// The cursor it held when it made its oldest event not yet answered (what the engine reports).
        var acknowledged: ScopeCursor?

        /// Asks the server to leave its own events out of pages (`PullRequest.exclude`), as the engine does,
        /// except while bootstrapping after a reset.
        var excludeOwn = false
        var bootstrapping = false

        init(_ index: UInt64, excludeOwn: Bool = false) {
            id = ReplicaID(high: 0xC0_0000 + index, low: index)
            self.excludeOwn = excludeOwn
        }

        /// What an app shows: live notes (a deleted one may be a tombstone here and gone elsewhere).
        var views: [String: NoteView] { states.filter { $0.value.isLive }.mapValues(\.view) }

        /// Forgets everything, as a device told to reset does.
        mutating func reset() {
            states = [:]
            cursor = ScopeCursor()
            bootstrapping = true
        }

        /// Pulls every page up to the head, merging snapshots and applying events, and reports progress.
        mutating func pullAll(_ server: TestServer, limit: Int = 50) async throws -> [Event] {
            var received: [Event] = []
            while true {
                let page = try await server.pull(
                    PullRequest(
                        cursor: cursor, limit: limit, replica: id, acknowledged: acknowledged ?? cursor,
                        exclude: excludeOwn && !bootstrapping ? id : nil),
                    scopes: [CompactionTests.scope])
                if excludeOwn && !bootstrapping {
                    #expect(
                        page.events.allSatisfy { $0.dot.replica != id || $0.type == "note.snapshot" },
                        "of its own events, only folded history comes back")
                }
                for event in page.events {
                    states[event.stream, default: NoteState()].apply(
                        type: event.type, payload: event.payload, hlc: event.hlc, dot: event.dot)
                }
                received += page.events
                cursor = try ScopeCursor(encoded: page.cursor)
                if !page.hasMore {
                    bootstrapping = false
                    return received
                }
            }
        }
    }

    static func compact(_ server: TestServer) async throws -> CompactionReport {
        var configuration = ServerConfiguration()
        configuration.databaseURL = server.database.url.urlString
        configuration.compaction.batchEvents = 37  // many windows, streams split across them
        var logger = Logger(label: "compaction-test")
        logger.logLevel = .warning
        return try await SyncServerApp.compact(
            configuration: configuration, domain: NotesServerDomain(), scopes: nil, vacuum: true, logger: logger)
    }

    @Test(arguments: [11, 12, 13] as [UInt64])
    func replicasAtAnyCursorAndAFreshOneConvergeOnTheUnfoldedState(seed: UInt64) async throws {
        try await TestServer.run(domain: NotesServerDomain(quota: 100)) { server in
            var random = SplitMix64(seed: seed)
            // Odd seeds run the replicas as the engine does: their own events are not served back to them.
            var replicas = (1...3).map { Replica(UInt64($0), excludeOwn: seed % 2 == 1) }
            // Every accepted event, applied in seq order: the state of the history nobody folded.
            var oracle: [String: NoteState] = [:]
            let notes = (0..<6).map { _ in NoteID(uuid: UUID(uuid: NoteEditor.randomUUID(&random))).stream }
            var pushed = 0
            var folds: [CompactionReport] = []
            var stale = Replica(9)
            for step in 0..<420 {
                let index = Int.random(in: 0..<replicas.count, using: &random)
                if Int.random(in: 0..<4, using: &random) == 0 {
                    _ = try await replicas[index].pullAll(server)
                } else {
                    let stream = notes.randomElement(using: &random)!
                    var state = replicas[index].states[stream] ?? NoteState()
                    let edit: NoteEdit =
                        state.created
                        ? NoteEdit.allCases.filter { $0 != .create }.randomElement(using: &random)! : .create
                    guard
                        let payload = NoteEditor.payload(
                            edit, state: &state, replica: replicas[index].id, using: &random)
                    else { continue }
                    replicas[index].counter += 1
                    let event = EventFixtures.event(
                        scope: try Scope(Self.scope), stream: stream, version: Int64(step + 1),
                        type: payload.type.rawValue, payload: payload.json, replica: replicas[index].id)
                    let results = try await server.push([event], scopes: [Self.scope], replica: replicas[index].id)
                    #expect(results.map(\.status) == [.accepted], "\(results)")
                    state.apply(payload, hlc: event.hlc, dot: event.dot)
                    replicas[index].states[stream] = state
                    oracle[stream, default: NoteState()].apply(payload, hlc: event.hlc, dot: event.dot)
                    pushed += 1
                }
                if step == 40 {
                    _ = try await stale.pullAll(server)
                    _ = try await stale.pullAll(server)  // acknowledges what the first brought
                }
                if step % 140 == 139 { folds.append(try await Self.compact(server)) }
            }
            // Folding needs every active replica to have acknowledged: it folded only up to the stable point.
            let folded = folds.flatMap(\.scopes).reduce(0) { $0 + $1.foldedEvents }
            #expect(folded > 0, "compaction folded something")
            #expect(folds.flatMap(\.scopes).allSatisfy { $0.compactedThrough <= $0.stable })
            // Everyone catches up, then one more fold takes the stable point to the head.
            for index in replicas.indices { _ = try await replicas[index].pullAll(server) }
            for index in replicas.indices { _ = try await replicas[index].pullAll(server) }
            // The replica last seen at step 40 has held the stable point back so far; a month of silence puts
            // it past the eviction horizon.
            try await server.database.execute(
                "UPDATE replica_progress SET seen_at = now() - interval '30 days' WHERE replica = \(stale.id.description)"
            )
            let last = try await Self.compact(server)
            let rows = try await server.database.integers("SELECT count(*) FROM events")[0]
            #expect(rows < Int64(pushed) / 2, "\(rows) rows left of \(pushed)")
            #expect(last.bytesAfter["events"] != nil && last.bytesBefore["database"] != nil)
            let expected = oracle.filter { $0.value.isLive }.mapValues(\.view)
            for replica in replicas { #expect(replica.views == expected, "replica \(replica.id)") }
            // The replica back from its month away is behind what the fold purged: it must reset, then pulls
            // the folded log like a fresh one.
            let refused = try await server.send(
                .get, TestServer.uri(PullRequest(cursor: stale.cursor, replica: stale.id)),
                headers: try await server.bearer([Self.scope]))
            #expect(refused.status == .gone)
            #expect(try server.error(refused).code == .resetRequired)
            stale.reset()
            let staleEvents = try await stale.pullAll(server)
            #expect(stale.views == expected)
            var fresh = Replica(10)
            let freshEvents = try await fresh.pullAll(server)
            #expect(fresh.views == expected)
            #expect(freshEvents.count <= notes.count, "one snapshot per note: \(freshEvents.count)")
            #expect(Set(freshEvents.map(\.stream)).count == freshEvents.count, "at most one event per note")
            #expect(staleEvents.count == freshEvents.count)
            // Snapshots sit at the seq of the last event they fold: seqs still increase, the head is unchanged.
            let seqs = freshEvents.compactMap(\.seq)
            #expect(seqs == seqs.sorted())
            #expect(try await server.database.integers("SELECT head FROM scopes") == [Int64(pushed)])
            // Edits after the fold apply on top of snapshots everywhere.
            var state = fresh.states[notes[0]] ?? NoteState()
            let payload = NotePayload.titleSet(.init(title: "after the fold"))
            let event = EventFixtures.event(
                scope: try Scope(Self.scope), stream: notes[0], type: payload.type.rawValue, payload: payload.json,
                replica: fresh.id)
            _ = try await server.push([event], scopes: [Self.scope], replica: fresh.id)
            state.apply(payload, hlc: event.hlc, dot: event.dot)
            _ = try await replicas[0].pullAll(server)
            #expect(replicas[0].states[notes[0]]?.view.title == "after the fold")
        }
    }

    /// An event whose push answer was lost stays in its sender's outbox; the sender's acknowledged position
    /// holds the stable point below it, so it is not folded and its retry is answered as a duplicate.
    @Test func anUnansweredPushIsNotFoldedAndItsRetryIsADuplicate() async throws {
        try await TestServer.run(domain: NotesServerDomain(quota: 100)) { server in
            var sender = Replica(1)
            var reader = Replica(2)
            let stream = NoteID().stream
            var state = NoteState()
            var events: [Event] = []
            var random = SplitMix64(seed: 5)
            for edit in [NoteEdit.create, .title, .typing, .tagAdd, .typing, .title] {
                let payload = NoteEditor.payload(edit, state: &state, replica: sender.id, using: &random)!
                let event = EventFixtures.event(
                    scope: try Scope(Self.scope), stream: stream, type: payload.type.rawValue, payload: payload.json,
                    replica: sender.id)
                state.apply(payload, hlc: event.hlc, dot: event.dot)
                events.append(event)
            }
            // The first three are answered; the last three were committed but their answer was lost.
            _ = try await server.push(Array(events[..<3]), scopes: [Self.scope], replica: sender.id)
            _ = try await sender.pullAll(server)
            sender.acknowledged = sender.cursor
            _ = try await server.push(Array(events[3...]), scopes: [Self.scope], replica: sender.id)
            _ = try await sender.pullAll(server)
            _ = try await reader.pullAll(server)
            _ = try await reader.pullAll(server)  // its second request acknowledges what the first brought
            let report = try await Self.compact(server)
            #expect(report.scopes.first?.stable == 3)
            let retry = try await server.push(Array(events[3...]), scopes: [Self.scope], replica: sender.id)
            #expect(retry.map(\.status) == [.duplicate, .duplicate, .duplicate])
            #expect(try await server.database.integers("SELECT seq FROM folded_events") == [3])
            #expect(try await server.database.integers("SELECT seq FROM events ORDER BY seq") == [4, 5, 6])
            var fresh = Replica(3)
            _ = try await fresh.pullAll(server)
            #expect(fresh.views[stream] == state.view)
        }
    }
}

extension CompactionTests {
    /// Folding stable history purges: a deleted note's stream goes, deleted text leaves no tombstones, and
    /// `retained_from_seq` rises past them, so a replica that missed the deletes is told to reset (its pulls
    /// and its pushes), while a fresh one reads from the start.
    @Test func purgingDropsDeletedNotesAndTombstonesAndRefusesReplicasThatMissedThem() async throws {
        try await TestServer.run(domain: NotesServerDomain(quota: 100)) { server in
            var writer = Replica(1)
            var behind = Replica(2)
            var random = SplitMix64(seed: 21)
            let kept = NoteID().stream
            let gone = NoteID().stream
            func push(_ stream: String, _ edits: [NoteEdit]) async throws {
                var state = writer.states[stream] ?? NoteState()
                for edit in edits {
                    guard let payload = NoteEditor.payload(edit, state: &state, replica: writer.id, using: &random)
                    else { continue }
                    let event = EventFixtures.event(
                        scope: try Scope(Self.scope), stream: stream, type: payload.type.rawValue,
                        payload: payload.json, replica: writer.id)
                    state.apply(payload, hlc: event.hlc, dot: event.dot)
                    #expect(
                        try await server.push([event], scopes: [Self.scope], replica: writer.id)[0].status == .accepted)
                }
                writer.states[stream] = state
            }
            try await push(kept, [.create] + Array(repeating: .typing, count: 6))
            try await push(gone, [.create, .typing, .tagAdd])
            // `behind` reads this far, then goes quiet.
            _ = try await behind.pullAll(server)
            _ = try await behind.pullAll(server)
            try await push(kept, Array(repeating: .erase, count: 4) + [.itemAdd, .itemAdd, .itemRemove])
            try await push(gone, [.delete])
            _ = try await writer.pullAll(server)
            _ = try await writer.pullAll(server)
            try await server.database.execute(
                "UPDATE replica_progress SET seen_at = now() - interval '30 days' WHERE replica = \(behind.id.description)"
            )
            let report = try await Self.compact(server)
            let head = try await server.database.integers("SELECT head FROM scopes")[0]
            #expect(report.scopes.first?.droppedStreams == 1)
            #expect(report.scopes.first?.retainedFromSeq == head + 1, "the last folded event of both notes is the head")
            #expect(
                try await server.database.integers("SELECT count(*) FROM folded_events") == [1],
                "only the kept note's snapshot")
            #expect(try await server.database.integers("SELECT count(*) FROM events") == [0])
            #expect(
                try await server.database.integers(
                    "SELECT count(*) FROM streams WHERE stream = \(gone)") == [0])
            // The snapshot holds no deleted text: smaller than the state of the events it folds.
            var fresh = Replica(3)
            let snapshot = try await fresh.pullAll(server)
            #expect(snapshot.count == 1)
            let folded = try #require(fresh.states[kept])
            let replayed = try #require(writer.states[kept])
            #expect(folded.view == replayed.view)
            #expect(folded.binaryEncoded.count < replayed.binaryEncoded.count)
            #expect(
                folded.body.totalCount < replayed.body.totalCount,
                "deleted text that nothing can anchor on any more is gone")
            #expect(fresh.views == writer.views)
            // `behind` is refused on pull and on push until it resets.
            let pull = try await server.send(
                .get, TestServer.uri(PullRequest(cursor: behind.cursor, replica: behind.id)),
                headers: try await server.bearer([Self.scope]))
            #expect(pull.status == .gone)
            var state = behind.states[kept] ?? NoteState()
            let payload = try #require(NoteEditor.payload(.typing, state: &state, replica: behind.id, using: &random))
            let late = EventFixtures.event(
                scope: try Scope(Self.scope), stream: kept, type: payload.type.rawValue, payload: payload.json,
                replica: behind.id)
            let body = try server.codec.encode(PushRequest(replica: behind.id, events: [late]))
            let push = try await server.send(
                .post, "/v1/push", headers: try await server.bearer([Self.scope]), body: body)
            #expect(push.status == .gone)
            #expect(try server.error(push).code == .resetRequired)
            #expect(try await server.database.integers("SELECT count(*) FROM events") == [0], "nothing committed")
            behind.reset()
            _ = try await behind.pullAll(server)
            _ = try await behind.pullAll(server)
            #expect(behind.views == writer.views)
            #expect(try await server.push([late], scopes: [Self.scope], replica: behind.id)[0].status == .accepted)
        }
    }
}

extension CompactionTests {
    /// An edit made offline against text another replica then deletes, pushed after the delete: while its
    /// author has not read past it, nothing may purge what it anchors on, even though every replica has seen
    /// the delete. A fresh device pulling the folded history must place it where the others do.
    @Test func anEditSequencedAfterAConcurrentDeleteKeepsItsAnchorThroughAPurge() async throws {
        try await TestServer.run(domain: NotesServerDomain(quota: 100)) { server in
            var writer = Replica(1)
            var offline = Replica(2)
            let stream = NoteID().stream
            func event(_ payload: NotePayload, by replica: ReplicaID) throws -> Event {
                EventFixtures.event(
                    scope: try Scope(Self.scope), stream: stream, type: payload.type.rawValue, payload: payload.json,
                    replica: replica)
            }
            func push(_ payload: NotePayload, by replica: inout Replica) async throws {
                var state = replica.states[stream] ?? NoteState()
                let made = try event(payload, by: replica.id)
                state.apply(payload, hlc: made.hlc, dot: made.dot)
                replica.states[stream] = state
                #expect(try await server.push([made], scopes: [Self.scope], replica: replica.id)[0].status == .accepted)
            }
            try await push(.created(.init(title: "draft")), by: &writer)
            var state = writer.states[stream]!
            let typedOp = state.body.insert("abcdefgh", at: 0, replica: writer.id)
            let typed = try #require(typedOp)
            try await push(.bodyEdited(.init(ops: [typed])), by: &writer)
            _ = try await offline.pullAll(server)
            _ = try await offline.pullAll(server)
            // Offline: text typed after "d".
            var mine = offline.states[stream]!
            let insertedOp = mine.body.insert("ZZ", at: 4, replica: offline.id)
            let inserted = try #require(insertedOp)
            let edit = try event(.bodyEdited(.init(ops: [inserted])), by: offline.id)
            mine.apply(.bodyEdited(.init(ops: [inserted])), hlc: edit.hlc, dot: edit.dot)
            // Meanwhile "cdef" is deleted, and more is written.
            var theirs = writer.states[stream]!
            let erasedOp = theirs.body.remove(at: 2, count: 4, replica: writer.id)
            let erased = try #require(erasedOp)
            try await push(.bodyEdited(.init(ops: [erased])), by: &writer)
            for index in 0..<3 { try await push(.titleSet(.init(title: "title \(index)")), by: &writer) }
            // The offline edit arrives, made against what its author knew before the delete.
            let acknowledged = offline.cursor
            offline.acknowledged = acknowledged
            #expect(try await server.push([edit], scopes: [Self.scope], replica: offline.id)[0].status == .accepted)
            offline.states[stream] = mine
            offline.acknowledged = nil
            // Its author reads one more event (the delete) and says so; everyone else is at the head.
            _ = try await server.pull(
                PullRequest(cursor: offline.cursor, limit: 1, replica: offline.id), scopes: [Self.scope])
            var next = offline.cursor
            next.advance(try Scope(Self.scope), to: 3)
            _ = try await server.pull(PullRequest(cursor: next, limit: 1, replica: offline.id), scopes: [Self.scope])
            _ = try await writer.pullAll(server)
            _ = try await writer.pullAll(server)
            let report = try await Self.compact(server)
            #expect(
                report.scopes.first?.stable == 3 && report.scopes.first?.retainedFromSeq == 4, "purged at the delete")
            _ = try await writer.pullAll(server)
            var fresh = Replica(3)
            _ = try await fresh.pullAll(server)
            #expect(
                writer.states[stream]?.view.body.contains("ZZ") == true, "\(writer.states[stream]?.view.body ?? "")")
            #expect(fresh.views == writer.views, "the fresh device places the edit too")
        }
    }
}

extension CompactionTests {
    /// A note whose creation the quota rejected, while what its device made on it meanwhile was accepted: every
    /// replica hides it (never created), and so does the unfolded replay. Compaction drops it as it drops a
    /// deleted note, whether its stable history is one event (folded only because its type is not a creation)
    /// or several, and a fresh device reads the same notes as the replay shows.
    @Test func aNoteWhoseCreationWasRejectedIsDroppedAsTheUnfoldedReplayHidesIt() async throws {
        try await TestServer.run(domain: NotesServerDomain(quota: 1)) { server in
            var writer = Replica(1)
            var random = SplitMix64(seed: 31)
            // Every accepted event, applied in seq order: the state of the history nobody folded.
            var oracle: [String: NoteState] = [:]
            var made: [String: NoteState] = [:]
            func push(_ stream: String, _ edit: NoteEdit) async throws -> PushResult.Status {
                var state = made[stream] ?? NoteState()
                let payload = try #require(NoteEditor.payload(edit, state: &state, replica: writer.id, using: &random))
                let event = EventFixtures.event(
                    scope: try Scope(Self.scope), stream: stream, type: payload.type.rawValue, payload: payload.json,
                    replica: writer.id)
                state.apply(payload, hlc: event.hlc, dot: event.dot)
                made[stream] = state
                let status = try await server.push([event], scopes: [Self.scope], replica: writer.id)[0].status
                if status == .accepted {
                    oracle[stream, default: NoteState()].apply(payload, hlc: event.hlc, dot: event.dot)
                }
                return status
            }
            let kept = NoteID().stream
            let lone = NoteID().stream
            let edited = NoteID().stream
            #expect(try await push(kept, .create) == .accepted)
            #expect(try await push(kept, .typing) == .accepted)
            // The scope is full: both creations are rejected, the events after them accepted.
            #expect(try await push(lone, .create) == .rejected)
            #expect(try await push(lone, .pin) == .accepted)
            #expect(try await push(edited, .create) == .rejected)
            #expect(try await push(edited, .title) == .accepted)
            #expect(try await push(edited, .tagAdd) == .accepted)
            _ = try await writer.pullAll(server)
            _ = try await writer.pullAll(server)
            let expected = oracle.filter { $0.value.isLive }.mapValues(\.view)
            #expect(Array(expected.keys) == [kept], "the replay shows only the created note")
            #expect(writer.views == expected)

            let report = try await Self.compact(server)
            let head = try await server.database.integers("SELECT head FROM scopes")[0]
            #expect(head == 5)
            #expect(report.scopes.first?.droppedStreams == 2, "the lone event's stream and the longer one")
            #expect(report.scopes.first?.retainedFromSeq == head + 1, "a drop purges, as a deleted note's does")
            #expect(try await server.database.integers("SELECT count(*) FROM folded_events") == [1])
            #expect(try await server.database.integers("SELECT count(*) FROM events") == [0])
            for stream in [lone, edited] {
                #expect(
                    try await server.database.integers("SELECT count(*) FROM streams WHERE stream = \(stream)") == [0])
            }
            var fresh = Replica(3)
            let events = try await fresh.pullAll(server)
            #expect(events.map(\.stream) == [kept], "one snapshot, of the created note")
            #expect(fresh.views == expected)
        }
    }
}
