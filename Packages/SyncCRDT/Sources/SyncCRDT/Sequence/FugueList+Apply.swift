import SyncModels

extension FugueList: OperationCRDT {
    /// Applies a remote (or local) operation. Duplicates are ignored; an operation whose anchors or targets
    /// have not arrived waits, and is applied as soon as they do.
    public mutating func apply(_ operation: Operation) {
        cursorCache.leaf = -1
        switch tryApply(operation) {
        case .applied: drainPending()
        case .duplicate: break
        case .waiting: pending.append(operation)
        }
    }

    /// Applies several operations (any order), then retries the waiting ones once.
    public mutating func apply(contentsOf operations: some Sequence<Operation>) {
        cursorCache.leaf = -1
        var progressed = false
        for operation in operations {
            switch tryApply(operation) {
            case .applied: progressed = true
            case .duplicate: break
            case .waiting: pending.append(operation)
            }
        }
        if progressed { drainPending() }
    }

    enum ApplyOutcome {
        case applied, duplicate, waiting
    }

    mutating func tryApply(_ operation: Operation) -> ApplyOutcome {
        switch operation {
        case .insert(let insertion): applyInsertion(insertion)
        case .delete(let deletion): applyDeletion(deletion)
        }
    }

    mutating func drainPending() {
        var progressed = true
        while progressed && !pending.isEmpty {
            progressed = false
            var waiting: [Operation] = []
            for operation in pending {
                switch tryApply(operation) {
                case .applied, .duplicate: progressed = true
                case .waiting: waiting.append(operation)
                }
            }
            pending = waiting
        }
    }

    /// Whether `item` can anchor an insert here.
    private func isPresent(_ item: ItemID) -> Bool { item.isNone || tree.contains(item) }

    mutating func applyInsertion(_ insertion: Insertion) -> ApplyOutcome {
        precondition(
            insertion.id.counter >= 1 && insertion.id.counter + UInt64(insertion.count) <= ItemID.maxCounter,
            "counter out of range")
        guard insertion.count > 0 else { return .duplicate }
        let agent = agent(for: insertion.id.replica)
        let start = insertion.id.counter
        let missing = seen[agent].missing(in: start..<start + UInt64(insertion.count))
        guard !missing.isEmpty else { return .duplicate }
        var originLeft = ItemID.none
        var rightParent = ItemID.none
        if let dot = insertion.originLeft {
            guard let item = item(dot) else { return .waiting }
            originLeft = item
        }
        if let dot = insertion.rightParent {
            guard let item = item(dot) else { return .waiting }
            rightParent = item
        }
        for piece in missing {
            let first = piece.lowerBound == start
            let left = first ? originLeft : ItemID(agent: agent, counter: piece.lowerBound - 1)
            if !isPresent(left) || (first && !isPresent(rightParent)) { return .waiting }
        }
        for piece in missing {
            let offset = Int(piece.lowerBound - start)
            let length = Int(piece.upperBound - piece.lowerBound)
            let id = ItemID(agent: agent, counter: piece.lowerBound)
            let left = offset == 0 ? originLeft : id.advanced(by: -1)
            let right = offset == 0 ? rightParent : ItemID.none
            var contentOffset: Int32 = -1
            if let elements = insertion.elements {
                contentOffset = Int32(contents.count)
                contents.append(contentsOf: elements[offset..<offset + length])
            }
            integrate(
                Run(
                    id: id, originLeft: left, rightParent: right, length: Int32(length), contentOffset: contentOffset,
                    isDeleted: insertion.elements == nil))
            seen[agent].insert(piece)
            appendLog(
                LogEntry(
                    kind: .insert, isLocal: false, isReversed: false, id: id, length: Int32(length), target: left,
                    rightParent: right, position: -1))
        }
        return .applied
    }

