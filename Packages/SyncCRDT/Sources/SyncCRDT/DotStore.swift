import SyncModels

/// The causal join of dot-keyed stores, shared by the dot-based CRDTs.
///
/// An entry survives a join if both sides hold it, or if one side holds it and the other has not seen its dot:
/// a dot seen but no longer held means "removed", which is how removes propagate without tombstones.
enum DotStore {
    static func join<Value>(
        _ left: [Dot: Value], _ leftContext: CausalContext,
        _ right: [Dot: Value], _ rightContext: CausalContext
    ) -> [Dot: Value] {
        var result: [Dot: Value] = [:]
        for (dot, value) in left where right[dot] != nil || !rightContext.contains(dot) {
            result[dot] = value
        }
        for (dot, value) in right where left[dot] == nil && !leftContext.contains(dot) {
            result[dot] = value
        }
        return result
    }

    static func join(
        _ left: Set<Dot>, _ leftContext: CausalContext, _ right: Set<Dot>, _ rightContext: CausalContext
    ) -> Set<Dot> {
        var result = left.filter { right.contains($0) || !rightContext.contains($0) }
        for dot in right where !leftContext.contains(dot) { result.insert(dot) }
        return result
    }
}
