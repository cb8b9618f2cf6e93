import Foundation
import GRDB
import SyncModels

extension EventStore {
    /// What `applyConfirmed` did with a page.
    public struct ConfirmedPageResult: Sendable, Hashable {
        /// Events new to this replica, inserted and applied.
        public var inserted: Int
        /// Local pending events the server confirmed (they only got their `seq`).
        public var confirmedLocal: Int
        /// Events already confirmed here (a repeated page).
        public var alreadyKnown: Int
        /// Events folded on arrival: applied to the projections' state and snapshot, not logged (see
        /// `applySyncResponse(…foldThrough:…)`).
        public var folded: Int

        public init(inserted: Int = 0, confirmedLocal: Int = 0, alreadyKnown: Int = 0, folded: Int = 0) {
            self.inserted = inserted
            self.confirmedLocal = confirmedLocal
            self.alreadyKnown = alreadyKnown
            self.folded = folded
        }
    }

    /// What `applySyncResponse` did with one answer of the server.
    public struct SyncResponseOutcome: Sendable, Hashable {
        /// How many pending events the acknowledgements confirmed (what `markConfirmed` returns).
        public var acknowledged: Int
        /// The pending events the server rejected, now marked and rolled back out of every projection (what
        /// `markRejected` returns).
        public var rolledBack: [StoredEvent]
        /// What the pulled page did (what `applyConfirmed` returns).
        public var pulled: ConfirmedPageResult
        /// The page did not follow the stored cursor (`follows`): folded events held in memory were lost and
        /// the cursor went back to before them, or something else moved it. The page was not applied (the
        /// acknowledgements and rejections were); pull again from the stored cursor.
        public var rewound: Bool

        public init(
            acknowledged: Int = 0, rolledBack: [StoredEvent] = [], pulled: ConfirmedPageResult = .init(),
            rewound: Bool = false
        ) {
            self.acknowledged = acknowledged
            self.rolledBack = rolledBack
            self.pulled = pulled
            self.rewound = rewound
        }
    }

