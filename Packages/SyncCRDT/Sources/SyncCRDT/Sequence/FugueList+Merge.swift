import SyncModels

extension FugueList {
    /// The operations a replica that has seen `version` is missing, in an order it can apply them in (pass nil
    /// for everything). This is the delta a sync ships.
    public func operations(since version: CausalContext? = nil) -> [Operation] {
        var result: [Operation] = []
        let needsSnapshot =
            !core.compactedVersion.isEmpty
            && !(version.map { core.compactedVersion.isCovered(by: $0.versionVector) } ?? false)
        if needsSnapshot { result += snapshotOperations() }
        for entry in core.log {
            if let version, isCovered(entry, by: version) { continue }
            result += operations(for: entry)
        }
        result += pending
        return result
    }

    /// The delta a replica that has seen `version` is missing, as a list (its operations wait in it until it
    /// is merged into a replica that has their anchors).
    public func delta(since version: CausalContext?) -> FugueList {
        var delta = FugueList()
        delta.pending = operations(since: version)
        return delta
    }

    /// Whether `version` has seen every counter of `entry` (it may have seen both ends and not the middle).
    func isCovered(_ entry: LogEntry, by version: CausalContext) -> Bool {
        let replica = core.replicas[entry.id.agent]
        let first = entry.id.counter
        let last = first + UInt64(entry.count) - 1
        if version.versionVector[replica] >= last { return true }
        return (first...last).allSatisfy { version.contains(Dot(replica: replica, counter: $0)) }
    }

    /// The operations of a history entry. An insert whose elements partly lost their content (deleted, then
    /// compacted or decoded without deleted content) splits, so that only those pieces travel as tombstones.
    func operations(for entry: LogEntry) -> [Operation] {
        switch entry.kind {
        case .insert:
            return contentPieces(of: entry.id, count: entry.count).map { piece in
                let first = entry.id.advanced(by: piece.offset)
                return .insert(
                    Insertion(
                        id: core.dot(first), count: piece.count, elements: piece.elements,
                        originLeft: core.optionalDot(piece.offset == 0 ? entry.target : first.advanced(by: -1)),
                        rightParent: piece.offset == 0 ? core.optionalDot(entry.rightParent) : nil))
            }
        case .delete:
            // Targets are listed in the order of the deletion's counters: a receiver that has seen some of
            // them must know exactly which element each remaining counter deleted.
            let replica = core.replicas[entry.target.agent]
            let targets =
                entry.isReversed
                ? (0..<entry.count).map {
                    DotRange(replica: replica, first: entry.target.counter - UInt64($0), count: 1)
                }
                : [DotRange(replica: replica, first: entry.target.counter, count: UInt64(entry.count))]
            return [.delete(Deletion(id: core.dot(entry.id), targets: targets))]
        }
    }

    /// The content of `count` elements from `first`, in pieces: runs of elements that have content, and runs
    /// whose content was dropped (nil).
    func contentPieces(of first: ItemID, count: Int) -> [(offset: Int, count: Int, elements: [Element]?)] {
        var pieces: [(offset: Int, count: Int, elements: [Element]?)] = []
        var done = 0
        while done < count {
            let item = first.advanced(by: done)
            var take = 1
            var elements: [Element]?
            if core.tree.contains(item) {
                let cursor = core.tree.find(item)
                let run = core.tree[cursor.leaf, cursor.run]
                take = min(count - done, run.count - cursor.offset)
                if run.contentOffset >= 0 {
                    let start = Int(run.contentOffset) + cursor.offset
                    elements = Array(contents[start..<start + take])
                }
            }
            if let last = pieces.last, (last.elements == nil) == (elements == nil) {
                pieces[pieces.count - 1].count += take
                if let elements { pieces[pieces.count - 1].elements! += elements }
            } else {
                pieces.append((done, take, elements))
            }
            done += take
        }
        return pieces
    }

