import SyncModels

extension SequenceCore {
    /// What compaction decided: the runs to keep (in document order) and which of them are tombstones whose
    /// content can go.
    struct CompactionPlan {
        var runs: [Run]
        var dropContent: [Bool]
    }

    /// Plans the removal of tombstones no operation to come can need, given a causally stable `stable`.
    ///
    /// A tombstone goes when its insert and one of its deletes are stable, no remaining element names it as
    /// an origin, and its left origin is the element just before it, itself a stably deleted tombstone. Such
    /// an element can never be an origin again (later inserts anchor on visible elements, and a right parent
    /// shares its left origin with the new element), and FugueMax's scan passes over it without effect (its
    /// left origin lies inside the scanned range), so no later integration can tell it is gone. In practice
    /// every run of deleted typing shrinks to its first element, and whole chains of such runs disappear.
    func planCompaction(stableAt stable: VersionVector) -> CompactionPlan {
        // Deletions not yet stable: their targets may still be undeleted somewhere.
        var unstableTargets = [DotRanges](repeating: DotRanges(), count: replicas.count)
        var stableTargets = [DotRanges](repeating: DotRanges(), count: replicas.count)
        for entry in log where entry.kind == .delete {
            let first = entry.isReversed ? entry.target.advanced(by: 1 - entry.count) : entry.target
            let range = first.counter..<first.counter + UInt64(entry.count)
            let isStable = stable.contains(dot(entry.id.advanced(by: entry.count - 1)))
            if isStable {
                stableTargets[first.agent].insert(range)
            } else {
                unstableTargets[first.agent].insert(range)
            }
        }
        func isStablyDeleted(_ item: ItemID) -> Bool {
            stableTargets[item.agent].contains(item.counter) || !unstableTargets[item.agent].contains(item.counter)
        }
        // The next counter of the same replica must be stable too: an insert not seen yet could chain on it.
        func isStablyInserted(_ item: ItemID) -> Bool { stable[replicas[item.agent]] > item.counter }

        var runs: [Run] = []
        runs.reserveCapacity(tree.runCount)
        tree.forEachRun { runs.append($0) }
        var references: [ItemID: Int] = [:]
        for run in runs {
            if !run.originLeft.isNone { references[run.originLeft, default: 0] += 1 }
            if !run.rightParent.isNone { references[run.rightParent, default: 0] += 1 }
        }
        var kept: [Run?] = runs
        var lengths = runs.map(\.count)
        for index in runs.indices.reversed() {
            let run = runs[index]
            guard run.isDeleted else { continue }
            // Elements after the first: their left origin is the element just before them in the same run.
            var length = run.count
            while length > 1 {
                let item = run.id.advanced(by: length - 1)
                guard references[item, default: 0] == 0, isStablyInserted(item), isStablyDeleted(item),
                    isStablyDeleted(item.advanced(by: -1))
                else { break }
                length -= 1
            }
            lengths[index] = length
            guard length == 1, index > 0, let previous = kept[index - 1], previous.isDeleted else { continue }
            let previousLast = previous.id.advanced(by: lengths[index - 1] - 1)
            let first = run.id
            guard run.originLeft == previousLast, references[first, default: 0] == 0, isStablyInserted(first),
                isStablyDeleted(first), isStablyDeleted(previousLast)
            else { continue }
            kept[index] = nil
            references[run.originLeft, default: 0] -= 1
            if !run.rightParent.isNone { references[run.rightParent, default: 0] -= 1 }
        }
        var plan = CompactionPlan(runs: [], dropContent: [])
        for (index, run) in kept.enumerated() {
            guard var run else { continue }
            run.length = Int32(lengths[index])
            let dropContent = run.isDeleted && isStablyInserted(run.id) && isStablyDeleted(run.id)
            if let last = plan.runs.last, plan.dropContent.last == dropContent, dropContent,
                last.id.advanced(by: last.count) == run.id, run.originLeft == last.lastID, run.rightParent.isNone
            {
                plan.runs[plan.runs.count - 1].length += run.length
                continue
            }
            plan.runs.append(run)
            plan.dropContent.append(dropContent)
        }
        return plan
    }

    /// Installs the runs of a plan (with their new content offsets) and forgets the stable history.
    mutating func applyCompaction(runs: [Run], stableAt stable: VersionVector) {
        tree = RunTree(runs: runs)
        let replicas = self.replicas
        log.removeAll { entry in
            let last = entry.id.advanced(by: entry.count - 1)
            return stable.contains(Dot(replica: replicas[last.agent], counter: last.counter))
        }
        compactedVersion.merge(stable)
        cursorCache.leaf = -1
    }
}
