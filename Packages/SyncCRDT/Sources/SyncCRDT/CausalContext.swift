import SyncModels

/// A causal context: the set of dots a replica has seen, as a version vector plus a dot cloud.
///
/// Dots that arrive out of order wait in the cloud until the gap before them fills; `compact()` then folds them
/// into the vector. The context is what lets a dot-based CRDT tell "removed" (seen, no longer stored) from
/// "not seen yet", so no tombstone is ever kept for a removed element.
public struct CausalContext: Hashable, Sendable, CustomStringConvertible {
    /// The causally closed part.
    public private(set) var versionVector: VersionVector
    /// Dots seen beyond `versionVector`, never contiguous with it once compacted.
    public private(set) var dotCloud: Set<Dot>

    /// The empty context.
    public init() {
        versionVector = VersionVector()
        dotCloud = []
    }

    /// A context of exactly `dots`.
    public init(dots: some Sequence<Dot>) {
        self.init()
        for dot in dots { dotCloud.insert(dot) }
        compact()
    }

    /// A context that covers `versionVector` and `dots`.
    public init(versionVector: VersionVector, dots: some Sequence<Dot> = []) {
        self.versionVector = versionVector
        dotCloud = []
        for dot in dots where !versionVector.contains(dot) { dotCloud.insert(dot) }
        compact()
    }

    /// Whether `dot` has been seen.
    public func contains(_ dot: Dot) -> Bool {
        versionVector.contains(dot) || dotCloud.contains(dot)
    }

    /// Whether nothing has been seen.
    public var isEmpty: Bool { versionVector.isEmpty && dotCloud.isEmpty }

    /// Records `dot` as seen.
    public mutating func insert(_ dot: Dot) {
        guard !versionVector.contains(dot) else { return }
        if dot.counter == versionVector[dot.replica] + 1 {
            versionVector[dot.replica] = dot.counter
            foldCloud(for: dot.replica)
        } else {
            dotCloud.insert(dot)
        }
    }

    /// The next dot of `replica` this context has not seen (not recorded: merging the delta that uses it
    /// records it).
    ///
    /// A replica's own dots are contiguous, so the next one follows the vector.
    public func nextDot(for replica: ReplicaID) -> Dot {
        var counter = versionVector[replica] + 1
        while dotCloud.contains(Dot(replica: replica, counter: counter)) { counter += 1 }
        return Dot(replica: replica, counter: counter)
    }

    /// Joins `other` into this context.
    public mutating func merge(_ other: CausalContext) {
        versionVector.merge(other.versionVector)
        dotCloud.formUnion(other.dotCloud)
        compact()
    }

    /// Folds every cloud dot that has become contiguous with the vector into it.
    public mutating func compact() {
        guard !dotCloud.isEmpty else { return }
        dotCloud = dotCloud.filter { !versionVector.contains($0) }
        for replica in Set(dotCloud.map(\.replica)) { foldCloud(for: replica) }
    }

    /// Covers everything in `stable` (every replica has seen it, so this one has too) and drops the cloud dots
    /// it covers.
    public mutating func compact(stableAt stable: VersionVector) {
        versionVector.merge(stable)
        compact()
    }

    private mutating func foldCloud(for replica: ReplicaID) {
        var counter = versionVector[replica]
        while dotCloud.remove(Dot(replica: replica, counter: counter + 1)) != nil { counter += 1 }
        versionVector[replica] = counter
    }

    public var description: String {
        versionVector.description + (dotCloud.isEmpty ? "" : " + \(dotCloud.sorted())")
    }
}

extension CausalContext: Codable {
    private enum CodingKeys: String, CodingKey { case version, versionVector, dotCloud }

    /// `{"version": 1, "versionVector": {...}, "dotCloud": [dots]}`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(CodableVersion.current, forKey: .version)
        try container.encode(versionVector, forKey: .versionVector)
        try container.encode(dotCloud.sorted(), forKey: .dotCloud)
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        try CodableVersion.check(container, key: .version)
        self.init(
            versionVector: try container.decode(VersionVector.self, forKey: .versionVector),
            dots: try container.decode([Dot].self, forKey: .dotCloud))
    }
}

/// A causal context is itself a join-semilattice (set union of dots).
extension CausalContext: CRDT {}