    /// Every run of the tree as an insertion (tombstones without content), in an order where each comes after
    /// the elements it is anchored to.
    func snapshotOperations() -> [Operation] {
        var all: [Run] = []
        var leafBase: [Int: Int] = [:]
        var leaf = core.tree.firstLeaf
        while leaf >= 0 {
            leafBase[leaf] = all.count
            for index in 0..<core.tree.runCount(inLeaf: leaf) { all.append(core.tree[leaf, index]) }
            leaf = core.tree.nextLeaf(leaf)
        }
        func runIndex(_ item: ItemID) -> Int? {
            guard !item.isNone, core.tree.contains(item) else { return nil }
            let cursor = core.tree.find(item)
            return leafBase[cursor.leaf]! + cursor.run
        }
        var waitingOn = [Int](repeating: 0, count: all.count)
        var dependents = [[Int]](repeating: [], count: all.count)
        for (index, run) in all.enumerated() {
            for anchor in [run.originLeft, run.rightParent] {
                if let dependency = runIndex(anchor), dependency != index {
                    waitingOn[index] += 1
                    dependents[dependency].append(index)
                }
            }
        }
        var ready = (0..<all.count).filter { waitingOn[$0] == 0 }.reversed().map { $0 }
        var result: [Operation] = []
        result.reserveCapacity(all.count)
        while let index = ready.popLast() {
            let run = all[index]
            var elements: [Element]?
            if !run.isDeleted {
                let start = Int(run.contentOffset)
                elements = Array(contents[start..<start + run.count])
            }
            result.append(
                .insert(
                    Insertion(
                        id: core.dot(run.id), count: run.count, elements: elements,
                        originLeft: core.optionalDot(run.originLeft),
                        rightParent: core.optionalDot(run.rightParent))))
            for dependent in dependents[index] {
                waitingOn[dependent] -= 1
                if waitingOn[dependent] == 0 { ready.append(dependent) }
            }
        }
        return result
    }

    /// Joins `other` into this list: applies every operation of `other` this list has not seen.
    public mutating func merge(_ other: FugueList) {
        let missesCompactedPart =
            !other.core.compactedVersion.isEmpty && !other.core.compactedVersion.isCovered(by: version.versionVector)
        apply(contentsOf: other.operations(since: version))
        if missesCompactedPart { deleteFoldedElements(of: other) }
    }

    /// After merging a compacted state this replica was behind: elements `other` folded away (deleted and
    /// compacted before this replica saw the deletion) are deleted here too.
    mutating func deleteFoldedElements(of other: FugueList) {
        var doomed: [(ItemID, Int)] = []
        core.tree.forEachRun { run in
            guard !run.isDeleted else { return }
            for offset in 0..<run.count {
                let item = run.id.advanced(by: offset)
                let dot = core.dot(item)
                guard other.core.compactedVersion.contains(dot) else { continue }
                if let theirs = other.core.item(dot), other.core.tree.contains(theirs) { continue }
                doomed.append((item, 1))
            }
        }
        for (item, _) in doomed {
            let cursor = core.tree.find(item)
            _ = core.tree.delete(at: cursor, count: 1)
        }
        core.cursorCache.leaf = -1
    }
}

extension FugueList: Equatable {
    /// Logical equality: the same elements and tombstones in the same order with the same content, the same
    /// seen dots and the same waiting operations, whatever the run layout and the order histories arrived in.
    public static func == (lhs: FugueList, rhs: FugueList) -> Bool {
        guard lhs.core.tree.totalCount == rhs.core.tree.totalCount,
            lhs.core.tree.visibleCount == rhs.core.tree.visibleCount,
            lhs.version == rhs.version, Set(lhs.pending) == Set(rhs.pending)
        else { return false }
        let left = lhs.chunks()
        let right = rhs.chunks()
        var leftIndex = 0
        var rightIndex = 0
        var leftOffset = 0
        var rightOffset = 0
        while leftIndex < left.count && rightIndex < right.count {
            let a = (run: left[leftIndex], ())
            let b = (run: right[rightIndex], ())
            let take = min(a.run.count - leftOffset, b.run.count - rightOffset)
            let aID = a.run.id.advanced(by: leftOffset)
            let bID = b.run.id.advanced(by: rightOffset)
            guard lhs.core.replicas[aID.agent] == rhs.core.replicas[bID.agent], aID.counter == bID.counter,
                a.run.isDeleted == b.run.isDeleted
            else { return false }
            if !a.run.isDeleted {
                let aStart = Int(a.run.contentOffset) + leftOffset
                let bStart = Int(b.run.contentOffset) + rightOffset
                guard lhs.contents[aStart..<aStart + take].elementsEqual(rhs.contents[bStart..<bStart + take])
                else { return false }
            }
            leftOffset += take
            rightOffset += take
            if leftOffset == a.run.count {
                leftIndex += 1
                leftOffset = 0
            }
            if rightOffset == b.run.count {
                rightIndex += 1
                rightOffset = 0
            }
        }
        return leftIndex == left.count && rightIndex == right.count
    }

    private func chunks() -> [Run] {
        var result: [Run] = []
        core.tree.forEachRun { result.append($0) }
        return result
    }
}
