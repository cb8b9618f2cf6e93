import SyncModels

/// The compact binary form of a sequence's structure (everything but content).
///
/// Layout: magic `FUG`, format byte, flags, the replica table, the compacted version and the seen dots as
/// varints; then one range-coded block holding the snapshot runs (compacted lists only) and the history. In an
/// uncompacted list the history is everything, and local edits in it only store where they happened (relative
/// to the previous edit) and how many elements they touched: decoding replays them, which recomputes every id
/// and origin. Content follows, in document order.
extension SequenceCore {
    static let magic: [UInt8] = [0x46, 0x55, 0x47]
    static let formatVersion: UInt8 = 2

    struct EncodingFlags: OptionSet {
        let rawValue: UInt64
        /// Deleted elements keep their content in the encoding.
        static let deletedContent = EncodingFlags(rawValue: 1)
        /// The tree is stored as snapshot runs; the history that follows is not replayed.
        static let snapshot = EncodingFlags(rawValue: 2)
        /// A snapshot without its history: the decoded list treats its whole version as compacted.
        static let historyOmitted = EncodingFlags(rawValue: 4)
    }

    /// The kinds of history entries, as coded.
    enum CodedKind: Int {
        case localInsert = 0
        case localDelete = 1
        case remoteInsert = 2
        case remoteDelete = 3
    }

    /// One history entry as coded: local deletes made at one position are merged (the decoder replays them as
    /// one deletion, which deletes the same elements with the same counters).
    struct CodedEntry {
        var kind: CodedKind
        var id: ItemID
        var length: Int
        var isReversed: Bool
        var position: Int
        var target: ItemID
        var rightParent: ItemID
        var hasContent: Bool
    }

    /// The adaptive contexts of the block; encoder and decoder evolve identical copies.
    struct HistoryModel {
        /// A fresh model to copy: its tables are shared until written, so coding a short history allocates
        /// only the few it uses (a save encodes a model per list of every note).
        static let initial = HistoryModel()

        var isRemote = [UInt16](repeating: RangeEncoder.half, count: 5)
        var isDelete = [UInt16](repeating: RangeEncoder.half, count: 10)
        var isReversed = [UInt16](repeating: RangeEncoder.half, count: 5)
        var explicitID = [UInt16](repeating: RangeEncoder.half, count: 5)
        var hasDelta = [UInt16](repeating: RangeEncoder.half, count: 15)
        var hasContent = RangeEncoder.half
        var lengths = [AdaptiveInteger](repeating: AdaptiveInteger(), count: 5)
        var deltas = [AdaptiveSigned](repeating: AdaptiveSigned(), count: 3)
        var agent = AdaptiveInteger()
        var counter = AdaptiveSigned()
        var referenceKind = [UInt16](repeating: RangeEncoder.half, count: 6)
        var referenceAgent = AdaptiveInteger()
        var referenceCounter = AdaptiveSigned()
        var count = AdaptiveInteger()
        var runDeleted = [UInt16](repeating: RangeEncoder.half, count: 2)
        var runContent = [UInt16](repeating: RangeEncoder.half, count: 2)
        var runSameAgent = RangeEncoder.half
        var runLength = [AdaptiveInteger](repeating: AdaptiveInteger(), count: 2)

        /// 0: local insert, 1: local delete, 2: local backspaces, 3: remote insert, 4: remote delete.
        static func lengthContext(_ entry: CodedEntry) -> Int {
            switch entry.kind {
            case .localInsert: 0
            case .localDelete: entry.isReversed ? 2 : 1
            case .remoteInsert: 3
            case .remoteDelete: 4
            }
        }
    }

    /// The entries to code, with consecutive local deletes at one position merged.
    func codedEntries(snapshot: Bool) -> [CodedEntry] {
        var result: [CodedEntry] = []
        result.reserveCapacity(log.count)
        for entry in log {
            let local = entry.isLocal && !snapshot
            let kind: CodedKind =
                switch (entry.kind, local) {
                case (.insert, true): .localInsert
                case (.delete, true): .localDelete
                case (.insert, false): .remoteInsert
                case (.delete, false): .remoteDelete
                }
            if kind == .localDelete, !entry.isReversed, let last = result.last, last.kind == .localDelete,
                !last.isReversed, last.position == entry.position, last.id.advanced(by: last.length) == entry.id
            {
                result[result.count - 1].length += entry.count
                continue
            }
            result.append(
                CodedEntry(
                    kind: kind, id: entry.id, length: entry.count, isReversed: entry.isReversed,
                    position: entry.position,
                    target: entry.target, rightParent: entry.rightParent,
                    hasContent: kind != .remoteInsert || hasContent(entry)))
        }
        return result
    }

