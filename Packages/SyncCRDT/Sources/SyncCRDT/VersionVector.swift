import SyncModels

/// A version vector: for each replica, the number of its dots seen (dots `1...n`).
///
/// It summarizes a causally closed set of dots. Version vectors are partially ordered; `merge` is the pointwise
/// maximum (the join) and `meet` the pointwise minimum, which gives the causally stable point of a set of
/// replicas.
public struct VersionVector: Hashable, Sendable, CustomStringConvertible {
    /// Highest contiguous counter per replica; replicas with zero are never stored.
    public private(set) var counters: [ReplicaID: UInt64]

    /// The empty version vector.
    public init() { counters = [:] }

    /// A version vector from explicit counters (zeros are dropped).
    public init(_ counters: [ReplicaID: UInt64]) {
        self.counters = counters.filter { $0.value > 0 }
    }

    /// The number of `replica`'s dots covered (0 when none).
    public subscript(replica: ReplicaID) -> UInt64 {
        get { counters[replica] ?? 0 }
        set { counters[replica] = newValue == 0 ? nil : newValue }
    }

    /// Whether `dot` is covered.
    public func contains(_ dot: Dot) -> Bool { dot.counter <= self[dot.replica] }

    /// Whether nothing is covered.
    public var isEmpty: Bool { counters.isEmpty }

    /// Takes the next dot of `replica` and covers it.
    public mutating func advance(_ replica: ReplicaID) -> Dot {
        let next = self[replica] + 1
        self[replica] = next
        return Dot(replica: replica, counter: next)
    }

    /// Joins `other` into this vector (pointwise maximum).
    public mutating func merge(_ other: VersionVector) {
        for (replica, counter) in other.counters where counter > self[replica] {
            counters[replica] = counter
        }
    }

    /// The pointwise minimum of this vector and `other`: what both have seen.
    public func meet(_ other: VersionVector) -> VersionVector {
        var result = VersionVector()
        for (replica, counter) in counters {
            result[replica] = min(counter, other[replica])
        }
        return result
    }

    /// The causally stable point of several replicas: the pointwise minimum of their vectors.
    public static func meet(of vectors: some Sequence<VersionVector>) -> VersionVector {
        var iterator = vectors.makeIterator()
        guard var result = iterator.next() else { return VersionVector() }
        while let next = iterator.next() { result = result.meet(next) }
        return result
    }

    /// Whether every dot covered by this vector is covered by `other`.
    public func isCovered(by other: VersionVector) -> Bool {
        counters.allSatisfy { $0.value <= other[$0.key] }
    }

    /// How two version vectors relate in causal order.
    public enum Ordering: Sendable, Hashable {
        case before, equal, after, concurrent
    }

    /// Compares this vector with `other` in causal order.
    public func compare(_ other: VersionVector) -> Ordering {
        switch (isCovered(by: other), other.isCovered(by: self)) {
        case (true, true): .equal
        case (true, false): .before
        case (false, true): .after
        case (false, false): .concurrent
        }
    }

    public var description: String {
        "[" + counters.sorted { $0.key < $1.key }.map { "\($0.key):\($0.value)" }.joined(separator: ", ") + "]"
    }
}

extension VersionVector: Codable {
    private enum CodingKeys: String, CodingKey { case version, counters }

    /// `{"version": 1, "counters": {"<replica hex>": n, ...}}`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(1, forKey: .version)
        var byText: [String: UInt64] = [:]
        for (replica, counter) in counters { byText[replica.description] = counter }
        try container.encode(byText, forKey: .counters)
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        try CodableVersion.check(container, key: .version)
        let byText = try container.decode([String: UInt64].self, forKey: .counters)
        var counters: [ReplicaID: UInt64] = [:]
        for (text, counter) in byText {
            guard let replica = try? ReplicaID(text) else {
                throw DecodingError.dataCorruptedError(
                    forKey: .counters, in: container, debugDescription: "not a replica id")
            }
            counters[replica] = counter
        }
        self.init(counters)
    }
}

/// A version vector is a join-semilattice (pointwise maximum).
extension VersionVector: CRDT {}

/// The `version` field every Codable CRDT writes, so that later formats can be told apart.
enum CodableVersion {
    static let current = 1

    static func check<Key: CodingKey>(_ container: KeyedDecodingContainer<Key>, key: Key) throws {
        let version = try container.decode(Int.self, forKey: key)
        guard version == current else {
            throw DecodingError.dataCorruptedError(
                forKey: key, in: container, debugDescription: "unsupported version \(version)")
        }
    }
}
