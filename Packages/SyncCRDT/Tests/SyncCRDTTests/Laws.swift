import SyncCRDT
import Testing

/// The merge laws every CRDT must satisfy, checked on three states.
func expectMergeLaws<T: CRDT>(
    _ a: T, _ b: T, _ c: T, seed: UInt64, sourceLocation: SourceLocation = #_sourceLocation
) {
    #expect(
        Bool(a.merging(b) == b.merging(a)), "merge is not commutative (seed \(seed))", sourceLocation: sourceLocation)
    #expect(
        Bool(a.merging(b).merging(c) == a.merging(b.merging(c))), "merge is not associative (seed \(seed))",
        sourceLocation: sourceLocation)
    #expect(Bool(a.merging(a) == a), "merge is not idempotent (seed \(seed))", sourceLocation: sourceLocation)
    #expect(
        a.merging(b).merging(b) == a.merging(b), "merging twice differs (seed \(seed))", sourceLocation: sourceLocation)
}

/// Every state equal to the first.
func expectConverged<T: Equatable>(
    _ states: [T], seed: UInt64, sourceLocation: SourceLocation = #_sourceLocation
) {
    for (index, state) in states.enumerated().dropFirst() {
        #expect(
            state == states[0], "replica \(index) diverged from replica 0 (seed \(seed))",
            sourceLocation: sourceLocation)
    }
}
