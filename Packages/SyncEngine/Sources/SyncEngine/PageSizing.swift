import SyncEventStore
import SyncModels
import SyncProtocol

/// The page size a cycle asks for, request after request: a pure value told what each answer was.
///
/// A cycle starts at `pageSize`. A page the server had to cut (it came back full, with more after it) makes
/// the next one larger. How much: when the page had marks (`SyncRequest.markEvery`), the store applies it
/// in transactions sized on their own (`ApplyBudget.events`), so the page doubles whatever applying it
/// takes; without marks the page is one transaction, and it is sized like one: doubled while applying the
/// last took less than half of `applyBudget`, halved when it took more (`TransactionSize`), unchanged
/// before anything was applied.
struct PageSizing: Sendable, Hashable {
    private(set) var size: TransactionSize
    let budget: Duration

    init(_ configuration: SyncEngine.Configuration) {
        let floor = max(1, min(configuration.minPageSize, configuration.pageSize))
        let ceiling = max(configuration.pageSize, configuration.maxPageSize)
        size = TransactionSize(max(1, configuration.pageSize), in: floor...ceiling)
        budget = configuration.applyBudget
    }

    /// The limit of the next request.
    var limit: Int { size.value }

    /// After an answer: `full` when the server cut the page at its limit, `marked` when it had marks,
    /// `lastApply` the longest transaction of the last answer applied (nil before any).
    mutating func next(full: Bool, marked: Bool, lastApply: Duration?) {
        if marked {
            if full { size.grow() }
        } else if let lastApply {
            size.record(took: lastApply, budget: budget, full: full)
        }
    }
}
