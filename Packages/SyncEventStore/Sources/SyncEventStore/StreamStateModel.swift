import Foundation
import GRDB

/// What a domain gives `StreamStateProjection`: the state of one stream (a CRDT value that folds the
/// stream's events), how it is stored, and the read columns an app queries with SQL. Everything else (the
/// working set, the cache of decoded states, write-behind during long pulls, folding on arrival, snapshots,
/// rebuilds) the projection does.
///
/// Rules, relied on by the projection:
/// - `apply` is **idempotent** (applying an event the state already holds changes nothing) and, for events
///   made concurrently, **commutative**: replays after a crash, rebuilds in log order and folding on arrival
///   all reach the same state. A CRDT built from `SyncCRDT`'s types is.
/// - `decode(encode(state))` gives back `state`.
/// - `values(of:)` and `isRetired` depend only on the state.
public protocol StreamStateModel: Sendable {
    associatedtype State: Sendable

    /// The projection's name: unique among the store's projections, the key of its checkpoint and the prefix
    /// of its migrations.
    var name: String { get }
    /// Bump when `apply` or the columns change meaning: the store rebuilds the projection at the next open.
    var version: Int { get }
    /// The table of rows (one per stream, keyed by the stream's name in `stream`); its snapshot copies are in
    /// `<table>_snapshot`.
    var table: String { get }
    /// The read columns besides `stream`, `scope`, `retired` and `state`, in the order `values(of:)` gives
    /// them.
    var columns: [StreamStateColumn] { get }

    /// Whether events of `stream` are this model's; others are ignored.
    func handles(stream: String) -> Bool
    /// The state of a stream no event has touched.
    func initialState() -> State
    /// Folds one event into its stream's state.
    func apply(_ event: StoredEvent, to state: inout State)
    /// The stored form of a state (the `state` column).
    func encode(_ state: State) -> Data
    /// A state from its stored form.
    func decode(_ data: Data) throws -> State
    /// The read columns' values, in `columns` order.
    func values(of state: State) -> [DatabaseValue]
    /// Drops what no later event can need once every replica has seen the history the state folds
    /// (tombstones of removed elements); what the state shows does not change. Returns whether it changed
    /// anything. The default keeps everything.
    func compactStable(_ state: inout State) -> Bool
    /// Whether the stream has ended for good (deleted): once every replica has seen that, a stable fold
    /// drops its row and the store forgets the stream. The default: never.
    func isRetired(_ state: State) -> Bool
}

extension StreamStateModel {
    public func compactStable(_ state: inout State) -> Bool { false }
    public func isRetired(_ state: State) -> Bool { false }
}

/// A read column of a `StreamStateModel`'s table.
public struct StreamStateColumn: Sendable, Hashable {
    public var name: String
    /// Its SQL type, constraints and default, e.g. `TEXT NOT NULL DEFAULT ''`.
    public var definition: String

    public init(_ name: String, _ definition: String) {
        self.name = name
        self.definition = definition
    }
}
