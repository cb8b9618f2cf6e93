import GRDB
import SyncModels

/// Domain validation run inside the append transaction, before an event is written. Throw an
/// `EventStoreError` (code `validation.failed`) to refuse the whole append.
public protocol EventValidator: Sendable {
    func validate(_ draft: EventDraft, in db: Database) throws
}