    /// Whether the elements of an insert entry still have content (content-less inserts are tombstones that
    /// arrived without it).
    private func hasContent(_ entry: LogEntry) -> Bool {
        guard tree.contains(entry.id) else { return false }
        let cursor = tree.find(entry.id)
        return tree[cursor.leaf, cursor.run].contentOffset >= 0 || !tree[cursor.leaf, cursor.run].isDeleted
    }

    // MARK: References

    /// Codes an element reference relative to `base` (an id nearby, usually of the same replica).
    private static func encodeReference(
        _ item: ItemID, base: ItemID, previous: ItemID, context: Int, model: inout HistoryModel,
        encoder: inout RangeEncoder
    ) {
        // 0: none, 1: the element just before `base`... coded as two adaptive decisions then an explicit id.
        encoder.encode(item.isNone, &model.referenceKind[context * 3])
        if item.isNone { return }
        encoder.encode(item == previous, &model.referenceKind[context * 3 + 1])
        if item == previous { return }
        let sameAgent = item.agent == base.agent
        encoder.encode(sameAgent, &model.referenceKind[context * 3 + 2])
        if !sameAgent { model.referenceAgent.encode(UInt64(item.agent), with: &encoder) }
        model.referenceCounter.encode(Int64(bitPattern: base.counter &- item.counter), with: &encoder)
    }

    private func decodeReference(
        base: ItemID, previous: ItemID, context: Int, model: inout HistoryModel, decoder: inout RangeDecoder
    ) throws -> ItemID {
        if decoder.decode(&model.referenceKind[context * 3]) { return .none }
        if decoder.decode(&model.referenceKind[context * 3 + 1]) { return previous }
        var agent = base.agent
        if !decoder.decode(&model.referenceKind[context * 3 + 2]) {
            let decoded = model.referenceAgent.decode(with: &decoder)
            guard decoded < UInt64(replicas.count) else { throw SyncCRDTError.invalidEncoding("unknown replica") }
            agent = Int(decoded)
        }
        let counter = base.counter &- UInt64(bitPattern: model.referenceCounter.decode(with: &decoder))
        guard counter >= 1 && counter < ItemID.maxCounter else { throw SyncCRDTError.invalidEncoding("bad counter") }
        return ItemID(agent: agent, counter: counter)
    }

