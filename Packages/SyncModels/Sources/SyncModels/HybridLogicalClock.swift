import Foundation
import Synchronization

/// A thread-safe hybrid logical clock for one replica: `HLCState` behind a lock, reading the wall clock
/// through an injected function.
public final class HybridLogicalClock: Sendable {
    private let state: Mutex<HLCState>
    private let wallClock: @Sendable () -> UInt64

    /// - Parameters:
    ///   - replica: the replica issuing timestamps.
    ///   - last: the last timestamp this replica persisted (`resumingAfter:`), so a restart never goes
    ///     backwards.
    ///   - maxForwardDrift: see `HLCState`.
    ///   - wallClock: milliseconds since the Unix epoch; the system clock by default.
    public init(
        replica: ReplicaID,
        resumingAfter last: HLCTimestamp = .zero,
        maxForwardDrift: UInt64 = 60_000,
        wallClock: @escaping @Sendable () -> UInt64 = HybridLogicalClock.systemMilliseconds
    ) {
        self.state = Mutex(HLCState(node: replica.high, maxForwardDrift: maxForwardDrift, last: last))
        self.wallClock = wallClock
    }

    /// Milliseconds since the Unix epoch from the system clock.
    public static let systemMilliseconds: @Sendable () -> UInt64 = {
        UInt64(max(0, Date().timeIntervalSince1970 * 1000))
    }

    /// A timestamp for a new local event.
    public func now() -> HLCTimestamp {
        let wall = wallClock()
        return state.withLock { $0.send(wall: wall) }
    }

    /// Advances the clock past a timestamp received from another replica.
    @discardableResult
    public func receive(_ remote: HLCTimestamp) -> HLCTimestamp {
        let wall = wallClock()
        return state.withLock { $0.receive(remote, wall: wall) }
    }

    /// The last timestamp issued or received.
    public var last: HLCTimestamp { state.withLock { $0.last } }

    /// How many remote timestamps were clamped for being too far in the future.
    public var clampedCount: Int { state.withLock { $0.clampedCount } }
}