    /// Applies one answer of the server — acknowledgements of pushed events, rejections, the pulled page and
    /// the cursor after it — in one transaction, so the store holds either all of the answer or none of it:
    /// a crash at any instant never leaves pushed events confirmed without the page that came with them, or a
    /// rejection recorded without its rollback, or a cursor past events that were not applied.
    ///
    /// Inside the transaction, in this order (each as `markConfirmed`, `markRejected` and `applyConfirmed`
    /// do it alone): pending events in `acknowledged` get their `seq`; pending events in `rejected` are
    /// marked rejected and their streams re-derived without them in every projection; the page is inserted
    /// and applied; the cursor is stored. After the commit, observers get the same changes those three calls
    /// publish: `.rejected` with the rolled-back events, then `.confirmed` with the inserted ones.
    ///
    /// With `deferProjections`, projections that can (`BufferingProjection`) take the page into memory and
    /// write their tables later, when `flushProjections` is called: a long pull then saves each record once
    /// per flush rather than once per page. The log, the cursor and the checkpoints are committed as always,
    /// so a crash loses nothing (the projections catch up from their checkpoints on open); until the flush,
    /// readers of those tables see them as they were.
    ///
    /// `also` writes the caller's own records of the answer (a sync journal) in the same transaction, after
    /// the rest, with what the answer did: one commit per answer instead of two.
    ///
    /// `payloads`, when given, holds by index the bytes of the pulled events' payloads as they came, for those
    /// that are already canonical (`JSONWriter.isCanonical`, checked by the caller's decoder): the log stores
    /// them instead of writing the payload again. Nil entries are written from the payload as usual.
    ///
    /// `positions` gives the log positions of the events the caller pushed (`StoredEvent.position`), by id:
    /// their acknowledgements are then found by position, the table's own key, instead of through the index
    /// of pending ids.
    ///
    /// `foldThrough` gives, per scope, the stable point among the other replicas (`othersStable`): with
    /// projections that all fold on arrival (`ArrivalFoldingProjection`), pulled events of other replicas at
    /// or below it, of streams with nothing in the log (pending or not), are folded on arrival: applied to
    /// the projections' state and snapshot alike and never logged, as a stable prune right after the pull
    /// would leave them (see `EventStore+FoldOnArrival.swift`). Call `purgeFolded()` once the pull has
    /// reached the head.
    ///
    /// `purged` (from an answer to a read from position 0) is added to the scopes' checksums (see
    /// `PullResponse.purged`).
    ///
    /// `follows`, when given, is the cursor the page was asked from (empty for none): when the stored cursor
    /// is another one (folded events held in memory were lost and the cursor went back to before them), the
    /// page is not applied and the outcome says `rewound`.
    /// - Throws: `EventStoreError` `event.invalid` for a pulled event without `seq` or with a broken envelope,
    ///   or the database's error; nothing of the answer is applied then.
    @discardableResult
    public func applySyncResponse(
        acknowledged: [EventID: Int64], rejected: [EventID: StoredEvent.Rejection], pulled: [Event],
        payloads: [Data?] = [], cursor: String?, deferProjections: Bool = false, positions: [EventID: Int64] = [:],
        foldThrough: [Scope: Int64] = [:], follows: String? = nil, purged: [Scope: Int64] = [:],
        also: (@Sendable (SyncResponseOutcome, Database) throws -> Void)? = nil
    ) async throws -> SyncResponseOutcome {
        // Read here, in the caller's task: GRDB runs the closure on its writer queue, where task locals are
        // not visible.
        let fault = Self.syncResponseFault
        let (outcome, inserted) = try await database.writer.write { db in
            let acknowledgedCount = try self.markConfirmed(acknowledged, positions: positions, db)
            try fault?(.acknowledged)
            let rolledBack = try self.markRejected(rejected, db)
            try fault?(.rejectedRolledBack)
            try self.rewindIfFoldedLost(db)
            if let follows, try (Self.meta("cursor", db) ?? "") != follows {
                try Self.trimOutboxMarks(db)
                let outcome = SyncResponseOutcome(
                    acknowledged: acknowledgedCount, rolledBack: rolledBack, rewound: true)
                try also?(outcome, db)
                return (outcome, [StoredEvent]())
            }
            try Self.applyPurgedChecksums(purged, db)
            let (pulledResult, inserted) = try self.applyConfirmed(
                pulled, payloads: payloads, cursor: cursor, db, deferSaves: deferProjections, foldThrough: foldThrough,
                fault: fault)
            try Self.trimOutboxMarks(db)
            let outcome = SyncResponseOutcome(
                acknowledged: acknowledgedCount, rolledBack: rolledBack, pulled: pulledResult)
            try also?(outcome, db)
            return (outcome, inserted)
        }
        publish(.rejected, outcome.rolledBack)
        publish(.confirmed, inserted)
        return outcome
    }

    /// A point inside `applySyncResponse`'s transaction where `syncResponseFault` is called.
    public enum SyncResponseStep: Sendable, Hashable, CaseIterable {
        /// The acknowledged events have their `seq`.
        case acknowledged
        /// The rejected events are marked and rolled back out of the projections.
        case rejectedRolledBack
        /// The pulled events are inserted, not yet applied to projections.
        case pulledInserted
        /// Everything is applied except the cursor.
        case beforeCursor
    }

    /// Test hook for crash tests: when set, `applySyncResponse` calls it at each `SyncResponseStep` inside
    /// its transaction, and an error it throws aborts the transaction there, as a crash at that instant
    /// would (a crash loses the uncommitted transaction; the throw rolls it back).
    ///
    /// A task local rather than a stored property or an initializer parameter, because it is the least
    /// intrusive: no store carries it, it applies only inside the test's `withValue` scope (tests running in
    /// parallel never see each other's faults, even on the same store), and production pays one task-local
    /// lookup per server answer plus a nil check per step. Public so that the tests of packages built on the
    /// store (the engine's crash tests) set it without reaching into the store's internals; never set it in
    /// an app. Read before entering the transaction and passed
    /// in (see `applySyncResponse`). If a fault fires after the pulled page moved the in-memory clock, the
    /// clock stays ahead of the stored one, which is harmless: HLCs only need to never go back.
    @TaskLocal public static var syncResponseFault: (@Sendable (SyncResponseStep) throws -> Void)?