    // MARK: Writing

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
        var encoder = RangeEncoder()
        var model = HistoryModel.initial
        if flags.contains(.snapshot) { encodeSnapshot(flags: flags, model: &model, encoder: &encoder) }
        encodeHistory(
            flags.contains(.historyOmitted) ? [] : codedEntries(snapshot: flags.contains(.snapshot)), model: &model,
            encoder: &encoder)
        writer.writeBytes(encoder.finish())
    }

    private func encodeSnapshot(flags: EncodingFlags, model: inout HistoryModel, encoder: inout RangeEncoder) {
        model.count.encode(UInt64(tree.runCount), with: &encoder)
        var previous = ItemID(agent: 0, counter: 0)
        var previousLast = ItemID.none
        var previousDeleted = 0
        tree.forEachRun { run in
            encoder.encode(run.isDeleted, &model.runDeleted[previousDeleted])
            let hasContent = run.contentOffset >= 0 && (!run.isDeleted || flags.contains(.deletedContent))
            encoder.encode(hasContent, &model.runContent[run.isDeleted ? 1 : 0])
            model.runLength[run.isDeleted ? 1 : 0].encode(UInt64(run.length - 1), with: &encoder)
            encoder.encode(run.id.agent == previous.agent, &model.runSameAgent)
            if run.id.agent != previous.agent { model.agent.encode(UInt64(run.id.agent), with: &encoder) }
            let expected = run.id.agent == previous.agent ? previous.counter + 1 : 1
            model.counter.encode(Int64(bitPattern: run.id.counter &- expected), with: &encoder)
            Self.encodeReference(
                run.originLeft, base: run.id, previous: previousLast, context: 0, model: &model, encoder: &encoder)
            Self.encodeReference(
                run.rightParent, base: run.id, previous: .none, context: 1, model: &model, encoder: &encoder)
            previous = run.lastID
            previousLast = run.lastID
            previousDeleted = run.isDeleted ? 1 : 0
        }
    }

    private func encodeHistory(_ entries: [CodedEntry], model: inout HistoryModel, encoder: inout RangeEncoder) {
        model.count.encode(UInt64(entries.count), with: &encoder)
        var lastEnd = [UInt64](repeating: 0, count: replicas.count)
        var agent = 0
        var cursor = 0
        var previousKind = 4
        for entry in entries {
            let remote = entry.kind == .remoteInsert || entry.kind == .remoteDelete
            let delete = entry.kind == .localDelete || entry.kind == .remoteDelete
            encoder.encode(remote, &model.isRemote[previousKind])
            encoder.encode(delete, &model.isDelete[previousKind * 2 + (remote ? 1 : 0)])
            if delete { encoder.encode(entry.isReversed, &model.isReversed[previousKind]) }
            let explicit = entry.id.agent != agent || entry.id.counter != lastEnd[entry.id.agent] + 1
            encoder.encode(explicit, &model.explicitID[entry.kind.rawValue])
            if explicit {
                model.agent.encode(UInt64(entry.id.agent), with: &encoder)
                model.counter.encode(
                    Int64(bitPattern: entry.id.counter &- (lastEnd[entry.id.agent] + 1)), with: &encoder)
            }
            let lengthContext = HistoryModel.lengthContext(entry)
            model.lengths[lengthContext].encode(UInt64(entry.length - 1), with: &encoder)
            agent = entry.id.agent
            lastEnd[agent] = max(lastEnd[agent], entry.id.counter + UInt64(entry.length) - 1)
            switch entry.kind {
            case .localInsert, .localDelete:
                let expected = entry.isReversed ? cursor - entry.length : cursor
                let delta = entry.position - expected
                encoder.encode(delta != 0, &model.hasDelta[lengthContext * 5 + previousKind])
                if delta != 0 { model.deltas[lengthContext].encode(Int64(delta), with: &encoder) }
                cursor = entry.kind == .localInsert ? entry.position + entry.length : entry.position
            case .remoteInsert:
                encoder.encode(entry.hasContent, &model.hasContent)
                Self.encodeReference(
                    entry.target, base: entry.id, previous: entry.id.advanced(by: -1), context: 0, model: &model,
                    encoder: &encoder)
                Self.encodeReference(
                    entry.rightParent, base: entry.id, previous: .none, context: 1, model: &model, encoder: &encoder)
            case .remoteDelete:
                Self.encodeReference(
                    entry.target, base: entry.id, previous: .none, context: 1, model: &model, encoder: &encoder)
            }
            previousKind = lengthContext
        }
    }

    // MARK: Reading

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
        // Counters index dense per-replica tables: refuse counters far beyond what the input could describe.
        let counterLimit = UInt64(max(1 << 20, reader.remaining << 12))
        guard seenRanges.allSatisfy({ $0.last <= counterLimit }) else {
            throw SyncCRDTError.invalidEncoding("counter out of range")
        }
        let block = try reader.readRaw(count: try reader.readCount())
        var decoder = RangeDecoder(block)
        var model = HistoryModel.initial
        var virtualContent: Int32 = 0
        if flags.contains(.snapshot) {
            try decodeSnapshot(
                model: &model, decoder: &decoder, virtualContent: &virtualContent, seenRanges: seenRanges)
        }
        try decodeHistory(
            replay: !flags.contains(.snapshot), model: &model, decoder: &decoder, virtualContent: &virtualContent,
            counterLimit: counterLimit)
        guard !decoder.overran else { throw SyncCRDTError.invalidEncoding("truncated history") }
        guard flags.contains(.snapshot) || !flags.contains(.historyOmitted) else {
            throw SyncCRDTError.invalidEncoding("a history encoding without its history")
        }
        if flags.contains(.historyOmitted) {
            for (agent, ranges) in seenRanges.enumerated() where ranges.contiguous > 0 {
                compactedVersion[replicas[agent]] = max(compactedVersion[replicas[agent]], ranges.contiguous)
            }
        }
        cursorCache.leaf = -1
        return (flags, seenRanges)
    }

    private mutating func decodeSnapshot(
        model: inout HistoryModel, decoder: inout RangeDecoder, virtualContent: inout Int32,
        seenRanges: [DotRanges]
    ) throws {
        var seenIDs = [DotRanges](repeating: DotRanges(), count: replicas.count)
        let count = model.count.decode(with: &decoder)
        guard count < 1 << 31 else { throw SyncCRDTError.invalidEncoding("bad run count") }
        var runs: [Run] = []
        var previous = ItemID(agent: 0, counter: 0)
        var previousLast = ItemID.none
        var previousDeleted = 0
        for _ in 0..<count {
            guard !decoder.overran else { throw SyncCRDTError.invalidEncoding("truncated snapshot") }
            let isDeleted = decoder.decode(&model.runDeleted[previousDeleted])
            let hasContent = decoder.decode(&model.runContent[isDeleted ? 1 : 0])
            let length = model.runLength[isDeleted ? 1 : 0].decode(with: &decoder) &+ 1
            var agent = previous.agent
            if !decoder.decode(&model.runSameAgent) {
                let decoded = model.agent.decode(with: &decoder)
                guard decoded < UInt64(replicas.count) else { throw SyncCRDTError.invalidEncoding("unknown replica") }
                agent = Int(decoded)
            }
            let expected = agent == previous.agent ? previous.counter + 1 : 1
            let counter = expected &+ UInt64(bitPattern: model.counter.decode(with: &decoder))
            guard replicas.count > agent, length >= 1, length < UInt64(Int32.max), counter >= 1,
                counter <= ItemID.maxCounter, length <= ItemID.maxCounter - counter,
                virtualContent <= Int32.max - Int32(length),
                seenIDs[agent].missing(in: counter..<counter + length) == [counter..<counter + length],
                seen[agent].covers(counter..<counter + length) || seenRanges[agent].covers(counter..<counter + length)
            else { throw SyncCRDTError.invalidEncoding("bad run") }
            seenIDs[agent].insert(counter..<counter + length)
            let id = ItemID(agent: agent, counter: counter)
            let originLeft = try decodeReference(
                base: id, previous: previousLast, context: 0, model: &model, decoder: &decoder)
            let rightParent = try decodeReference(
                base: id, previous: .none, context: 1, model: &model, decoder: &decoder)
            runs.append(
                Run(
                    id: id, originLeft: originLeft, rightParent: rightParent, length: Int32(length),
                    contentOffset: hasContent ? virtualContent : -1, isDeleted: isDeleted))
            if hasContent { virtualContent += Int32(length) }
            previous = id.advanced(by: Int(length) - 1)
            previousLast = previous
            previousDeleted = isDeleted ? 1 : 0
        }
        tree = RunTree(runs: runs)
        for run in runs {
            guard
                (run.originLeft.isNone || tree.contains(run.originLeft))
                    && (run.rightParent.isNone || tree.contains(run.rightParent))
            else { throw SyncCRDTError.invalidEncoding("a run refers to a missing element") }
        }
    }

    /// What every entry of a coded history begins with: its kind, its first id and its length.
    private struct HistoryEntryHeader {
        var kind: CodedKind
        var id: ItemID
        var length: Int
        var isReversed: Bool
        /// The entry's context for the models of lengths and deltas (`HistoryModel.lengthContext`).
        var lengthContext: Int
        /// None of the entry's ids was seen before.
        var isFresh: Bool

        var dots: Range<UInt64> { id.counter..<id.counter + UInt64(length) }
    }

    private mutating func decodeHistory(
        replay: Bool, model: inout HistoryModel, decoder: inout RangeDecoder, virtualContent: inout Int32,
        counterLimit: UInt64
    ) throws {
        let count = model.count.decode(with: &decoder)
        guard count < 1 << 40 else { throw SyncCRDTError.invalidEncoding("bad history length") }
        var lastEnd = [UInt64](repeating: 0, count: replicas.count)
        var agent = 0
        var cursor = 0
        var previousKind = 4
        for _ in 0..<count {
            guard !decoder.overran else { throw SyncCRDTError.invalidEncoding("truncated history") }
            let entry = try decodeEntryHeader(
                lastEnd: &lastEnd, agent: &agent, previousKind: previousKind, model: &model, decoder: &decoder,
                virtualContent: virtualContent, counterLimit: counterLimit)
            switch entry.kind {
            case .localInsert, .localDelete:
                guard replay else { throw SyncCRDTError.invalidEncoding("positional entry in a snapshot") }
                try replayLocalEntry(
                    entry, cursor: &cursor, previousKind: previousKind, model: &model, decoder: &decoder,
                    virtualContent: &virtualContent)
            case .remoteInsert:
                try decodeRemoteInsert(
                    entry, replay: replay, model: &model, decoder: &decoder, virtualContent: &virtualContent)
            case .remoteDelete:
                try decodeRemoteDelete(entry, replay: replay, model: &model, decoder: &decoder)
            }
            previousKind = entry.lengthContext
        }
    }

    /// Decodes an entry's kind, id and length. `lastEnd` holds each replica's last counter so far, `agent` the
    /// replica of the entry before (an entry that names no replica is that one's next).
    private func decodeEntryHeader(
        lastEnd: inout [UInt64], agent: inout Int, previousKind: Int, model: inout HistoryModel,
        decoder: inout RangeDecoder, virtualContent: Int32, counterLimit: UInt64
    ) throws -> HistoryEntryHeader {
        let remote = decoder.decode(&model.isRemote[previousKind])
        let delete = decoder.decode(&model.isDelete[previousKind * 2 + (remote ? 1 : 0)])
        let reversed = delete ? decoder.decode(&model.isReversed[previousKind]) : false
        let kind: CodedKind =
            switch (remote, delete) {
            case (false, false): .localInsert
            case (false, true): .localDelete
            case (true, false): .remoteInsert
            case (true, true): .remoteDelete
            }
        let replicaCount = replicas.count
        guard replicaCount > 0 else { throw SyncCRDTError.invalidEncoding("unknown replica") }
        var counter = lastEnd[agent] &+ 1
        if decoder.decode(&model.explicitID[kind.rawValue]) {
            let decoded = model.agent.decode(with: &decoder)
            guard decoded < UInt64(replicaCount) else { throw SyncCRDTError.invalidEncoding("unknown replica") }
            agent = Int(decoded)
            counter = lastEnd[agent] &+ 1 &+ UInt64(bitPattern: model.counter.decode(with: &decoder))
        }
        let lengthContext = HistoryModel.lengthContext(
            CodedEntry(
                kind: kind, id: ItemID(agent: agent, counter: 0), length: 0, isReversed: reversed, position: 0,
                target: .none, rightParent: .none, hasContent: true))
        let decodedLength = model.lengths[lengthContext].decode(with: &decoder) &+ 1
        guard decodedLength < UInt64(Int32.max), counter >= 1, counter <= counterLimit,
            decodedLength <= counterLimit - counter, virtualContent <= Int32.max - Int32(decodedLength)
        else { throw SyncCRDTError.invalidEncoding("bad history entry") }
        lastEnd[agent] = max(lastEnd[agent], counter + decodedLength - 1)
        let dots = counter..<counter + decodedLength
        return HistoryEntryHeader(
            kind: kind, id: ItemID(agent: agent, counter: counter), length: Int(decodedLength),
            isReversed: reversed, lengthContext: lengthContext, isFresh: seen[agent].missing(in: dots) == [dots])
    }

    /// Replays a local insert or delete at its position: the cursor (where the previous local edit ended) and,
    /// when coded, a delta from it.
    private mutating func replayLocalEntry(
        _ entry: HistoryEntryHeader, cursor: inout Int, previousKind: Int, model: inout HistoryModel,
        decoder: inout RangeDecoder, virtualContent: inout Int32
    ) throws {
        let length = entry.length
        var position = entry.isReversed ? cursor - length : cursor
        if decoder.decode(&model.hasDelta[entry.lengthContext * 5 + previousKind]) {
            let (sum, overflow) = position.addingReportingOverflow(
                Int(model.deltas[entry.lengthContext].decode(with: &decoder)))
            guard !overflow else { throw SyncCRDTError.invalidEncoding("position out of range") }
            position = sum
        }
        guard entry.isFresh else { throw SyncCRDTError.invalidEncoding("ids used twice") }
        let (agent, counter) = (entry.id.agent, entry.id.counter)
        if entry.kind == .localInsert {
            guard position >= 0 && position <= tree.visibleCount else {
                throw SyncCRDTError.invalidEncoding("position out of range")
            }
            _ = localInsert(count: length, contentOffset: virtualContent, at: position, agent: agent, counter: counter)
            virtualContent += Int32(length)
            cursor = position + length
            return
        }
        guard position >= 0 && position <= tree.visibleCount - length else {
            throw SyncCRDTError.invalidEncoding("position out of range")
        }
        if entry.isReversed {
            // Backspaces, one at a time, so each counter deletes the same element as it did.
            for step in 0..<length {
                _ = localRemove(
                    at: position + length - 1 - step, count: 1, agent: agent, counter: counter + UInt64(step))
            }
        } else {
            _ = localRemove(at: position, count: length, agent: agent, counter: counter)
        }
        cursor = position
    }

    /// A remote insert: integrated when replaying, logged as it is otherwise (a snapshot's history).
    private mutating func decodeRemoteInsert(
        _ entry: HistoryEntryHeader, replay: Bool, model: inout HistoryModel, decoder: inout RangeDecoder,
        virtualContent: inout Int32
    ) throws {
        let id = entry.id
        let hasContent = decoder.decode(&model.hasContent)
        let originLeft = try decodeReference(
            base: id, previous: id.advanced(by: -1), context: 0, model: &model, decoder: &decoder)
        let rightParent = try decodeReference(
            base: id, previous: .none, context: 1, model: &model, decoder: &decoder)
        guard replay else {
            appendLog(
                LogEntry(
                    kind: .insert, isLocal: false, isReversed: false, id: id, length: Int32(entry.length),
                    target: originLeft, rightParent: rightParent, position: -1))
            return
        }
        guard entry.isFresh, originLeft.isNone || tree.contains(originLeft),
            rightParent.isNone || tree.contains(rightParent)
        else { throw SyncCRDTError.invalidEncoding("bad insert") }
        integrateRemote(
            Run(
                id: id, originLeft: originLeft, rightParent: rightParent, length: Int32(entry.length),
                contentOffset: hasContent ? virtualContent : -1, isDeleted: !hasContent))
        if hasContent { virtualContent += Int32(entry.length) }
    }

    /// A remote delete: applied when replaying, logged as it is otherwise (a snapshot's history).
    private mutating func decodeRemoteDelete(
        _ entry: HistoryEntryHeader, replay: Bool, model: inout HistoryModel, decoder: inout RangeDecoder
    ) throws {
        let (id, length, reversed) = (entry.id, entry.length, entry.isReversed)
        let target = try decodeReference(base: id, previous: .none, context: 1, model: &model, decoder: &decoder)
        guard !target.isNone, target.counter + UInt64(length) <= ItemID.maxCounter,
            !reversed || target.counter >= UInt64(length)
        else { throw SyncCRDTError.invalidEncoding("bad delete") }
        guard replay else {
            appendLog(
                LogEntry(
                    kind: .delete, isLocal: false, isReversed: reversed, id: id, length: Int32(length),
                    target: target, rightParent: .none, position: -1))
            return
        }
        let first = reversed ? target.advanced(by: 1 - length) : target
        guard entry.isFresh, seen[first.agent].covers(first.counter..<first.counter + UInt64(length)) else {
            throw SyncCRDTError.invalidEncoding("bad delete")
        }
        if reversed {
            for step in 0..<length {
                let dot = id.counter + UInt64(step)
                applyRemoteDeletion(
                    firstDot: id.advanced(by: step), target: target.advanced(by: -step), count: 1,
                    missing: [dot..<dot + 1])
            }
        } else {
            applyRemoteDeletion(firstDot: id, target: first, count: length, missing: [entry.dots])
        }
        seen[id.agent].insert(entry.dots)
    }
}
