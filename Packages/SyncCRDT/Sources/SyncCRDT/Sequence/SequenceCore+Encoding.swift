import SyncModels

/// The compact binary form of a sequence's structure (everything but content).
///
/// Layout: magic `FUG`, format byte, flags, the replica table, the compacted version, the seen dots, the
/// snapshot runs (compacted lists only) and the history. An uncompacted list stores only its history, and local
/// edits in it only store where they happened (a position relative to the previous edit) and how many elements
/// they touched: decoding replays them, which recomputes every origin. Content follows, in document order.
extension SequenceCore {
    static let magic: [UInt8] = [0x46, 0x55, 0x47]
    static let formatVersion: UInt8 = 1

    struct EncodingFlags: OptionSet {
        let rawValue: UInt64
        /// Deleted elements keep their content in the encoding.
        static let deletedContent = EncodingFlags(rawValue: 1)
        /// The tree is stored as snapshot runs; the history that follows is not replayed.
        static let snapshot = EncodingFlags(rawValue: 2)
    }

    private enum EntryKind: UInt64 {
        case localInsert = 0
        case localDelete = 1
        case remoteInsert = 2
        case remoteDelete = 3
    }

    private static let flagPosition: UInt64 = 1
    private static let flagReversedOrNoContent: UInt64 = 2
    private static let flagExplicitID: UInt64 = 4

    func writeReference(_ item: ItemID, to writer: inout BinaryWriter) {
        if item.isNone {
            writer.writeVarint(UInt64(0))
        } else {
            writer.writeVarint(item.agent + 1)
            writer.writeVarint(item.counter)
        }
    }

    func readReference(from reader: inout BinaryReader) throws -> ItemID {
        let agent = try reader.readCount()
        guard agent > 0 else { return .none }
        guard agent <= replicas.count else { throw SyncCRDTError.invalidEncoding("unknown replica") }
        let counter = try reader.readVarint()
        guard counter >= 1 && counter < ItemID.maxCounter else { throw SyncCRDTError.invalidEncoding("bad counter") }
        return ItemID(agent: agent - 1, counter: counter)
    }

    /// Writes everything but content.
    func encodeStructure(to writer: inout BinaryWriter, flags: EncodingFlags) {
        writer.writeRaw(Self.magic)
        writer.writeByte(Self.formatVersion)
        writer.writeVarint(flags.rawValue)
        writer.writeVarint(replicas.count)
        for replica in replicas {
            for shift in stride(from: 56, through: 0, by: -8) {
                writer.writeByte(UInt8(truncatingIfNeeded: replica.high >> UInt64(shift)))
            }
            for shift in stride(from: 56, through: 0, by: -8) {
                writer.writeByte(UInt8(truncatingIfNeeded: replica.low >> UInt64(shift)))
            }
        }
        writer.writeVarint(compactedVersion.counters.count)
        for (replica, counter) in compactedVersion.counters.sorted(by: { $0.key < $1.key }) {
            writer.writeVarint(agents[replica]!)
            writer.writeVarint(counter)
        }
        for ranges in seen {
            writer.writeVarint(ranges.ranges.count)
            var previous: UInt64 = 0
            for range in ranges.ranges {
                writer.writeVarint(range.lowerBound - previous)
                writer.writeVarint(range.upperBound - range.lowerBound)
                previous = range.upperBound
            }
        }
        if flags.contains(.snapshot) {
            writer.writeVarint(tree.runCount)
            tree.forEachRun { run in
                let hasContent = run.contentOffset >= 0 && (!run.isDeleted || flags.contains(.deletedContent))
                writer.writeVarint(UInt64(run.length) << 2 | (run.isDeleted ? 2 : 0) | (hasContent ? 1 : 0))
                writeReference(run.id, to: &writer)
                writeReference(run.originLeft, to: &writer)
                writeReference(run.rightParent, to: &writer)
            }
        }
        writer.writeVarint(log.count)
        var lastEnd = [UInt64](repeating: 0, count: replicas.count)
        var agent = 0
        var cursor = 0
        for entry in log {
            let isLocal = entry.isLocal && !flags.contains(.snapshot)
            let kind: EntryKind =
                switch (entry.kind, isLocal) {
                case (.insert, true): .localInsert
                case (.delete, true): .localDelete
                case (.insert, false): .remoteInsert
                case (.delete, false): .remoteDelete
                }
            var bits: UInt64 = 0
            let explicit = entry.id.agent != agent || entry.id.counter != lastEnd[entry.id.agent] + 1
            if explicit { bits |= Self.flagExplicitID }
            var delta = 0
            if isLocal {
                let expected = entry.kind == .delete && entry.isReversed ? cursor - entry.count : cursor
                delta = entry.position - expected
                if delta != 0 { bits |= Self.flagPosition }
            }
            if entry.kind == .delete && entry.isReversed { bits |= Self.flagReversedOrNoContent }
            if kind == .remoteInsert && !hasContent(entry) { bits |= Self.flagReversedOrNoContent }
            writer.writeVarint(UInt64(entry.length) << 5 | kind.rawValue << 3 | bits)
            if explicit {
                writer.writeVarint(entry.id.agent)
                writer.writeSigned(Int64(bitPattern: entry.id.counter &- (lastEnd[entry.id.agent] + 1)))
            }
            agent = entry.id.agent
            lastEnd[agent] = max(lastEnd[agent], entry.id.counter + UInt64(entry.count) - 1)
            switch kind {
            case .localInsert:
                if delta != 0 { writer.writeSigned(Int64(delta)) }
                cursor = entry.position + entry.count
            case .localDelete:
                if delta != 0 { writer.writeSigned(Int64(delta)) }
                cursor = entry.position
            case .remoteInsert:
                writeReference(entry.target, to: &writer)
                writeReference(entry.rightParent, to: &writer)
            case .remoteDelete:
                writeReference(entry.target, to: &writer)
            }
        }
    }

