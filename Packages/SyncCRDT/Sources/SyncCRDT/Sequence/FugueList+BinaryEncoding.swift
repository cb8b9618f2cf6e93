import SyncModels

extension FugueList where Element: SequenceElement {
    /// The compact binary encoding of this list: its whole history (or, once compacted, its snapshot and the
    /// history since), then the content of the visible elements in document order, then — only with
    /// `includingDeletedContent` — the content of deleted elements, then any waiting operations.
    ///
    /// Without deleted content the encoding still restores every element, tombstone and origin, so the decoded
    /// list merges with any replica; it only cannot show what deleted text said.
    public func encoded(includingDeletedContent: Bool = false) -> [UInt8] {
        var flags: SequenceCore.EncodingFlags = []
        if !core.compactedVersion.isEmpty { flags.insert(.snapshot) }
        return encoded(flags: flags, includingDeletedContent: includingDeletedContent)
    }

    /// The state as snapshot runs (document order, explicit ids and origins), with or without the history
    /// that answers `operations(since:)`. A list decoded from a snapshot without history treats its whole
    /// version as compacted: peers behind it receive its snapshot.
    public func encodedSnapshot(includingHistory: Bool = true, includingDeletedContent: Bool = false) -> [UInt8] {
        var flags: SequenceCore.EncodingFlags = [.snapshot]
        if !includingHistory { flags.insert(.historyOmitted) }
        return encoded(flags: flags, includingDeletedContent: includingDeletedContent)
    }

    /// The bytes of the snapshot encoding without history that are not visible content: the ids, origins and
    /// tombstones that keep the state mergeable.
    public var stateMetadataByteCount: Int {
        var writer = BinaryWriter()
        writeContent(to: &writer, deleted: false)
        return encodedSnapshot(includingHistory: false).count - writer.bytes.count
    }

    private func encoded(flags: SequenceCore.EncodingFlags, includingDeletedContent: Bool) -> [UInt8] {
        var writer = BinaryWriter()
        var flags = flags
        if includingDeletedContent { flags.insert(.deletedContent) }
        core.encodeStructure(to: &writer, flags: flags)
        writeContent(to: &writer, deleted: false)
        if includingDeletedContent { writeContent(to: &writer, deleted: true) }
        writer.writeVarint(pending.count)
        for operation in pending { Self.write(operation, to: &writer) }
        return writer.bytes
    }

    /// Decodes what `encoded(includingDeletedContent:)` produced.
    /// - Throws: `SyncCRDTError` (`encoding.invalid`, `encoding.version`) for anything else.
    public init(encoded bytes: [UInt8]) throws {
        self.init()
        var reader = BinaryReader(bytes)
        let (flags, seenRanges) = try core.decodeStructure(from: &reader)
        try readContent(from: &reader, deleted: false)
        if flags.contains(.deletedContent) { try readContent(from: &reader, deleted: true) }
        if !flags.contains(.deletedContent) {
            core.tree.updateEachRun { run in if run.isDeleted { run.contentOffset = -1 } }
        }
        for _ in 0..<(try reader.readCount()) { pending.append(try Self.read(from: &reader)) }
        guard reader.isAtEnd else { throw SyncCRDTError.invalidEncoding("trailing bytes") }
        for (agent, ranges) in seenRanges.enumerated() {
            for range in ranges.ranges { core.seen[agent].insert(range) }
        }
    }

    /// The bytes of the encoding that are not visible content: ids, origins, tombstones, history.
    public var metadataByteCount: Int {
        var writer = BinaryWriter()
        writeContent(to: &writer, deleted: false)
        return encoded().count - writer.bytes.count
    }

    private func writeContent(to writer: inout BinaryWriter, deleted: Bool) {
        core.tree.forEachRun { run in
            guard run.isDeleted == deleted, run.contentOffset >= 0 else { return }
            let start = Int(run.contentOffset)
            Element.writeRun(contents[start..<start + run.count], to: &writer)
        }
    }

