import SyncModels

extension FugueList {
    /// Inserts `newElements` at visible `position` on behalf of `replica`; returns the operation to ship.
    ///
    /// - Precondition: `0 <= position <= count`.
    @discardableResult
    public mutating func insert(contentsOf newElements: some Collection<Element>, at position: Int, replica: ReplicaID)
        -> Operation?
    {
        guard !newElements.isEmpty else { return nil }
        let (id, originLeft, rightParent) = insertLocally(newElements, at: position, replica: replica)
        return .insert(
            Insertion(
                id: dot(id), elements: Array(newElements), originLeft: optionalDot(originLeft),
                rightParent: optionalDot(rightParent)))
    }

    /// Inserts `element` at visible `position` on behalf of `replica`; returns the operation to ship.
    @discardableResult
    public mutating func insert(_ element: Element, at position: Int, replica: ReplicaID) -> Operation {
        insert(contentsOf: CollectionOfOne(element), at: position, replica: replica)!
    }

    /// Appends `element` on behalf of `replica`; returns the operation to ship.
    @discardableResult
    public mutating func append(_ element: Element, replica: ReplicaID) -> Operation {
        insert(element, at: count, replica: replica)
    }

    /// Deletes `count` visible elements from `position` on behalf of `replica`; returns the operation to ship
    /// (nil when `count` is 0).
    ///
    /// - Precondition: `position + count <= self.count`.
    @discardableResult
    public mutating func remove(at position: Int, count: Int = 1, replica: ReplicaID) -> Operation? {
        guard count > 0 else { return nil }
        let (id, targets) = removeLocally(at: position, count: count, replica: replica)
        return .delete(
            Deletion(
                id: dot(id),
                targets: targets.map {
                    DotRange(replica: replicas[$0.first.agent], first: $0.first.counter, count: UInt64($0.count))
                }))
    }

    /// Inserts `newElements` at visible `position` with ids from `firstID` on (counters not used before by that
    /// replica, e.g. taken from an event's dot range); returns the operation to ship.
    @discardableResult
    public mutating func insert(contentsOf newElements: some Collection<Element>, at position: Int, firstID: Dot)
        -> Operation?
    {
        guard !newElements.isEmpty else { return nil }
        let (id, originLeft, rightParent) = insertLocally(
            newElements, at: position, replica: firstID.replica, counter: firstID.counter)
        return .insert(
            Insertion(
                id: dot(id), elements: Array(newElements), originLeft: optionalDot(originLeft),
                rightParent: optionalDot(rightParent)))
    }

    /// Deletes `count` visible elements from `position`, the deletion taking the counters from `firstID` on;
    /// returns the operation to ship.
    @discardableResult
    public mutating func remove(at position: Int, count: Int, firstID: Dot) -> Operation? {
        guard count > 0 else { return nil }
        let (id, targets) = removeLocally(
            at: position, count: count, replica: firstID.replica, counter: firstID.counter)
        return .delete(
            Deletion(
                id: dot(id),
                targets: targets.map {
                    DotRange(replica: replicas[$0.first.agent], first: $0.first.counter, count: UInt64($0.count))
                }))
    }

    /// Deletes `deleteCount` elements at `position`, then inserts `newElements` there, without building the
    /// operations: the history keeps them for `operations(since:)`. This is the fast path for local typing.
    public mutating func replace(
        at position: Int, deleting deleteCount: Int, with newElements: some Collection<Element>, replica: ReplicaID
    ) {
        if deleteCount > 0 { _ = removeLocally(at: position, count: deleteCount, replica: replica) }
        if !newElements.isEmpty { _ = insertLocally(newElements, at: position, replica: replica) }
    }

    // MARK: Implementation

    /// The cursor on the visible element at `position` and its leaf's visible start, through the cache when
    /// the previous local edit was nearby.
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

    mutating func insertLocally(
        _ newElements: some Collection<Element>, at position: Int, replica: ReplicaID, counter explicit: UInt64? = nil
    ) -> (id: ItemID, originLeft: ItemID, rightParent: ItemID) {
        precondition(position >= 0 && position <= count, "insert position out of range")
        let agent = agent(for: replica)
        let counter = explicit ?? seen[agent].last + 1
        precondition(counter >= 1 && counter + UInt64(newElements.count) <= ItemID.maxCounter, "counter out of range")
        precondition(
            explicit == nil
                || seen[agent].missing(in: counter..<counter + UInt64(newElements.count)).count == 1
                    && seen[agent].missing(in: counter..<counter + UInt64(newElements.count))[0].count
                        == newElements.count,
            "ids already used")
        let id = ItemID(agent: agent, counter: counter)
        let contentOffset = Int32(contents.count)
        contents.append(contentsOf: newElements)
        let (originLeft, rightParent) = placeLocalRun(
            id: id, count: newElements.count, contentOffset: contentOffset, at: position)
        seen[agent].insert(counter..<counter + UInt64(newElements.count))
        appendLog(
            LogEntry(
                kind: .insert, isLocal: true, isReversed: false, id: id, length: Int32(newElements.count),
                target: originLeft, rightParent: rightParent, position: position))
        return (id, originLeft, rightParent)
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

    mutating func removeLocally(at position: Int, count: Int, replica: ReplicaID, counter explicit: UInt64? = nil)
        -> (id: ItemID, targets: [(first: ItemID, count: Int)])
    {
        precondition(position >= 0 && position + count <= self.count, "delete range out of range")
        let agent = agent(for: replica)
        let counter = explicit ?? seen[agent].last + 1
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
