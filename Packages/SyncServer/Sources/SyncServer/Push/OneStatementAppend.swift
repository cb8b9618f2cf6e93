import Foundation
import Logging
import PostgresNIO
import SyncModels
import SyncProtocol

/// A push, or a group of pushes, appended by one statement in one round trip that commits on its own: a call
/// of `sync_append` (migration `0012-append-function`; docs/ARCHITECTURE.md, "A push in one statement"), where
/// the transaction of steps (`PushService.decide`) takes `BEGIN`, the head locks, the stream versions, the
/// write and `COMMIT`, each a round trip.
///
/// It applies when nothing has to be decided between the statements: no event refers to a blob, every rule
/// that concerns an event decides from the events alone (`EventRule.rejectionsFromEventsAlone`) and rejects
/// none, no id comes twice among the pushes, and the checked versions of each stream rise in queue order. Then
/// every pending event is accepted unless the database holds otherwise: a stream at or past the first version
/// given, a stored id (a retry), a replica behind a purge. The function then undoes all it did, and the pushes
/// are decided by the transaction of steps, carefully, which rejects, marks or refuses them one by one.
struct OneStatementAppend {
    /// The call: the events' columns, the checked streams with their first and last versions, each push's
    /// replica with its scopes and whether its sighting is due. `now()` is the time the rows were received at
    /// (their `received_at` defaults to it, the same within the call's transaction).
    enum Call: FixedStatement {
        static let name = "sync_append_2"
        static let sql = select(from: "sync_append", firstParameter: 1, arguments: 19)
    }

    /// The call with the append functions of the rules the events concern (`EventRule.appendFunction`), and their
    /// arguments (migration `0013-append-with-rules-function`).
    enum CallWithRules: FixedStatement {
        static let name = "sync_append_rules_1"
        static let sql = select(from: "sync_append", firstParameter: 1, arguments: 21)
    }

    /// The types of `sync_append`'s arguments, those of the overload with the rules' functions last.
    static let argumentTypes = [
        "text[]", "int8[]", "uuid[]", "text[]", "int8[]", "text[]", "int4[]", "text[]", "text[]", "int8[]", "text[]",
        "int8[]", "text[]", "text[]", "int8[]", "int8[]", "text[]", "text[]", "bool[]", "text[]", "text[]",
    ]

    /// The call of `function` (`sync_append`, or a shard group's copy) with the first `arguments` of its arguments,
    /// bound to the parameters from `$firstParameter` on.
    static func select(from function: String, firstParameter: Int, arguments: Int) -> String {
        let parameters = argumentTypes.prefix(arguments).enumerated().map {
            "$\(firstParameter + $0.offset)::\($0.element)"
        }
        return "SELECT appended_scope, head_before, now() FROM \(function)(" + parameters.joined(separator: ", ") + ")"
    }

    /// The most events a call takes. The function writes a row at a time, which costs a bulk push more than the
    /// transaction of steps' one statement for all its rows saves (and on Citus, each row is a statement Citus
    /// plans); a larger push, like one larger than a group, runs the steps.
    static let maxEvents = 256

    /// The SQLSTATEs `sync_append` raises, undoing everything, when an event's id is already stored, when a
    /// stream is at or past a version given or a replica is behind a purge, and when a rule's append function
    /// would reject an event.
    static let refusals: Set<String> = ["SY001", "SY002", "SY003"]

    private var columns = Columns()
    /// The rules' append functions the call runs.
    private(set) var functions: [AppendFunction] = []

