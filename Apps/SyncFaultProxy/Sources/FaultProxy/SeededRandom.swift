/// SplitMix64: a small, fast generator whose every draw follows from its seed, so that a run's faults can
/// be reproduced. Not for anything secret.
public struct SeededRandom: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    /// The generator of one stream among many from one seed (a connection's, by its index).
    public init(seed: UInt64, stream: UInt64) {
        var mixer = SeededRandom(seed: seed ^ (stream &* 0xD6E8_FEB8_6659_FD93))
        state = mixer.next()
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A uniform draw in `0..<1`.
    public mutating func unit() -> Double { Double(next() >> 11) / Double(1 << 53) }
}
