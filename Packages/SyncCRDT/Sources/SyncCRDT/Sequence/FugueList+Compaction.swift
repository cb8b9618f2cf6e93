import SyncModels

extension FugueList: Compactable {
    /// Drops what no later operation can need (see `SequenceCore.planCompaction`): tombstones that cannot
    /// anchor anything any more, the content of stable tombstones, and the history up to `stable`. The visible
    /// elements do not change, and the list keeps converging with uncompacted replicas.
    ///
    /// - Precondition: `stable` is causally stable (see `Compactable`). A replica that is behind it merges this
    ///   list's whole state (which then carries a snapshot), not its operations.
    public mutating func compact(stableAt stable: VersionVector) {
        let plan = core.planCompaction(stableAt: stable)
        var newContents = ContiguousArray<Element>()
        var runs = plan.runs
        for index in runs.indices {
            if plan.dropContent[index] || runs[index].contentOffset < 0 {
                runs[index].contentOffset = -1
                continue
            }
            let start = Int(runs[index].contentOffset)
            runs[index].contentOffset = Int32(newContents.count)
            newContents.append(contentsOf: contents[start..<start + runs[index].count])
        }
        contents = newContents
        core.applyCompaction(runs: runs, stableAt: stable)
    }
}