    /// The call for `pushes`, in queue order, or nil when one of them needs the transaction of steps.
    init?(_ pushes: [PushService.PendingPush], rules: [any EventRule], isCommutative: (String) -> Bool) {
        var columns = Columns()
        var seen: Set<EventRepository.EventKey> = []
        var checked: [PushPlan.StreamKey: (first: Int64, last: Int64)] = [:]
        var checkedOrder: [PushPlan.StreamKey] = []
        var placed: [Scope: Int64] = [:]
        for push in pushes {
            guard push.references.isEmpty else { return nil }
            let plan = push.plan
            let pending = plan.pendingIndexes
            for rule in rules {
                let concerned = pending.filter { rule.applies(to: plan.events[$0].type) }
                guard !concerned.isEmpty else { continue }
                if let rejections = rule.rejectionsFromEventsAlone(concerned.map { plan.events[$0] }) {
                    guard rejections.isEmpty else { return nil }
                } else if let function = rule.appendFunction {
                    if !functions.contains(function) { functions.append(function) }
                } else {
                    return nil
                }
            }
            for index in pending {
                let event = plan.events[index]
                guard seen.insert(EventRepository.EventKey(scope: event.scope, id: event.id)).inserted else {
                    return nil
                }
                if !isCommutative(event.type) {
                    let key = PushPlan.StreamKey(scope: event.scope, stream: event.stream)
                    if let versions = checked[key] {
                        guard event.streamVersion > versions.last else { return nil }
                        checked[key]!.last = event.streamVersion
                    } else {
                        checked[key] = (event.streamVersion, event.streamVersion)
                        checkedOrder.append(key)
                    }
                }
                let ordinal = placed[event.scope, default: 0] + 1
                placed[event.scope] = ordinal
                let row = EventRepository.NewEvent(event: event, seq: ordinal, payloadJSON: push.payloads[index]!)
                columns.scopes.append(event.scope.name)
                columns.ordinals.append(ordinal)
                columns.ids.append(event.id.uuid)
                columns.streams.append(event.stream)
                columns.versions.append(event.streamVersion)
                columns.types.append(event.type)
                columns.schemaVersions.append(Int32(clamping: event.schemaVersion))
                columns.hlcs.append(event.hlc.description)
                columns.dotReplicas.append(event.dot.replica.description)
                columns.dotCounters.append(Int64(bitPattern: event.dot.counter))
                columns.payloads.append(row.payloadJSON)
                columns.checksums.append(row.checksum ?? 0)
            }
            for scope in plan.pendingScopes {
                columns.replicas.append(push.replica.description)
                columns.replicaScopes.append(scope.name)
                columns.sighted.append(push.sighted.contains(scope))
            }
            // A scope whose events all turned out stored (a retry, `PushService.markStored`) records its sighting.
            for scope in push.sighted where !plan.pendingScopes.contains(scope) {
                columns.replicas.append(push.replica.description)
                columns.replicaScopes.append(scope.name)
                columns.sighted.append(true)
            }
        }
        guard !columns.scopes.isEmpty else { return nil }
        columns.checkedScopes = checkedOrder.map(\.scope.name)
        columns.checkedStreams = checkedOrder.map(\.stream)
        columns.checkedFirst = checkedOrder.map { checked[$0]!.first }
        columns.checkedLast = checkedOrder.map { checked[$0]!.last }
        self.columns = columns
    }

    /// The call's arguments, a column each: the events', the checked streams', the replicas' sightings.
    struct Columns {
        var scopes: [String] = []
        var ordinals: [Int64] = []
        var ids: [UUID] = []
        var streams: [String] = []
        var versions: [Int64] = []
        var types: [String] = []
        var schemaVersions: [Int32] = []
        var hlcs: [String] = []
        var dotReplicas: [String] = []
        var dotCounters: [Int64] = []
        var payloads: [String] = []
        var checksums: [Int64] = []
        var checkedScopes: [String] = []
        var checkedStreams: [String] = []
        var checkedFirst: [Int64] = []
        var checkedLast: [Int64] = []
        var replicas: [String] = []
        var replicaScopes: [String] = []
        var sighted: [Bool] = []

        /// Appends the 19 arguments of `sync_append`, in order.
        func bind(to bindings: inout PostgresBindings) {
            bindings.append(scopes)
            bindings.append(ordinals)
            bindings.append(ids)
            bindings.append(streams)
            bindings.append(versions)
            bindings.append(types)
            bindings.append(schemaVersions)
            bindings.append(hlcs)
            bindings.append(dotReplicas)
            bindings.append(dotCounters)
            bindings.append(payloads)
            bindings.append(checksums)
            bindings.append(checkedScopes)
            bindings.append(checkedStreams)
            bindings.append(checkedFirst)
            bindings.append(checkedLast)
            bindings.append(replicas)
            bindings.append(replicaScopes)
            bindings.append(sighted)
        }

        /// The rows of each shard: every column split by the shard its row's scope is in (`lookUp(scope)`, once
        /// per scope); nil when a scope's shard is not known.
        func split(by lookUp: (String) -> Int64?) -> [Int64: Columns]? {
            var known: [String: Int64] = [:]
            func shard(_ scope: String) -> Int64? {
                if let id = known[scope] { return id }
                let id = lookUp(scope)
                known[scope] = id
                return id
            }
            var parts: [Int64: Columns] = [:]
            for (at, scope) in scopes.enumerated() {
                guard let id = shard(scope) else { return nil }
                parts[id, default: Columns()].addEvent(of: self, at: at)
            }
            for (at, scope) in checkedScopes.enumerated() {
                guard let id = shard(scope) else { return nil }
                parts[id, default: Columns()].addChecked(of: self, at: at)
            }
            for (at, scope) in replicaScopes.enumerated() {
                guard let id = shard(scope) else { return nil }
                parts[id, default: Columns()].addSighting(of: self, at: at)
            }
            return parts
        }

