/// The pure state machine of a hybrid logical clock (Kulkarni et al., "Logical Physical Clocks", 2014).
///
/// It never reads a clock itself: callers pass the wall time, so tests drive it with any sequence of wall
/// times, including ones that jump backwards. Invariants:
/// - every timestamp it issues is strictly greater than every timestamp it issued or received before;
/// - a remote timestamp more than `maxForwardDrift` milliseconds ahead of the wall clock is clamped to
///   `wall + maxForwardDrift` (and counted in `clampedCount`), so one peer with a broken clock cannot drag
///   this replica's clock arbitrarily far into the future;
/// - when the 16-bit counter would overflow, the physical part moves forward by one millisecond instead.
public struct HLCState: Sendable, Hashable {
    public let node: UInt64
    public let maxForwardDrift: UInt64
    /// The last timestamp issued or received.
    public private(set) var last: HLCTimestamp
    /// How many remote timestamps were clamped because they were too far ahead.
    public private(set) var clampedCount: Int = 0

    /// - Parameters:
    ///   - node: the issuing replica's node id (`ReplicaID.high`).
    ///   - maxForwardDrift: how far ahead of the wall clock (milliseconds) a remote timestamp may move this
    ///     clock. The default is one minute.
    ///   - last: a previously persisted timestamp to resume after, so a restart never goes backwards.
    public init(node: UInt64, maxForwardDrift: UInt64 = 60_000, last: HLCTimestamp = .zero) {
        self.node = node
        self.maxForwardDrift = maxForwardDrift
        self.last = HLCTimestamp(physical: last.physical, counter: last.counter, node: node)
    }

    /// Issues a timestamp for a local event (the "send" rule).
    public mutating func send(wall: UInt64) -> HLCTimestamp {
        let wall = min(wall, HLCTimestamp.maxPhysical)
        if wall > last.physical {
            last = HLCTimestamp(physical: wall, counter: 0, node: node)
        } else {
            last = Self.successor(physical: last.physical, counter: last.counter, node: node)
        }
        return last
    }

    /// Merges a remote timestamp into the clock (the "receive" rule) and returns the new local timestamp,
    /// which is greater than both the previous local one and `remote` (unless `remote` was clamped).
    public mutating func receive(_ remote: HLCTimestamp, wall: UInt64) -> HLCTimestamp {
        let wall = min(wall, HLCTimestamp.maxPhysical)
        let ceiling = min(wall &+ maxForwardDrift, HLCTimestamp.maxPhysical)
        var remotePhysical = remote.physical
        var remoteCounter = remote.counter
        if remotePhysical > ceiling {
            clampedCount += 1
            remotePhysical = ceiling
            remoteCounter = 0
        }
        let physical = max(last.physical, remotePhysical, wall)
        let counter: UInt32
        if physical == last.physical && physical == remotePhysical {
            counter = UInt32(max(last.counter, remoteCounter)) + 1
        } else if physical == last.physical {
            counter = UInt32(last.counter) + 1
        } else if physical == remotePhysical {
            counter = UInt32(remoteCounter) + 1
        } else {
            counter = 0
        }
        if counter > UInt32(UInt16.max) {
            last = HLCTimestamp(physical: min(physical + 1, HLCTimestamp.maxPhysical), counter: 0, node: node)
        } else {
            last = HLCTimestamp(physical: physical, counter: UInt16(counter), node: node)
        }
        return last
    }

    private static func successor(physical: UInt64, counter: UInt16, node: UInt64) -> HLCTimestamp {
        if counter == .max {
            return HLCTimestamp(physical: min(physical + 1, HLCTimestamp.maxPhysical), counter: 0, node: node)
        }
        return HLCTimestamp(physical: physical, counter: counter + 1, node: node)
    }
}