    /// Applies one page of server events and the cursor that follows it, in one transaction: new events are
    /// inserted as confirmed and applied to projections; a local pending event coming back just gets its
    /// `seq`; events already confirmed are skipped. The clock moves past the page's HLCs.
    /// - Throws: `EventStoreError` `event.invalid` for an event without `seq` or with a broken envelope;
    ///   nothing of the page is applied then.
    @discardableResult
    public func applyConfirmed(_ page: [Event], cursor: String?) async throws -> ConfirmedPageResult {
        let (result, inserted) = try await database.writer.write { db in
            try self.applyConfirmed(page, cursor: cursor, db)
        }
        publish(.confirmed, inserted)
        return result
    }

    /// `applyConfirmed(_:cursor:)` inside the caller's transaction; returns the inserted events for the
    /// caller to publish after the commit. `fault` is `syncResponseFault`, when applying a sync response.
    func applyConfirmed(
        _ page: [Event], payloads: [Data?] = [], cursor: String?, _ db: Database, deferSaves: Bool = false,
        foldThrough: [Scope: Int64] = [:], fault: (@Sendable (SyncResponseStep) throws -> Void)? = nil
    ) throws -> (ConfirmedPageResult, [StoredEvent]) {
        let positionBefore = try Self.lastPosition(db)
        let intake = try logConfirmed(page, payloads: payloads, foldThrough: foldThrough, db)
        if intake.result.inserted < page.count {
            // SQLite takes an AUTOINCREMENT position before it finds the event known, and keeps it taken: give
            // back the positions no row got, so the next page starts where the last row is (a buffering
            // projection checks that nothing came in between). None was ever issued: none is reused.
            let issued = max(positionBefore, intake.inserted.last?.position ?? 0)
            try db.cachedStatement(sql: "UPDATE sqlite_sequence SET seq = ?1 WHERE name = 'events' AND seq > ?1")
                .execute(arguments: [issued])
        }
        try raiseVersions(intake.versions, after: positionBefore, deferSaves: deferSaves, db)
        try Self.count(.confirmed, intake.result.inserted, db)
        try Self.addChecksums(intake.checksums, db)
        try fault?(.pulledInserted)
        if let newest = page.map(\.hlc).max() {
            clock.receive(newest)
            try Self.setMeta("hlc", clock.last.description, db)
        }
        // Folded first: a stream's logged events come after its folded ones in the page, and applying those
        // copies the state that holds the folded ones into the snapshot.
        try applyFolded(intake.folded, deferSaves: deferSaves, cursorBefore: try Self.meta("cursor", db), db)
        try Self.holdFoldedChecksums(intake.checksums.filter { $0.value.pruned != 0 }.mapValues(\.pruned), db)
        try applyToProjections(intake.inserted, after: positionBefore, db, deferSaves: deferSaves)
        try replay(streams: intake.restoredStreams, db)
        try fault?(.beforeCursor)
        if let cursor { try Self.setMeta("cursor", cursor, db) }
        try settleFoldedCursor(db)
        return (intake.result, intake.inserted)
    }

    /// What `logConfirmed` did with a page, event by event, for the rest of `applyConfirmed`.
    private struct ConfirmedPageIntake {
        /// The counts `applyConfirmed` returns.
        var result = ConfirmedPageResult()
        /// The events inserted into the log, in page order.
        var inserted: [StoredEvent] = []
        /// The events folded on arrival (position 0), in page order.
        var folded: [StoredEvent] = []
        /// Streams of events that were rejected here and are confirmed now: to be replayed with them.
        var restoredStreams: Set<String> = []
        /// Each stream's highest version in the inserted and folded events, with its scope ("" when the
        /// stream's events name more than one).
        var versions: [String: (version: Int64, scope: String)] = [:]
        /// Per scope, what the inserted and folded events add to the checksums.
        var checksums: [String: ChecksumDelta] = [:]

        /// Raises `event`'s stream in `versions` to its version.
        mutating func raise(_ event: Event) {
            if let known = versions[event.stream] {
                versions[event.stream] = (
                    max(known.version, event.streamVersion), known.scope == event.scope.name ? known.scope : ""
                )
            } else {
                versions[event.stream] = (event.streamVersion, event.scope.name)
            }
        }
    }

