extension SequenceCore {
    /// Records a local edit at visible `position` by `agent`: deletes `deleteCount` elements, then inserts
    /// `insertCount` elements whose content starts at `contentOffset`. The fast path of local typing.
    @usableFromInline
    mutating func localReplace(
        at position: Int, deleting deleteCount: Int, inserting insertCount: Int, contentOffset: Int32, agent: Int
    ) {
        if deleteCount > 0 { _ = localRemove(at: position, count: deleteCount, agent: agent, counter: nil) }
        if insertCount > 0 {
            _ = localInsert(count: insertCount, contentOffset: contentOffset, at: position, agent: agent, counter: nil)
        }
    }

    /// Records a local insert of `count` elements (whose content starts at `contentOffset`) at visible
    /// `position` by `agent`, with the agent's next counters or from `explicit` on. Returns its id and origins.
    mutating func localInsert(count: Int, contentOffset: Int32, at position: Int, agent: Int, counter explicit: UInt64?)
        -> (id: ItemID, originLeft: ItemID, rightParent: ItemID)
    {
        precondition(position >= 0 && position <= tree.visibleCount, "insert position out of range")
        let counter = explicit ?? nextCounter(agent)
        precondition(counter >= 1 && counter + UInt64(count) <= ItemID.maxCounter, "counter out of range")
        precondition(
            explicit == nil
                || seen[agent].missing(in: counter..<counter + UInt64(count)) == [
                    counter..<counter + UInt64(count)
                ], "ids already used")
        let id = ItemID(agent: agent, counter: counter)
        let (originLeft, rightParent) = placeLocalRun(id: id, count: count, contentOffset: contentOffset, at: position)
        seen[agent].insert(counter..<counter + UInt64(count))
        appendLog(
            LogEntry(
                kind: .insert, isLocal: true, isReversed: false, id: id, length: Int32(count), target: originLeft,
                rightParent: rightParent, position: position))
        return (id, originLeft, rightParent)
    }

    /// Records a local delete of `count` visible elements from `position` by `agent`. Returns the deletion's
    /// first id and the deleted elements as runs of ids, in document order.
    mutating func localRemove(at position: Int, count: Int, agent: Int, counter explicit: UInt64?)
        -> (id: ItemID, targets: [(first: ItemID, count: Int)])
    {
        precondition(position >= 0 && position + count <= tree.visibleCount, "delete range out of range")
        let counter = explicit ?? nextCounter(agent)
        precondition(counter >= 1 && counter + UInt64(count) <= ItemID.maxCounter, "counter out of range")
        let id = ItemID(agent: agent, counter: counter)
        var targets: [(first: ItemID, count: Int)] = []
        var remaining = count
        var cursor = locateVisible(position)
        var deleted = 0
        while true {
            let run = tree[cursor.leaf, cursor.run]
            if !run.isDeleted {
                let take = min(remaining, run.count - cursor.offset)
                let first = run.id.advanced(by: cursor.offset)
                let after = tree.delete(at: cursor, count: take).after
                targets.append((first, take))
                appendLog(
                    LogEntry(
                        kind: .delete, isLocal: true, isReversed: false, id: id.advanced(by: deleted),
                        length: Int32(take), target: first, rightParent: .none, position: position))
                deleted += take
                remaining -= take
                if remaining == 0 { break }
                cursor = tree.normalized(after)!
            } else {
                cursor = tree.normalized(RunTree.Cursor(leaf: cursor.leaf, run: cursor.run, offset: run.count))!
            }
        }
        seen[agent].insert(counter..<counter + UInt64(count))
        return (id, targets)
    }

    /// The cursor on the visible element at `position`, through the cache when the previous local edit was
    /// in the same leaf or the next one.
    mutating func locateVisible(_ position: Int) -> RunTree.Cursor {
        let leaf = cursorCache.leaf
        if leaf >= 0 {
            let start = cursorCache.leafStart
            let width = tree.leafVisible[leaf]
            if position >= start && position < start + width {
                return tree.findVisible(position - start, inLeaf: leaf)
            }
            let next = tree.nextLeaf(leaf)
            if next >= 0 && position >= start + width && position < start + width + tree.leafVisible[next] {
                cursorCache = CursorCache(leaf: next, leafStart: start + width)
                return tree.findVisible(position - start - width, inLeaf: next)
            }
        }
        let (cursor, leafStart) = tree.findVisible(position)
        cursorCache = CursorCache(leaf: cursor.leaf, leafStart: leafStart)
        return cursor
    }

