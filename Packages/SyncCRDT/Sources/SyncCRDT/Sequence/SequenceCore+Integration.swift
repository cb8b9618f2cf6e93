extension SequenceCore {
    /// Integrates a received run whose anchors are present, records its dots and logs it.
    mutating func integrateRemote(_ run: Run) {
        integrate(run)
        seen[run.id.agent].insert(run.id.counter..<run.id.counter + UInt64(run.count))
        appendLog(
            LogEntry(
                kind: .insert, isLocal: false, isReversed: false, id: run.id, length: run.length,
                target: run.originLeft, rightParent: run.rightParent, position: -1))
    }

    /// Applies part of a received deletion: the counters from `firstDot` delete `count` elements from
    /// `target` on. Only the counters in `missing` (not seen before) are logged.
    mutating func applyRemoteDeletion(firstDot: ItemID, target: ItemID, count: Int, missing: [Range<UInt64>]) {
        deleteElements(from: target, count: count)
        let dots = firstDot.counter..<firstDot.counter + UInt64(count)
        for piece in missing where piece.overlaps(dots) {
            let lower = max(piece.lowerBound, dots.lowerBound)
            let upper = min(piece.upperBound, dots.upperBound)
            appendLog(
                LogEntry(
                    kind: .delete, isLocal: false, isReversed: false, id: ItemID(agent: firstDot.agent, counter: lower),
                    length: Int32(upper - lower), target: target.advanced(by: Int(lower - dots.lowerBound)),
                    rightParent: .none, position: -1))
        }
    }

    /// Places a run received from another replica: the FugueMax integration (as in Eg-walker), scanning the
    /// concurrent elements between its left origin and its right parent. Its anchors must be in the tree.
    mutating func integrate(_ newRun: Run) {
        cursorCache.leaf = -1
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

    /// Marks `count` elements from `first` deleted (those compacted away already are skipped).
    mutating func deleteElements(from first: ItemID, count: Int) {
        cursorCache.leaf = -1
        var done = 0
        while done < count {
            let item = first.advanced(by: done)
            guard tree.contains(item) else {
                done += 1
                continue
            }
            let cursor = tree.find(item)
            let take = min(count - done, tree[cursor.leaf, cursor.run].count - cursor.offset)
            _ = tree.delete(at: cursor, count: take)
            done += take
        }
    }
}