    /// The first phase of `applyConfirmed`: checks each event of `page` and, in page order, folds it (when
    /// `foldableIndices` says so), inserts it as confirmed, or, when its id is in the log, confirms it there
    /// (`confirmKnown`).
    /// - Throws: `EventStoreError` `event.invalid` for an event without `seq` or with a broken envelope.
    private func logConfirmed(
        _ page: [Event], payloads: [Data?], foldThrough: [Scope: Int64], _ db: Database
    ) throws -> ConfirmedPageIntake {
        var intake = ConfirmedPageIntake()
        let foldIndices = try foldableIndices(of: page, through: foldThrough, db)
        var insert = try EventRowInsert(db, ifNew: true)
        for (index, event) in page.enumerated() {
            guard let seq = event.seq else {
                throw EventStoreError(code: "event.invalid", message: "a confirmed event has no seq")
            }
            do {
                try event.validate()
            } catch let error as SyncModelsError {
                throw EventStoreError.from(error)
            }
            // Most pulled events are new: insert first, and look at the row only when the id was there.
            let given = index < payloads.count ? payloads[index] : nil
            let payload = given ?? PayloadCodec.encode(event)
            if foldIndices.contains(index) {
                // Into the snapshot, never the log: applied, and pruned at once.
                let checksum = EventChecksum.contribution(of: event, payload: payload)
                intake.checksums[event.scope.name, default: ChecksumDelta()].applied &+= checksum
                intake.checksums[event.scope.name, default: ChecksumDelta()].pruned &+= checksum
                intake.checksums[event.scope.name, default: ChecksumDelta()].prunedThrough = max(
                    intake.checksums[event.scope.name, default: ChecksumDelta()].prunedThrough, seq)
                intake.folded.append(
                    StoredEvent(position: 0, event: event, status: .confirmed, payloadBytes: payload))
                intake.raise(event)
                intake.result.folded += 1
                continue
            }
            if let position = try insert(event, payload: payload, status: .confirmed, db) {
                intake.checksums[event.scope.name, default: ChecksumDelta()].applied &+= insert.lastChecksum
                intake.checksums[event.scope.name, default: ChecksumDelta()].held &+= insert.lastChecksum
                intake.inserted.append(
                    StoredEvent(position: position, event: event, status: .confirmed, payloadBytes: payload))
                intake.raise(event)
                intake.result.inserted += 1
                continue
            }
            switch try confirmKnown(event, seq: seq, db) {
            case .confirmed:
                intake.result.alreadyKnown += 1
            case .rejected:
                intake.result.confirmedLocal += 1
                // The server's word wins: an event refused earlier but accepted now takes effect again.
                intake.restoredStreams.insert(event.stream)
            case .pending:
                intake.result.confirmedLocal += 1
            }
        }
        return intake
    }

    /// Confirms `event`, whose id the log already holds, and returns the status its row had: a confirmed row
    /// gets the time the server received the event, if it had none (it was confirmed from a push result
    /// earlier); any other gets `seq`, that time and its status confirmed, its rejection cleared.
    private func confirmKnown(_ event: Event, seq: Int64, _ db: Database) throws -> SyncStatus {
        let existing = try Row.fetchOne(
            db.cachedStatement(sql: "SELECT status FROM events WHERE scope = ? AND event_id = ?"),
            arguments: [event.scope.name, event.id.description])
        let status = existing.flatMap { SyncStatus(rawValue: $0["status"]) } ?? .pending
        if status == .confirmed {
            try db.cachedStatement(
                sql: "UPDATE events SET received_at = ? WHERE scope = ? AND event_id = ? AND received_at IS NULL"
            ).execute(
                arguments: [event.receivedAt.map(RFC3339.string(from:)), event.scope.name, event.id.description])
            return status
        }
        try db.cachedStatement(
            sql: """
                UPDATE events SET status = 'confirmed', seq = ?, received_at = ?, reject_code = NULL,
                    reject_message = NULL
                WHERE scope = ? AND event_id = ?
                """
        ).execute(
            arguments: [seq, event.receivedAt.map(RFC3339.string(from:)), event.scope.name, event.id.description])
        return status
    }