    /// Puts a new run at visible `position`: just after the visible element before it, ahead of any tombstones
    /// that follow that element. Returns its origins.
    mutating func placeLocalRun(id: ItemID, count: Int, contentOffset: Int32, at position: Int)
        -> (originLeft: ItemID, rightParent: ItemID)
    {
        if position == 0 {
            var rightParent = ItemID.none
            if let first = tree.start {
                let next = tree[first.leaf, first.run]
                if next.originLeft.isNone { rightParent = next.id }
            }
            tree.insert(
                Run(
                    id: id, originLeft: .none, rightParent: rightParent, length: Int32(count),
                    contentOffset: contentOffset, isDeleted: false), leaf: tree.firstLeaf, at: 0)
            cursorCache = CursorCache(leaf: tree.firstLeaf, leafStart: 0)
            return (.none, rightParent)
        }
        let cursor = locateVisible(position - 1)
        let run = tree[cursor.leaf, cursor.run]
        let originLeft = run.id.advanced(by: cursor.offset)
        if cursor.offset + 1 < run.count {
            // Inside a run: the next element's left origin is ours, so it is our right parent.
            let rightParent = originLeft.advanced(by: 1)
            let suffix = tree.split(at: RunTree.Cursor(leaf: cursor.leaf, run: cursor.run, offset: cursor.offset + 1))
            tree.insert(
                Run(
                    id: id, originLeft: originLeft, rightParent: rightParent, length: Int32(count),
                    contentOffset: contentOffset, isDeleted: false), leaf: suffix.leaf, at: suffix.run)
            return (originLeft, rightParent)
        }
        var rightParent = ItemID.none
        if let next = tree.normalized(RunTree.Cursor(leaf: cursor.leaf, run: cursor.run, offset: cursor.offset + 1)) {
            let nextRun = tree[next.leaf, next.run]
            if nextRun.originLeft == originLeft { rightParent = nextRun.id }
        }
        let newRun = Run(
            id: id, originLeft: originLeft, rightParent: rightParent, length: Int32(count),
            contentOffset: contentOffset, isDeleted: false)
        if run.canAppend(newRun) {
            tree.extendRun(leaf: cursor.leaf, run: cursor.run, by: count)
        } else {
            tree.insert(newRun, leaf: cursor.leaf, at: cursor.run + 1)
        }
        return (originLeft, rightParent)
    }

    /// Appends `entry` to the history, extending the last entry when it continues it.
    mutating func appendLog(_ entry: LogEntry) {
        if let last = log.last, last.kind == entry.kind, last.isLocal == entry.isLocal,
            last.id.advanced(by: last.count) == entry.id
        {
            let index = log.count - 1
            switch entry.kind {
            case .insert:
                if entry.target == last.id.advanced(by: last.count - 1) && entry.rightParent.isNone
                    && (!entry.isLocal || entry.position == last.position + last.count)
                {
                    log[index].length += entry.length
                    return
                }
            case .delete:
                if (!last.isReversed || last.length == 1) && !entry.isReversed
                    && entry.target == last.target.advanced(by: last.count)
                    && (!entry.isLocal || entry.position == last.position)
                {
                    log[index].length += entry.length
                    log[index].isReversed = false
                    return
                }
                if (last.isReversed || last.length == 1) && entry.length == 1
                    && entry.target.raw &+ UInt64(last.count) == last.target.raw
                    && (!entry.isLocal || entry.position == last.position - 1)
                {
                    log[index].length += 1
                    log[index].isReversed = true
                    log[index].position = entry.position
                    return
                }
            }
        }
        log.append(entry)
    }
}
