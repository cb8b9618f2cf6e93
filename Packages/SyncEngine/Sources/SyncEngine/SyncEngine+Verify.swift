import Foundation
import SyncEventStore
import SyncModels
import SyncProtocol

/// What verifying one scope found (`SyncEngine.verify`).
public struct ScopeVerification: Sendable, Hashable, Codable {
    public enum Outcome: String, Sendable, Hashable, Codable {
        /// The device's sums equal the server's checksum at the device's cursor.
        case matched
        /// They differed; the bad ranges were pulled again and replaced, and they now match.
        case repaired
        /// They differed and no range repair made them match: the device dropped what the server sent and
        /// pulled it again (its pending events kept).
        case reset
        /// They differ (`verify(repair: false)`, or a repair that did not make them match).
        case mismatched
        /// The server cannot give the checksum (folded history below the cursor, events from before
        /// checksums, or a transport without them).
        case unavailable
    }

    public var scope: String
    /// The device's cursor in the scope: the position compared.
    public var through: Int64
    /// The device's sums before anything was repaired.
    public var device: ScopeChecksum
    /// The server's checksum at `through`, when it gave one.
    public var server: Int64?
    public var outcome: Outcome
    /// The ranges replaced, first bad range first.
    public var repairs: [RangeRepair]
    /// Events pulled again for the repairs.
    public var downloaded: Int
    /// What happened, for people.
    public var detail: String

    public init(
        scope: String, through: Int64, device: ScopeChecksum, server: Int64?, outcome: Outcome,
        repairs: [RangeRepair] = [], downloaded: Int = 0, detail: String = ""
    ) {
        self.scope = scope
        self.through = through
        self.device = device
        self.server = server
        self.outcome = outcome
        self.repairs = repairs
        self.downloaded = downloaded
        self.detail = detail
    }
}

extension SyncEngine {
    /// Ranges are bisected down to this many seqs before they are pulled again. A damaged stretch of `n`
    /// rows then costs at most `n` plus two ranges, half a range at each end: at most twice the damage
    /// from 1,000 rows up.
    static let repairRangeEvents: Int64 = 500
    /// The most ranges one scope's verification repairs before it falls back to a reset.
    static let maxRangeRepairs = 16

    /// Verifies every scope the device holds against the server's checksums (docs/PROTOCOL.md,
    /// "Checksums"): the device's sum of what it applied (`ScopeChecksum.applied`) must equal the server's
    /// checksum at the device's cursor, and the log must add up to it (`isConsistent`).
    ///
    /// On a mismatch, with `repair`, it finds the first bad range above what either side folded by
    /// bisecting with range checksums (the device's recomputed from its rows), pulls that range again,
    /// replaces the confirmed rows it holds there (pending events are never touched; an intact row the server
    /// lacks becomes pending again) and re-derives the streams of the rows it replaced in the projections,
    /// and goes on until the ranges agree; then it compares again. When the sums still differ (the
    /// damage is in history either side folded), it resets: drops what the server sent and pulls it again,
    /// re-basing the pending events. Every step is journaled (`verify`, `verify.repair`, `verify.reset`).
    ///
    /// The sums alone find rows lost or added, and sums gone wrong, at the cost of one small request per
    /// scope. `deep` also recomputes the checksum of every row the device holds above what either side
    /// folded and compares the range with the server's: that finds a row damaged in place (an altered
    /// payload), at the cost of reading the log; and it rebuilds the projections that can digest their rows
    /// and journals those a rebuild changed (`verify.projection`: a row dropped or altered behind the
    /// store's back), at the cost of a rebuild.
    ///
    /// Refused for an expired token, with a `tokenProvider`, it gets a new one and verifies again (once), as
    /// a cycle does.
    @discardableResult
    public func verify(repair: Bool = true, deep: Bool = false) async throws(SyncFailure) -> [ScopeVerification] {
        do {
            return try await verifyOnce(repair: repair, deep: deep)
        } catch {
            guard case .authentication = error, await refreshToken(after: error) else { throw error }
            return try await verifyOnce(repair: repair, deep: deep)
        }
    }

