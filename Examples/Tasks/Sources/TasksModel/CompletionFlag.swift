import SyncCRDT
import SyncModels

/// Whether a task is done, as an enable-wins flag: an add-wins OR-set of completions, done while it holds
/// one.
///
/// Completing adds a completion (always, even on a task that is already done); reopening removes the
/// completions the reopening replica has seen. So a reopen made without seeing a completion cannot undo it:
/// a "complete" and a "reopen" made concurrently on two devices leave the task done, and only a reopen made
/// after the completion arrived reopens it. A last-writer-wins flag would instead let whichever device's
/// clock was ahead decide, and a finished task would silently come back.
public struct CompletionFlag: Sendable, Equatable, Codable {
    /// The one element of the set: its presence is the flag.
    public static let mark = "done"

    /// The completions that are still current.
    public private(set) var completions = AddWinsSet<String>()

    public init() {}

    /// Whether some completion no reopen has seen is current.
    public var isDone: Bool { completions.contains(Self.mark) }

    /// Completes on behalf of `replica`; returns the operation to ship.
    public mutating func complete(replica: ReplicaID) -> AddWinsSet<String>.Operation {
        completions.add(Self.mark, replica: replica)
    }

    /// Reopens on behalf of `replica`, removing the completions this replica has seen; returns the operation
    /// to ship.
    public mutating func reopen(replica: ReplicaID) -> AddWinsSet<String>.Operation {
        completions.remove(Self.mark, replica: replica)
    }

    /// Applies a completion or a reopen, in any order, any number of times.
    public mutating func apply(_ operation: AddWinsSet<String>.Operation) {
        completions.apply(operation)
    }

    public init(from decoder: any Decoder) throws {
        completions = try AddWinsSet<String>(from: decoder)
    }

    public func encode(to encoder: any Encoder) throws {
        try completions.encode(to: encoder)
    }
}
