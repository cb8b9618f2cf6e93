import SyncEventStore

/// Conflicts kept for review (`StreamStateModel.conflictColumn`): counted in the status, journaled as they
/// open and resolve, and measured.
extension SyncEngine {
    /// Reads the streams in conflict after an answer (one indexed query, nothing per event), journals those
    /// opened and resolved since the last read, and counts them in the status. A failed read changes nothing:
    /// the next answer reads again.
    func trackConflicts() async {
        guard let now = try? await store.streamsInConflict() else { return }
        let before = conflicts.withLock { previous in
            defer { previous = now }
            return previous
        }
        guard before != now || status.openConflicts != now.count else { return }
        if let before {
            await journal.record(SyncJournal.entries(conflictsWere: before, are: now))
            metrics.conflictsOpened.increment(by: now.subtracting(before).count)
            metrics.conflictsResolved.increment(by: before.subtracting(now).count)
        }
        metrics.openConflicts.record(now.count)
        await updateStatus { $0.openConflicts = now.count }
    }
}