    /// Places a run received from another replica: the FugueMax integration (as in Eg-walker), scanning the
    /// concurrent elements between its left origin and its right parent.
    mutating func integrate(_ newRun: Run) {
        let leftIndex: Int
        var cursor: RunTree.Cursor?
        if newRun.originLeft.isNone {
            leftIndex = -1
            cursor = tree.start
        } else {
            let left = tree.find(newRun.originLeft)
            leftIndex = tree.index(of: left)
            cursor = tree.cursorAfter(left)
        }
        let total = tree.totalCount
        let rightIndex = newRun.rightParent.isNone ? total : tree.index(of: newRun.rightParent)
        var scanIndex = leftIndex + 1
        var destination = cursor
        var scanning = false
        while let at = cursor, scanIndex < rightIndex {
            let other = tree[at.leaf, at.run]
            let otherLeft = other.originLeft(at: at.offset)
            let otherLeftIndex =
                at.offset > 0 ? scanIndex - 1 : (otherLeft.isNone ? -1 : tree.index(of: otherLeft))
            if otherLeftIndex < leftIndex { break }
            if otherLeftIndex == leftIndex {
                let otherRight = other.rightParent(at: at.offset)
                let otherRightIndex = otherRight.isNone ? total : tree.index(of: otherRight)
                if otherRightIndex == rightIndex && precedes(newRun.id, other.id.advanced(by: at.offset)) { break }
                scanning = otherRightIndex < rightIndex
            }
            // The rest of `other`'s run has left origins inside the scanned range: it cannot stop the scan.
            let step = min(other.count - at.offset, rightIndex - scanIndex)
            scanIndex += step
            cursor = tree.normalized(RunTree.Cursor(leaf: at.leaf, run: at.run, offset: at.offset + step))
            if !scanning { destination = cursor }
        }
        place(newRun, before: destination)
    }

    /// FugueMax's tie-break between concurrent siblings: replica id, then counter.
    func precedes(_ lhs: ItemID, _ rhs: ItemID) -> Bool {
        let left = replicas[lhs.agent]
        let right = replicas[rhs.agent]
        return left == right ? lhs.counter < rhs.counter : left < right
    }

    /// Inserts `newRun` before the element at `destination` (at the end when nil), extending the run before
    /// it when it continues that run.
    mutating func place(_ newRun: Run, before destination: RunTree.Cursor?) {
        if let at = destination {
            if at.offset > 0 {
                let suffix = tree.split(at: at)
                tree.insert(newRun, leaf: suffix.leaf, at: suffix.run)
            } else if at.run > 0 && tree[at.leaf, at.run - 1].canAppend(newRun) {
                tree.extendRun(leaf: at.leaf, run: at.run - 1, by: newRun.count)
            } else {
                tree.insert(newRun, leaf: at.leaf, at: at.run)
            }
        } else if tree.totalCount == 0 {
            tree.insert(newRun, leaf: tree.firstLeaf, at: 0)
        } else {
            let last = tree.findIndex(tree.totalCount - 1)
            if tree[last.leaf, last.run].canAppend(newRun) {
                tree.extendRun(leaf: last.leaf, run: last.run, by: newRun.count)
            } else {
                tree.insert(newRun, leaf: last.leaf, at: last.run + 1)
            }
        }
    }

    mutating func applyDeletion(_ deletion: Deletion) -> ApplyOutcome {
        let total = deletion.count
        guard total > 0 else { return .duplicate }
        precondition(
            deletion.id.counter >= 1 && deletion.id.counter + UInt64(total) <= ItemID.maxCounter,
            "counter out of range")
        let agent = agent(for: deletion.id.replica)
        let start = deletion.id.counter
        let missing = seen[agent].missing(in: start..<start + UInt64(total))
        guard !missing.isEmpty else { return .duplicate }
        var targets: [(first: ItemID, count: Int)] = []
        for target in deletion.targets where target.count > 0 {
            guard let targetAgent = agents[target.replica],
                seen[targetAgent].covers(target.first..<target.first + target.count)
            else { return .waiting }
            targets.append((ItemID(agent: targetAgent, counter: target.first), Int(target.count)))
        }
        var dotOffset: UInt64 = 0
        for (first, count) in targets {
            var done = 0
            while done < count {
                let item = first.advanced(by: done)
                guard tree.contains(item) else {
                    // Compacted away: it was deleted long ago.
                    done += 1
                    continue
                }
                let cursor = tree.find(item)
                let take = min(count - done, tree[cursor.leaf, cursor.run].count - cursor.offset)
                _ = tree.delete(at: cursor, count: take)
                done += take
            }
            // Log only the counters of this deletion not seen before.
            let dots = start + dotOffset..<start + dotOffset + UInt64(count)
            for piece in missing where piece.overlaps(dots) {
                let lower = max(piece.lowerBound, dots.lowerBound)
                let upper = min(piece.upperBound, dots.upperBound)
                appendLog(
                    LogEntry(
                        kind: .delete, isLocal: false, isReversed: false, id: ItemID(agent: agent, counter: lower),
                        length: Int32(upper - lower), target: first.advanced(by: Int(lower - dots.lowerBound)),
                        rightParent: .none, position: -1))
            }
            dotOffset += UInt64(count)
        }
        for piece in missing { seen[agent].insert(piece) }
        return .applied
    }
}
