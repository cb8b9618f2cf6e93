import SyncEventStore
import SyncModels
import SyncProtocol

extension SyncAnswer {
    /// The store's view of one `/v1/sync` answer to a request that pushed `batch`: the results split into
    /// acknowledgements and rejections, the page with its marks when the request asked for them
    /// (`markEvery`), and the payloads' canonical bytes as they came.
    init(
        _ response: SyncResponse, pushed batch: [StoredEvent], markEvery: Int?, foldThrough: [Scope: Int64],
        follows: String?
    ) {
        var acknowledged: [EventID: Int64] = [:]
        var rejected: [EventID: StoredEvent.Rejection] = [:]
        for result in response.results {
            switch result.status {
            case .accepted, .duplicate:
                if let seq = result.seq { acknowledged[result.id] = seq }
            case .rejected:
                rejected[result.id] = StoredEvent.Rejection(
                    code: result.code?.rawValue ?? "rejected", message: result.message ?? "")
            }
        }
        self.init(
            acknowledged: acknowledged, rejected: rejected,
            pushedPositions: Dictionary(batch.map { ($0.event.id, $0.position) }, uniquingKeysWith: { a, _ in a }),
            events: response.events, payloads: response.events.indices.map { response.canonicalPayloads[$0] },
            cursor: response.cursor, marks: response.marks ?? [], markEvery: markEvery, hasMore: response.hasMore,
            foldThrough: foldThrough, follows: follows, purged: SyncEngine.points(response.purged))
    }
}
