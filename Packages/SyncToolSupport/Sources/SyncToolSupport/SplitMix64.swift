/// A small seeded random number generator (SplitMix64): a run draws its seed, builds everything random from
/// it and prints it, so the same seed replays the run. `sync-load` draws its workload and faults from it and
/// `sync-fault-proxy` its resets and jitter; every randomized test prints its seed on failure, so any failing
/// case replays exactly; benchmarks use it so that two runs build the same workload.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    public var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A uniform integer in `range`.
    public mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &self) }
    /// A uniform integer in `0..<bound`.
    public mutating func int(below bound: Int) -> Int { Int.random(in: 0..<bound, using: &self) }
    /// True with `probability`.
    public mutating func chance(_ probability: Double) -> Bool { Double.random(in: 0..<1, using: &self) < probability }
    /// A uniform element of a non-empty array.
    public mutating func pick<T>(_ items: [T]) -> T { items[int(below: items.count)] }
}