        private mutating func addEvent(of all: Columns, at: Int) {
            scopes.append(all.scopes[at])
            ordinals.append(all.ordinals[at])
            ids.append(all.ids[at])
            streams.append(all.streams[at])
            versions.append(all.versions[at])
            types.append(all.types[at])
            schemaVersions.append(all.schemaVersions[at])
            hlcs.append(all.hlcs[at])
            dotReplicas.append(all.dotReplicas[at])
            dotCounters.append(all.dotCounters[at])
            payloads.append(all.payloads[at])
            checksums.append(all.checksums[at])
        }

        private mutating func addChecked(of all: Columns, at: Int) {
            checkedScopes.append(all.checkedScopes[at])
            checkedStreams.append(all.checkedStreams[at])
            checkedFirst.append(all.checkedFirst[at])
            checkedLast.append(all.checkedLast[at])
        }

        private mutating func addSighting(of all: Columns, at: Int) {
            replicas.append(all.replicas[at])
            replicaScopes.append(all.replicaScopes[at])
            sighted.append(all.sighted[at])
        }
    }

    /// The arguments of the call of `sync_append`.
    private var bindings: PostgresBindings {
        var bindings = PostgresBindings()
        bind(columns, to: &bindings)
        return bindings
    }

    /// Appends the arguments of a call of `columns`: theirs, then the rules' functions when there are some.
    private func bind(_ columns: Columns, to bindings: inout PostgresBindings) {
        columns.bind(to: &bindings)
        if !functions.isEmpty {
            bindings.append(functions.map(\.name))
            bindings.append(functions.map(\.argument))
        }
    }

    /// On a Citus worker, the call as one statement of the shard groups' functions (`CitusShardAppend`), one per
    /// shard group the rows are in, in the order of their ids, joined by `UNION ALL`: one round trip and one
    /// transaction, as `sync_append`'s; nil when a scope's shard is not known.
    func shardStatement(shard: (String) -> Int64?) -> PostgresQuery? {
        guard let parts = columns.split(by: shard) else { return nil }
        var bindings = PostgresBindings()
        var selects: [String] = []
        for id in parts.keys.sorted() {
            let first = bindings.count
            bind(parts[id]!, to: &bindings)
            selects.append(
                Self.select(
                    from: CitusShardAppend.name(scopesShard: id), firstParameter: first + 1,
                    arguments: bindings.count - first))
        }
        return PostgresQuery(unsafeSQL: selects.joined(separator: " UNION ALL "), binds: bindings)
    }

    /// Runs the call on `connection` outside a transaction (it commits on its own): as a prepared statement when
    /// `prepared`.
    /// - Returns: each scope's head before the call, and the time the rows were received at.
    /// - Throws: `NeedsCarefulAppend` when the database refused the pushes (the call undid everything);
    ///   database errors.
    ///
    /// With `onShards` (`shardStatement`), on a Citus worker, the call runs the shard groups' functions instead of
    /// `sync_append`, unprepared; one raises `CitusShardAppend.notHere` when its shards are elsewhere.
    func run(on connection: PostgresConnection, prepared: Bool, onShards: PostgresQuery? = nil, logger: Logger)
        async throws -> (heads: [Scope: Int64], receivedAt: Date)
    {
        var heads: [Scope: Int64] = [:]
        var receivedAt = Date()
        func read(_ row: PostgresRow) throws {
            let (scope, head, time) = try row.decode((String, Int64, Date).self)
            heads[try Scope(scope)] = head
            receivedAt = time
        }
        do {
            if let onShards {
                for try await row in try await connection.checkedQuery(onShards, logger: logger) {
                    try read(row)
                }
            } else if functions.isEmpty {
                try await connection.forEachRow(Call.self, bindings, prepared: prepared, logger: logger, read)
            } else {
                try await connection.forEachRow(CallWithRules.self, bindings, prepared: prepared, logger: logger, read)
            }
        } catch let error as PSQLError where Self.refusals.contains(error.serverInfo?[.sqlState] ?? "") {
            throw NeedsCarefulAppend()
        }
        return (heads, receivedAt)
    }

    /// The plans of `pushes` once appended on `heads` (each scope's head before the call): every pending event
    /// accepted, with the seq the call gave it.
    static func accepted(_ pushes: [PushService.PendingPush], heads: [Scope: Int64]) -> [PushPlan] {
        var running = heads
        return pushes.map { push in
            var plan = push.plan
            running.merge(plan.assignSeqs(heads: running)) { $1 }
            return plan
        }
    }
}
