import SyncModels

/// The pure decision logic of one push: which events are rejected, which are duplicates, which get which
/// `seq`. It does no I/O: the server's push service feeds it what it reads from the database inside the
/// transaction, and the in-memory server of `SyncEngineTesting` what it keeps in memory, so the two cannot
/// disagree. The steps, in this order: `init` (envelope and scope checks, duplicates within the batch) →
/// `markStored` (duplicates of stored events) → `checkVersions` → `reject` (domain rules) → `assignSeqs`.
///
/// Invariant: every event ends with exactly one outcome, and accepted events of a scope get consecutive
/// seqs starting right after the scope's head, in request order.
public struct PushPlan: Sendable {
    public enum Outcome: Hashable, Sendable {
        /// Still a candidate for insertion.
        case pending
        case accepted(seq: Int64)
        case duplicate(seq: Int64)
        case rejected(EventRejection)
        /// The same id appeared earlier in this batch, at this index; it gets that event's outcome.
        case sameAs(Int)
    }

    /// A stream within a scope.
    public struct StreamKey: Hashable, Sendable {
        public var scope: Scope
        public var stream: String

        public init(scope: Scope, stream: String) {
            self.scope = scope
            self.stream = stream
        }
    }

    public let events: [Event]
    public private(set) var outcomes: [Outcome]

    /// Checks each event's envelope (`Event.validate()`, plus what the database cannot store: U+0000 in
    /// text, a schema version past 32 bits) and scope against the token's scopes, and links repeated ids
    /// within the batch to their first occurrence.
    public init(events: [Event], allowedScopes: Set<Scope>) {
        self.events = events
        var outcomes: [Outcome] = []
        outcomes.reserveCapacity(events.count)
        var firstIndex: [EventID: Int] = [:]
        firstIndex.reserveCapacity(events.count)
        for (index, event) in events.enumerated() {
            if let first = firstIndex[event.id] {
                outcomes.append(.sameAs(first))
                continue
            }
            firstIndex[event.id] = index
            do {
                try event.validate()
            } catch let error as SyncModelsError {
                outcomes.append(.rejected(EventRejection(.eventInvalid, error.message)))
                continue
            } catch {
                outcomes.append(.rejected(EventRejection(.eventInvalid, "the event is invalid")))
                continue
            }
            // What PostgreSQL cannot store as given is refused here rather than failing the whole push.
            if event.stream.utf8.contains(0) || event.type.utf8.contains(0) {
                outcomes.append(.rejected(EventRejection(.eventInvalid, "stream and type must not contain U+0000")))
                continue
            }
            if event.schemaVersion > Int(Int32.max) {
                outcomes.append(.rejected(EventRejection(.eventInvalid, "schemaVersion must be at most \(Int32.max)")))
                continue
            }
            guard allowedScopes.contains(event.scope) else {
                outcomes.append(.rejected(EventRejection(.scopeForbidden, "scope \(event.scope) is not in the token")))
                continue
            }
            outcomes.append(.pending)
        }
        self.outcomes = outcomes
    }

    /// Indexes of the events still waiting for a decision, in request order.
    public var pendingIndexes: [Int] {
        outcomes.indices.filter { outcomes[$0] == .pending }
    }

    /// The distinct scopes of pending events, sorted: the order in which their head rows are locked.
    public var pendingScopes: [Scope] {
        Array(Set(pendingIndexes.map { events[$0].scope })).sorted()
    }

    /// The ids of pending events (to look up already stored ones).
    public var pendingIDs: [EventID] {
        pendingIndexes.map { events[$0].id }
    }

    /// Marks pending events whose id is already stored as duplicates with their original seq.
    public mutating func markStored(_ stored: [EventID: Int64]) {
        for index in pendingIndexes {
            if let seq = stored[events[index].id] { outcomes[index] = .duplicate(seq: seq) }
        }
    }

    /// The streams whose versions `checkVersions` needs: those of pending events that are not commutative.
    public func versionCheckedStreams(isCommutative: (String) -> Bool) -> [StreamKey] {
        var keys: Set<StreamKey> = []
        for index in pendingIndexes where !isCommutative(events[index].type) {
            keys.insert(StreamKey(scope: events[index].scope, stream: events[index].stream))
        }
        return Array(keys)
    }

    /// Optimistic concurrency: a pending, non-commutative event whose stream already holds a version at
    /// least as high as its `streamVersion` is rejected with `conflict.version` and the current version.
    /// Events are taken in request order, so a batch may extend a stream several versions at once.
    /// - Returns: the new version of every stream an event will extend (to store with the events).
    public mutating func checkVersions(current: [StreamKey: Int64], isCommutative: (String) -> Bool) -> [StreamKey:
        Int64]
    {
        var versions = current
        var changed: [StreamKey: Int64] = [:]
        for index in pendingIndexes where !isCommutative(events[index].type) {
            let event = events[index]
            let key = StreamKey(scope: event.scope, stream: event.stream)
            let now = versions[key] ?? 0
            if event.streamVersion <= now {
                outcomes[index] = .rejected(
                    EventRejection(
                        .conflictVersion,
                        "stream \(event.stream) is at version \(now); streamVersion \(event.streamVersion) is stale",
                        currentVersion: now))
            } else {
                versions[key] = event.streamVersion
                changed[key] = event.streamVersion
            }
        }
        return changed
    }

    /// Rejects one pending event (a domain rule's decision).
    public mutating func reject(_ index: Int, _ rejection: EventRejection) {
        precondition(outcomes[index] == .pending, "only pending events can be rejected")
        outcomes[index] = .rejected(rejection)
    }

    /// Accepts every pending event, giving each scope's events consecutive seqs after `heads[scope]`.
    /// - Returns: the new head of each scope that received events.
    public mutating func assignSeqs(heads: [Scope: Int64]) -> [Scope: Int64] {
        var next = heads
        var newHeads: [Scope: Int64] = [:]
        for index in pendingIndexes {
            let scope = events[index].scope
            let seq = (next[scope] ?? 0) + 1
            next[scope] = seq
            newHeads[scope] = seq
            outcomes[index] = .accepted(seq: seq)
        }
        return newHeads
    }

    /// Indexes of accepted events, in request order.
    public var acceptedIndexes: [Int] {
        outcomes.indices.filter {
            if case .accepted = outcomes[$0] { return true }
            return false
        }
    }

    /// One result per event, in request order. A repeated id gets its first occurrence's result, with
    /// `accepted` reported as `duplicate` (the first one was the insertion).
    /// - Precondition: no event is still pending.
    public var results: [PushResult] {
        events.indices.map { index in
            let id = events[index].id
            switch outcomes[index] {
            case .pending:
                preconditionFailure("results read before every event was decided")
            case .accepted(let seq):
                return .accepted(id, seq: seq)
            case .duplicate(let seq):
                return .duplicate(id, seq: seq)
            case .rejected(let rejection):
                return .rejected(id, rejection)
            case .sameAs(let first):
                switch outcomes[first] {
                case .accepted(let seq), .duplicate(let seq): return .duplicate(id, seq: seq)
                case .rejected(let rejection): return .rejected(id, rejection)
                case .pending, .sameAs: preconditionFailure("a first occurrence is never pending or a repeat")
                }
            }
        }
    }
}