    private func verifyOnce(repair: Bool, deep: Bool) async throws(SyncFailure) -> [ScopeVerification] {
        let cursor: ScopeCursor
        let sums: [String: ScopeChecksum]
        do {
            cursor = try ScopeCursor(encoded: try await store.cursor())
            sums = try await store.scopeChecksums()
        } catch {
            throw Self.storeFailure(error)
        }
        // Marked first: the reset below syncs, and a sync that finds verification due must not start another.
        await updateStatus { $0.lastVerified = Date() }
        var results: [ScopeVerification] = []
        for scope in cursor.positions.keys.sorted() {
            results.append(
                try await verifyScope(
                    scope, through: cursor[scope], device: sums[scope.name] ?? ScopeChecksum(scope: scope.name),
                    repair: repair, deep: deep))
        }
        let needsReset = results.contains { $0.outcome == .reset }
        let repaired = results.contains { !$0.repairs.isEmpty }
        var rebuilt = 0
        // A range repair re-derived the streams it replaced rows of (`replaceConfirmed`).
        if !repaired && deep { rebuilt = try await checkProjections(repair: repair, results: &results) }
        for result in results {
            await journal.record(
                "verify", "\(result.scope) at \(result.through): \(result.outcome.rawValue) \(result.detail)")
        }
        if needsReset {
            // The last resort: what the server sent, dropped and pulled again; pending events are re-based.
            await recordFailure(.resetRequired)
            await journal.record("verify.reset", "sums still differ after range repairs: pulling from the start")
            try await syncNow()
        }
        let count = rebuilt + results.reduce(0) { $0 + $1.repairs.count + ($1.outcome == .reset ? 1 : 0) }
        for result in results { metrics.verifications[result.outcome]?.increment() }
        metrics.repairs.increment(by: count)
        await updateStatus { status in
            status.lastVerified = Date()
            status.repairs += count
        }
        return results
    }

    /// Verifies one scope at the device's cursor, `through`, with the device's sums, `device`: compares them
    /// with the server's checksum and, on a mismatch with `repair`, repairs the scope (`repairScope`).
    func verifyScope(_ scope: Scope, through: Int64, device: ScopeChecksum, repair: Bool, deep: Bool)
        async throws(SyncFailure) -> ScopeVerification
    {
        var result = ScopeVerification(
            scope: scope.name, through: through, device: device, server: nil, outcome: .unavailable)
        let server: ChecksumResponse
        do {
            server = try await transport.checksum(ChecksumRequest(scope: scope, through: through))
        } catch {
            guard case .permanent(let code, let message) = error else { throw error }
            result.detail = "\(code): \(message)"
            return result
        }
        result.server = server.checksum
        let floor = max(server.compactedThrough, device.prunedThrough)
        var agrees = device.isConsistent && device.applied == server.checksum
        if agrees && deep { agrees = try await rangeAgrees(scope, after: floor, through: through, deep: true) }
        if agrees {
            result.outcome = .matched
            return result
        }
        result.outcome = .mismatched
        result.detail =
            "device applied \(device.applied) (log \(device.held) + pruned \(device.pruned)), server \(server.checksum)"
        guard repair else { return result }
        try await repairScope(&result, scope, after: floor, checksum: server.checksum, deep: deep)
        return result
    }

    /// Repairs a scope whose sums differ from the server's `checksum` at `result.through`: replaces its bad
    /// ranges above `floor` (at most `maxRangeRepairs`), counts its sums again, and sets the outcome:
    /// `repaired` when they now match, else `reset`, which `verify` then makes.
    func repairScope(
        _ result: inout ScopeVerification, _ scope: Scope, after floor: Int64, checksum: Int64, deep: Bool
    ) async throws(SyncFailure) {
        let through = result.through
        for _ in 0..<Self.maxRangeRepairs {
            guard let range = try await firstBadRange(scope, after: floor, through: through, deep: deep) else {
                break
            }
            let (fixed, pulled) = try await repairRange(scope, after: range.after, through: range.through)
            result.repairs.append(fixed)
            result.downloaded += pulled
            await journal.record(
                "verify.repair",
                "\(scope.name): (\(fixed.after), \(fixed.through)] replaced, \(fixed.removed) rows removed, \(fixed.written) written, \(fixed.repended) the server lacked pending again"
            )
        }
        let after: ScopeChecksum
        do {
            // The rows above the floor agree now: what they add up to is what was applied (sums gone
            // wrong on their own are counted again here).
            after = try await store.recountChecksums(scope: scope.name)
        } catch {
            throw Self.storeFailure(error)
        }
        let serverLacked = result.repairs.reduce(0) { $0 + $1.repended }
        if serverLacked > 0 {
            // Pushed again by the next sync; a reset below keeps them too (they are pending).
            result.detail = "the server lacked \(serverLacked) events this device holds: pending again"
        }
        result.outcome = after.isConsistent && after.applied == checksum ? .repaired : .reset
    }

