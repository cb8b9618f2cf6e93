import SyncModels

extension FugueList.Insertion: Codable where Element: SequenceElement {
    private enum CodingKeys: String, CodingKey { case id, count, elements, originLeft, rightParent }

    /// `{"id": Dot, "count": n, "elements": run | absent, "originLeft": Dot?, "rightParent": Dot?}`; a run of
    /// text is a string.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(count, forKey: .count)
        if let elements { try Element.encodeRun(elements, to: container.superEncoder(forKey: .elements)) }
        try container.encodeIfPresent(originLeft, forKey: .originLeft)
        try container.encodeIfPresent(rightParent, forKey: .rightParent)
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let id = try container.decode(Dot.self, forKey: .id)
        let count = try container.decode(Int.self, forKey: .count)
        var elements: [Element]?
        if container.contains(.elements) {
            elements = try Element.decodeRun(from: container.superDecoder(forKey: .elements))
        }
        guard count > 0, elements.map({ $0.count == count }) ?? true, id.counter >= 1,
            id.counter + UInt64(count) <= ItemID.maxCounter
        else {
            throw DecodingError.dataCorruptedError(
                forKey: .count, in: container, debugDescription: "count does not match the elements")
        }
        self.init(
            id: id, count: count, elements: elements,
            originLeft: try container.decodeIfPresent(Dot.self, forKey: .originLeft),
            rightParent: try container.decodeIfPresent(Dot.self, forKey: .rightParent))
    }
}

extension FugueList.Deletion: Codable {
    private enum CodingKeys: String, CodingKey { case id, targets }

    /// `{"id": Dot, "targets": [DotRange]}`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(targets, forKey: .targets)
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let id = try container.decode(Dot.self, forKey: .id)
        let targets = try container.decode([DotRange].self, forKey: .targets)
        let total = targets.reduce(UInt64(0)) { $0 &+ $1.count }
        guard id.counter >= 1, total <= ItemID.maxCounter, id.counter + total <= ItemID.maxCounter,
            targets.allSatisfy({
                $0.first >= 1 && $0.count <= ItemID.maxCounter && $0.first + $0.count <= ItemID.maxCounter
            })
        else {
            throw DecodingError.dataCorruptedError(
                forKey: .targets, in: container, debugDescription: "counter out of range")
        }
        self.init(id: id, targets: targets)
    }
}

extension FugueList.Operation: Codable where Element: SequenceElement {
    private enum CodingKeys: String, CodingKey { case insert, delete }

    /// `{"insert": Insertion}` or `{"delete": Deletion}`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .insert(let insertion): try container.encode(insertion, forKey: .insert)
        case .delete(let deletion): try container.encode(deletion, forKey: .delete)
        }
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        if container.contains(.insert) {
            self = .insert(try container.decode(FugueList.Insertion.self, forKey: .insert))
        } else {
            self = .delete(try container.decode(FugueList.Deletion.self, forKey: .delete))
        }
    }
}

extension FugueList: Codable where Element: SequenceElement {
    private enum CodingKeys: String, CodingKey { case version, seen, compactedVersion, operations }

    /// `{"version": 1, "seen": CausalContext, "compactedVersion": VersionVector, "operations": [Operation]}`:
    /// the operations rebuild the list (tombstones folded by compaction come as content-less insertions), and
    /// `seen` restores the dots of deletions folded away.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(CodableVersion.current, forKey: .version)
        try container.encode(version, forKey: .seen)
        try container.encode(core.compactedVersion, forKey: .compactedVersion)
        try container.encode(operations(since: nil), forKey: .operations)
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        try CodableVersion.check(container, key: .version)
        self.init()
        apply(contentsOf: try container.decode([Operation].self, forKey: .operations))
        core.markSeen(try container.decode(CausalContext.self, forKey: .seen))
        core.compactedVersion = try container.decode(VersionVector.self, forKey: .compactedVersion)
    }
}

extension SequenceCore {
    /// Records every dot of `context` as seen.
    mutating func markSeen(_ context: CausalContext) {
        for (replica, counter) in context.versionVector.counters where counter > 0 {
            let agent = agent(for: replica)
            seen[agent].insert(1..<counter + 1)
        }
        for dot in context.dotCloud {
            let agent = agent(for: dot.replica)
            seen[agent].insert(dot.counter..<dot.counter + 1)
        }
    }
}
