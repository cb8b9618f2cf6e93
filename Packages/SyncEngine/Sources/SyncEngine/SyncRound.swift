import SyncModels

/// One round trip of a sync cycle, as `SyncEngine.Configuration.onRound` reports it once its answer is
/// applied.
///
/// The engine pipelines: the next request is sent before this answer is applied, so `roundTrip` of one
/// round overlaps `apply` of the one before. `waited` is the part of the round trip the engine spent idle
/// waiting for it; when the device keeps up with the server it is close to the round trip, and when the
/// device is the bottleneck it is close to zero.
public struct SyncRound: Sendable, Hashable {
    /// Events pushed in this request.
    public var pushed: Int
    /// Pushed events the server accepted (or already had).
    public var acknowledged: Int
    /// Pushed events the server rejected (rolled back here).
    public var rejected: Int
    /// Events in the pulled page.
    public var pulled: Int
    /// Pulled events new to this replica: logged, or folded on arrival.
    public var inserted: Int
    /// Of those, events folded on arrival (see `SyncEngine.Configuration.foldOnArrival`).
    public var folded: Int
    /// The page size the request asked for.
    public var pageLimit: Int
    /// Whether the server had more to pull after this page.
    public var hasMore: Bool
    /// Events the server still had after this page, when it says (`SyncResponse.remaining`).
    public var remaining: Int?
    /// From sending the request to holding its decoded answer: the server, the wire and decoding.
    public var roundTrip: Duration
    /// How long the engine waited for this answer after it was ready for it.
    public var waited: Duration
    /// Applying the answer: its local transactions, one or several (see `SyncEngine.Configuration.markEvery`).
    public var apply: Duration
    /// How many local transactions applied the answer.
    public var transactions: Int
    /// The longest of them: what a local write waited for at most.
    public var longestTransaction: Duration
    /// Writing projection records buffered during the pull after this answer (zero when the engine did
    /// not flush after it; see `SyncEngine.Configuration.projectionLag`), in transactions of their own.
    public var flush: Duration
    /// Bytes of this round trip.
    public var traffic: Traffic
    /// The pulled page's events, as applied (for observers that follow individual events, such as a load
    /// generator timing how long an edit takes to reach other devices).
    public var events: [Event]

    public init(
        pushed: Int, acknowledged: Int, rejected: Int, pulled: Int, inserted: Int, folded: Int = 0, pageLimit: Int,
        hasMore: Bool,
        roundTrip: Duration, waited: Duration, apply: Duration, traffic: Traffic, flush: Duration = .zero,
        remaining: Int? = nil, events: [Event] = [], transactions: Int = 1, longestTransaction: Duration? = nil
    ) {
        self.transactions = transactions
        self.longestTransaction = longestTransaction ?? apply
        self.events = events
        self.remaining = remaining
        self.pushed = pushed
        self.acknowledged = acknowledged
        self.rejected = rejected
        self.pulled = pulled
        self.inserted = inserted
        self.folded = folded
        self.pageLimit = pageLimit
        self.hasMore = hasMore
        self.roundTrip = roundTrip
        self.waited = waited
        self.apply = apply
        self.flush = flush
        self.traffic = traffic
    }
}
