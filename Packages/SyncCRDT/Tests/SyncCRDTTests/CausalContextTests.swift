import PropertyBased
import SyncCRDT
import SyncModels
import SyncTestSupport
import Testing

@Suite(.shrinking(false), .onOwnThreads) struct CausalContextTests {
    @Test func versionVectorsOrderCausally() {
        let a = VersionVector([replica(0): 2, replica(1): 1])
        let b = VersionVector([replica(0): 3, replica(1): 1])
        let c = VersionVector([replica(0): 1, replica(1): 5])
        #expect(a.compare(b) == .before && b.compare(a) == .after && a.compare(a) == .equal)
        #expect(b.compare(c) == .concurrent)
        #expect(VersionVector.meet(of: [a, b, c]) == VersionVector([replica(0): 1, replica(1): 1]))
        #expect(b.merging(c) == VersionVector([replica(0): 3, replica(1): 5]))
    }

    @Test func outOfOrderDotsWaitInTheCloud() {
        var context = CausalContext()
        context.insert(Dot(replica: replica(0), counter: 3))
        context.insert(Dot(replica: replica(0), counter: 1))
        #expect(context.versionVector[replica(0)] == 1 && context.dotCloud.count == 1)
        #expect(context.nextDot(for: replica(0)) == Dot(replica: replica(0), counter: 2))
        context.insert(Dot(replica: replica(0), counter: 2))
        #expect(context.versionVector[replica(0)] == 3 && context.dotCloud.isEmpty)
    }

    @Test func mergeLaws() async {
        await propertyCheck(count: 2000, input: Gen.uint64()) { seed in
            var random = SeededRandom(seed: seed)
            func randomContext() -> CausalContext {
                CausalContext(
                    dots: (0..<random.int(0...12)).map { _ in
                        Dot(replica: replica(random.int(0...2)), counter: UInt64(random.int(1...8)))
                    })
            }
            let (a, b, c) = (randomContext(), randomContext(), randomContext())
            expectMergeLaws(a, b, c, seed: seed)
            let union = a.merging(b)
            for dot in a.dotCloud.union(b.dotCloud) { #expect(union.contains(dot), "seed \(seed)") }
        }
    }
}