    /// Attaches content to the runs that carry some (provisional offsets >= 0), in document order.
    private mutating func readContent(from reader: inout BinaryReader, deleted: Bool) throws {
        var contents = self.contents
        try core.tree.updateEachRun { run in
            guard run.isDeleted == deleted, run.contentOffset >= 0 else { return }
            run.contentOffset = Int32(contents.count)
            contents.append(contentsOf: try Element.readRun(count: run.count, from: &reader))
        }
        self.contents = contents
    }

    private static func writeReplica(_ replica: ReplicaID, to writer: inout BinaryWriter) {
        writer.writeVarint(replica.high)
        writer.writeVarint(replica.low)
    }

    private static func readReplica(from reader: inout BinaryReader) throws -> ReplicaID {
        ReplicaID(high: try reader.readVarint(), low: try reader.readVarint())
    }

    private static func writeDot(_ dot: Dot?, to writer: inout BinaryWriter) {
        guard let dot else {
            writer.writeByte(0)
            return
        }
        writer.writeByte(1)
        writeReplica(dot.replica, to: &writer)
        writer.writeVarint(dot.counter)
    }

    private static func readDot(from reader: inout BinaryReader) throws -> Dot? {
        guard try reader.readByte() == 1 else { return nil }
        return Dot(replica: try readReplica(from: &reader), counter: try reader.readVarint())
    }

    static func write(_ operation: Operation, to writer: inout BinaryWriter) {
        switch operation {
        case .insert(let insertion):
            writer.writeByte(insertion.elements == nil ? 1 : 0)
            writeDot(insertion.id, to: &writer)
            writer.writeVarint(insertion.count)
            writeDot(insertion.originLeft, to: &writer)
            writeDot(insertion.rightParent, to: &writer)
            if let elements = insertion.elements { Element.writeRun(elements, to: &writer) }
        case .delete(let deletion):
            writer.writeByte(2)
            writeDot(deletion.id, to: &writer)
            writer.writeVarint(deletion.targets.count)
            for target in deletion.targets {
                writeReplica(target.replica, to: &writer)
                writer.writeVarint(target.first)
                writer.writeVarint(target.count)
            }
        }
    }

    static func read(from reader: inout BinaryReader) throws -> Operation {
        let kind = try reader.readByte()
        guard let id = try readDot(from: &reader), id.counter >= 1 else {
            throw SyncCRDTError.invalidEncoding("bad operation")
        }
        switch kind {
        case 0, 1:
            let count = try reader.readCount()
            guard count > 0, id.counter + UInt64(count) <= ItemID.maxCounter else {
                throw SyncCRDTError.invalidEncoding("bad operation")
            }
            let originLeft = try readDot(from: &reader)
            let rightParent = try readDot(from: &reader)
            let elements = kind == 0 ? try Element.readRun(count: count, from: &reader) : nil
            return .insert(
                Insertion(id: id, count: count, elements: elements, originLeft: originLeft, rightParent: rightParent))
        case 2:
            var targets: [DotRange] = []
            for _ in 0..<(try reader.readCount(limit: 1 << 20)) {
                let target = DotRange(
                    replica: try readReplica(from: &reader), first: try reader.readVarint(),
                    count: try reader.readVarint())
                guard target.first >= 1, target.count <= ItemID.maxCounter,
                    target.first + target.count <= ItemID.maxCounter
                else { throw SyncCRDTError.invalidEncoding("bad operation") }
                targets.append(target)
            }
            let deletion = Deletion(id: id, targets: targets)
            guard id.counter + UInt64(deletion.count) <= ItemID.maxCounter else {
                throw SyncCRDTError.invalidEncoding("bad operation")
            }
            return .delete(deletion)
        default:
            throw SyncCRDTError.invalidEncoding("bad operation")
        }
    }
}