    /// Raises the streams of a page inserted after `positionBefore` to `versions`: one update per stream, not
    /// one per event; none until the projections flush when their saves are deferred too
    /// (`DeferredVersions`).
    private func raiseVersions(
        _ versions: [String: (version: Int64, scope: String)], after positionBefore: Int64, deferSaves: Bool,
        _ db: Database
    ) throws {
        if deferSaves {
            try deferVersions(versions, after: positionBefore, db)
        } else {
            let raise = try StreamVersionRaise(db)
            for (stream, held) in versions {
                try raise(stream, in: held.scope, to: held.version)
            }
        }
    }

    /// Marks pending events as rejected by the server: keeps them (visible, with code and message), removes
    /// their effects from every projection by re-deriving their streams without them, and notifies.
    /// Events that are not pending (unknown, already confirmed or rejected) are left as they are.
    /// - Returns: the events that were rolled back.
    @discardableResult
    public func markRejected(_ rejections: [EventID: StoredEvent.Rejection]) async throws -> [StoredEvent] {
        let rolledBack = try await database.writer.write { db in try self.markRejected(rejections, db) }
        publish(.rejected, rolledBack)
        return rolledBack
    }

    /// `markRejected(_:)` inside the caller's transaction; the caller publishes after the commit.
    func markRejected(_ rejections: [EventID: StoredEvent.Rejection], _ db: Database) throws -> [StoredEvent] {
        var rolledBack: [StoredEvent] = []
        for (id, rejection) in rejections {
            guard
                let row = try Row.fetchOne(
                    db, sql: "SELECT \(StoredEvent.columns) FROM events WHERE event_id = ? AND status = 'pending'",
                    arguments: [id.description])
            else { continue }
            // The server lost (or never had) a blob the event refers to: upload it again and keep the event.
            if rejection.code == Self.blobMissingCode, try Self.requeueBlobs(ofPending: row["position"], db) {
                continue
            }
            try db.execute(
                sql: """
                    UPDATE events SET status = 'rejected', reject_code = ?, reject_message = ?
                    WHERE event_id = ? AND status = 'pending'
                    """,
                arguments: [rejection.code, rejection.message, id.description])
            var event = try StoredEvent(row: row)
            event.status = .rejected
            event.rejection = rejection
            rolledBack.append(event)
        }
        try replay(streams: Set(rolledBack.map(\.event.stream)), db)
        return rolledBack
    }

    /// The synchronous-looking convenience for one code and message shared by several events.
    @discardableResult
    public func markRejected(_ ids: [EventID], code: String, message: String) async throws -> [StoredEvent] {
        try await markRejected(
            Dictionary(
                ids.map { ($0, StoredEvent.Rejection(code: code, message: message)) }, uniquingKeysWith: { a, _ in a }))
    }
}

extension EventStore {
    /// Records the server's acknowledgement of pushed events (`accepted` or `duplicate` with their `seq`),
    /// so they leave the outbox at once instead of waiting for the pull that brings them back. Events that
    /// are not pending are left as they are.
    /// - Returns: how many events were confirmed.
    @discardableResult
    public func markConfirmed(_ seqs: [EventID: Int64]) async throws -> Int {
        guard !seqs.isEmpty else { return 0 }
        return try await database.writer.write { db in try self.markConfirmed(seqs, db) }
    }

    /// `markConfirmed(_:)` inside the caller's transaction; an event whose position `positions` gives is
    /// found by it.
    func markConfirmed(_ seqs: [EventID: Int64], positions: [EventID: Int64] = [:], _ db: Database) throws -> Int {
        var confirmed = 0
        for (id, seq) in seqs {
            if let position = positions[id] {
                try db.cachedStatement(
                    sql: "UPDATE events SET status = 'confirmed', seq = ? WHERE position = ? AND status = 'pending'"
                ).execute(arguments: [seq, position])
            } else {
                try db.cachedStatement(
                    sql: "UPDATE events SET status = 'confirmed', seq = ? WHERE event_id = ? AND status = 'pending'"
                ).execute(arguments: [seq, id.description])
            }
            confirmed += db.changesCount
        }
        return confirmed
    }

    /// Forgets the pull cursor, so the next pull starts from the beginning of what the server retains
    /// (after `reset.required`). Pending events and local state are kept.
    public func resetCursor() async throws {
        try await database.writer.write { db in
            try db.execute(sql: "DELETE FROM store_meta WHERE key = 'cursor'")
        }
    }
}