    /// Whether the elements of an insert entry still have content (content-less inserts are tombstones that
    /// arrived without it).
    private func hasContent(_ entry: LogEntry) -> Bool {
        guard tree.contains(entry.id) else { return false }
        let cursor = tree.find(entry.id)
        return tree[cursor.leaf, cursor.run].contentOffset >= 0 || !tree[cursor.leaf, cursor.run].isDeleted
    }

    /// Reads what `encodeStructure` wrote into this (empty) core, replaying the history. Runs get provisional
    /// content offsets; returns the flags and the seen dots to restore after content is attached.
    mutating func decodeStructure(from reader: inout BinaryReader) throws -> (EncodingFlags, [DotRanges]) {
        guard Array(try reader.readRaw(count: 3)) == Self.magic else {
            throw SyncCRDTError.invalidEncoding("not an encoded sequence")
        }
        let format = try reader.readByte()
        guard format == Self.formatVersion else { throw SyncCRDTError.unsupportedVersion(Int(format)) }
        let flags = EncodingFlags(rawValue: try reader.readVarint())
        let replicaCount = try reader.readCount(limit: 1 << 24)
        for _ in 0..<replicaCount {
            let bytes = Array(try reader.readRaw(count: 16))
            let high = bytes[0..<8].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            let low = bytes[8..<16].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            let replica = ReplicaID(high: high, low: low)
            guard agents[replica] == nil else { throw SyncCRDTError.invalidEncoding("duplicate replica") }
            _ = agent(for: replica)
        }
        lastReplica = nil
        for _ in 0..<(try reader.readCount(limit: replicaCount)) {
            let agent = try reader.readCount()
            guard agent < replicaCount else { throw SyncCRDTError.invalidEncoding("unknown replica") }
            compactedVersion[replicas[agent]] = try reader.readVarint()
        }
        var seenRanges: [DotRanges] = []
        for _ in 0..<replicaCount {
            var ranges = DotRanges()
            var previous: UInt64 = 0
            for _ in 0..<(try reader.readCount()) {
                let lower = previous &+ (try reader.readVarint())
                let upper = lower &+ (try reader.readVarint())
                guard lower >= 1, upper > lower, upper <= ItemID.maxCounter else {
                    throw SyncCRDTError.invalidEncoding("bad seen range")
                }
                ranges.insert(lower..<upper)
                previous = upper
            }
            seenRanges.append(ranges)
        }
        var virtualContent: Int32 = 0
        if flags.contains(.snapshot) {
            var runs: [Run] = []
            for _ in 0..<(try reader.readCount()) {
                let tag = try reader.readVarint()
                let length = Int32(truncatingIfNeeded: tag >> 2)
                let id = try readReference(from: &reader)
                guard length > 0, !id.isNone, id.counter + UInt64(length) <= ItemID.maxCounter else {
                    throw SyncCRDTError.invalidEncoding("bad run")
                }
                let originLeft = try readReference(from: &reader)
                let rightParent = try readReference(from: &reader)
                let hasContent = tag & 1 != 0
                runs.append(
                    Run(
                        id: id, originLeft: originLeft, rightParent: rightParent, length: length,
                        contentOffset: hasContent ? virtualContent : -1, isDeleted: tag & 2 != 0))
                if hasContent { virtualContent += length }
            }
            tree = RunTree(runs: runs)
        }
        let entryCount = try reader.readCount()
        var lastEnd = [UInt64](repeating: 0, count: replicaCount)
        var agent = 0
        var cursor = 0
        for _ in 0..<entryCount {
            let tag = try reader.readVarint()
            let length = Int(truncatingIfNeeded: tag >> 5)
            guard let kind = EntryKind(rawValue: (tag >> 3) & 3), length > 0, length < Int(Int32.max) else {
                throw SyncCRDTError.invalidEncoding("bad history entry")
            }
            if tag & Self.flagExplicitID != 0 {
                agent = try reader.readCount()
                guard agent < replicaCount else { throw SyncCRDTError.invalidEncoding("unknown replica") }
            }
            guard replicaCount > 0 else { throw SyncCRDTError.invalidEncoding("unknown replica") }
            var counter = lastEnd[agent] + 1
            if tag & Self.flagExplicitID != 0 { counter = counter &+ UInt64(bitPattern: try reader.readSigned()) }
            guard counter >= 1, counter + UInt64(length) <= ItemID.maxCounter else {
                throw SyncCRDTError.invalidEncoding("bad counter")
            }
            lastEnd[agent] = max(lastEnd[agent], counter + UInt64(length) - 1)
            let id = ItemID(agent: agent, counter: counter)
            let replay = !flags.contains(.snapshot)
            switch kind {
            case .localInsert, .localDelete:
                guard replay else { throw SyncCRDTError.invalidEncoding("positional entry in a snapshot") }
                let reversed = kind == .localDelete && tag & Self.flagReversedOrNoContent != 0
                var position = reversed ? cursor - length : cursor
                if tag & Self.flagPosition != 0 { position += Int(try reader.readSigned()) }
                guard
                    seen[agent].missing(in: counter..<counter + UInt64(length)) == [counter..<counter + UInt64(length)]
                else { throw SyncCRDTError.invalidEncoding("ids used twice") }
                if kind == .localInsert {
                    guard position >= 0 && position <= tree.visibleCount else {
                        throw SyncCRDTError.invalidEncoding("position out of range")
                    }
                    _ = localInsert(
                        count: length, contentOffset: virtualContent, at: position, agent: agent, counter: counter)
                    virtualContent += Int32(length)
                    cursor = position + length
                } else {
                    guard position >= 0 && position + length <= tree.visibleCount else {
                        throw SyncCRDTError.invalidEncoding("position out of range")
                    }
                    if reversed {
                        // Backspaces, one at a time, so each counter deletes the same element as it did.
                        for step in 0..<length {
                            _ = localRemove(
                                at: position + length - 1 - step, count: 1, agent: agent,
                                counter: counter + UInt64(step))
                        }
                    } else {
                        _ = localRemove(at: position, count: length, agent: agent, counter: counter)
                    }
                    cursor = position
                }
            case .remoteInsert:
                let originLeft = try readReference(from: &reader)
                let rightParent = try readReference(from: &reader)
                let hasContent = tag & Self.flagReversedOrNoContent == 0
                if replay {
                    guard
                        (originLeft.isNone || tree.contains(originLeft))
                            && (rightParent.isNone || tree.contains(rightParent)),
                        seen[agent].missing(in: counter..<counter + UInt64(length)) == [
                            counter..<counter + UInt64(length)
                        ]
                    else { throw SyncCRDTError.invalidEncoding("bad insert") }
                    integrateRemote(
                        Run(
                            id: id, originLeft: originLeft, rightParent: rightParent, length: Int32(length),
                            contentOffset: hasContent ? virtualContent : -1, isDeleted: !hasContent))
                    if hasContent { virtualContent += Int32(length) }
                } else {
                    appendLog(
                        LogEntry(
                            kind: .insert, isLocal: false, isReversed: false, id: id, length: Int32(length),
                            target: originLeft, rightParent: rightParent, position: -1))
                }
            case .remoteDelete:
                let target = try readReference(from: &reader)
                guard !target.isNone, target.counter + UInt64(length) <= ItemID.maxCounter else {
                    throw SyncCRDTError.invalidEncoding("bad delete")
                }
                let reversed = tag & Self.flagReversedOrNoContent != 0
                if replay {
                    let first = reversed ? target.advanced(by: 1 - length) : target
                    guard first.counter >= 1, seen[first.agent].covers(first.counter..<first.counter + UInt64(length))
                    else {
                        throw SyncCRDTError.invalidEncoding("bad delete")
                    }
                    if reversed {
                        for step in 0..<length {
                            let dot = counter + UInt64(step)
                            applyRemoteDeletion(
                                firstDot: id.advanced(by: step), target: target.advanced(by: -step), count: 1,
                                missing: [dot..<dot + 1])
                        }
                    } else {
                        applyRemoteDeletion(
                            firstDot: id, target: first, count: length, missing: [counter..<counter + UInt64(length)])
                    }
                    seen[agent].insert(counter..<counter + UInt64(length))
                } else {
                    appendLog(
                        LogEntry(
                            kind: .delete, isLocal: false, isReversed: reversed, id: id, length: Int32(length),
                            target: target, rightParent: .none, position: -1))
                }
            }
        }
        cursorCache.leaf = -1
        return (flags, seenRanges)
    }
}
