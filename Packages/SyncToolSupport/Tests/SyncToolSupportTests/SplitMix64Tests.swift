import SyncToolSupport
import Testing

@Suite struct SplitMix64Tests {
    @Test func splitMix64ReplaysFromItsSeed() {
        var first = SplitMix64(seed: 42)
        var second = SplitMix64(seed: 42)
        let a = (0..<16).map { _ in first.next() }
        #expect(a == (0..<16).map { _ in second.next() })
        // The published SplitMix64 sequence for seed 0 starts here.
        var zero = SplitMix64(seed: 0)
        #expect(zero.next() == 0xE220_A839_7B1D_CDAF)
    }
}
