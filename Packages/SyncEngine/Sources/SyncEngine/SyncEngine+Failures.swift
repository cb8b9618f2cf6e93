import SyncEventStore
import SyncModels
import SyncProtocol

/// What a failed cycle leaves: a journal entry and the status, and, before a reset, the events the server
/// lost given back.
extension SyncEngine {
    func recordFailure(_ failure: SyncFailure) async {
        switch failure {
        case .retryable: await journal.record("retry", failure.description)
        case .authentication: await journal.record("pause", failure.description)
        case .resetRequired:
            // The server purged history this replica had not seen: what it holds could resurrect what others
            // deleted. Or its history ends below this replica's cursor: it lost events this replica holds,
            // which become pending again first. Drop the server's part, pull the folded history from the
            // start, re-base the rest.
            await rependWhatTheServerLost()
            let report = try? await store.resetForBootstrap()
            await journal.record(
                "reset",
                "dropped \(report?.confirmedDropped ?? 0) events from the server, pulling its history again from the start; \(report?.pendingKept ?? 0) pending events kept for re-basing"
            )
        case .permanent: await journal.record("error", failure.description)
        }
        await updateStatus { status in
            status.lastError = failure.description
            status.inFlight = 0
            if case .authentication = failure { status.pausedForAuthentication = true }
        }
    }

    /// Before a reset: the scopes whose history on the server ends below this replica's cursor (the server
    /// was restored from a backup, say) lost events this replica holds. Its copies become pending again
    /// (`EventStore.repend`), so the reset keeps them and the next push gives them back. A scope's head is
    /// read with a checksum request of the empty range; a server that does not answer one is taken as not
    /// behind (the reset then drops the events, as before).
    func rependWhatTheServerLost() async {
        guard let encoded = try? await store.cursor(), let cursor = try? ScopeCursor(encoded: encoded) else { return }
        for scope in cursor.positions.keys.sorted() where cursor[scope] > 0 {
            guard let answer = try? await transport.checksum(ChecksumRequest(scope: scope, after: 0, through: 0)),
                answer.head < cursor[scope],
                let count = try? await store.repend(scope: scope.name, above: answer.head), count > 0
            else { continue }
            await journal.record(
                "repend",
                "\(scope.name): the server's history ends at \(answer.head), below our cursor \(cursor[scope]); \(count) events it lost are pending again"
            )
        }
    }
}