    /// With the log agreeing with the server: projections whose rows a rebuild from it changes were damaged
    /// behind the store's back, and are repaired by that rebuild (with `repair`; else only found). Journals
    /// them, marks the scopes that matched as repaired (or mismatched), and returns the projections rebuilt.
    func checkProjections(repair: Bool, results: inout [ScopeVerification]) async throws(SyncFailure) -> Int {
        let damaged: [String]
        do {
            damaged = try await store.rebuildDamaged(repair: repair)
        } catch {
            throw Self.storeFailure(error)
        }
        guard !damaged.isEmpty else { return 0 }
        let names = damaged.joined(separator: ", ")
        await journal.record(
            "verify.projection", repair ? "rows rebuilt: \(names)" : "rows differ from a rebuild: \(names)")
        for index in results.indices where results[index].outcome == .matched {
            results[index].outcome = repair ? .repaired : .mismatched
            results[index].detail = "projection rows " + (repair ? "rebuilt: " : "differ from a rebuild: ") + names
        }
        return repair ? damaged.count : 0
    }

    /// The first range of at most `repairRangeEvents` seqs in `(after, through]` whose device and server
    /// checksums differ (or, `deep`, where the device holds a damaged row), by bisection; nil when the whole
    /// range agrees.
    func firstBadRange(_ scope: Scope, after: Int64, through: Int64, deep: Bool) async throws(SyncFailure)
        -> (after: Int64, through: Int64)?
    {
        guard through > after, try await !rangeAgrees(scope, after: after, through: through, deep: deep) else {
            return nil
        }
        var low = after
        var high = through
        while high - low > Self.repairRangeEvents {
            let middle = low + (high - low) / 2
            if try await rangeAgrees(scope, after: low, through: middle, deep: deep) {
                low = middle
            } else {
                high = middle
            }
        }
        return (low, high)
    }

    /// Whether the device's rows in `(after, through]` add up to the server's checksum of that range, in
    /// number too: with `deep`, each row's checksum recomputed from the row (none damaged in place), else as
    /// stored with it (one aggregate: a lost row shows, an altered payload does not).
    func rangeAgrees(_ scope: Scope, after: Int64, through: Int64, deep: Bool) async throws(SyncFailure) -> Bool {
        let server = try await transport.checksum(ChecksumRequest(scope: scope, after: after, through: through))
        let device: RangeChecksum
        do {
            device =
                deep
                ? try await store.rangeChecksum(scope: scope.name, after: after, through: through)
                : try await store.storedRangeChecksum(scope: scope.name, after: after, through: through)
        } catch {
            throw Self.storeFailure(error)
        }
        return device.damaged.isEmpty && device.checksum == server.checksum
            && Int64(device.events) == (server.events ?? Int64(device.events))
    }

    /// Pulls `scope`'s events in `(after, through]` again (every replica's, this one's too) and replaces
    /// the device's confirmed rows there with them. Returns the repair and the events pulled.
    func repairRange(_ scope: Scope, after: Int64, through: Int64) async throws(SyncFailure) -> (RangeRepair, Int) {
        var events: [Event] = []
        var position = after
        while position < through {
            let page = try await transport.pull(
                PullRequest(
                    cursor: ScopeCursor([scope: position]), scopes: [scope],
                    limit: Int(min(through - position, 5_000))))
            let inRange = page.events.filter { ($0.seq ?? 0) <= through }
            events += inRange
            guard let last = inRange.last?.seq, last > position, page.events.count == inRange.count else { break }
            position = last
            if !page.hasMore { break }
        }
        do {
            let repair = try await store.replaceConfirmed(
                scope: scope.name, after: after, through: through, with: events)
            return (repair, events.count)
        } catch {
            throw Self.storeFailure(error)
        }
    }
}
