import SyncModels

/// A text CRDT: a `FugueList` of Unicode scalars. Positions and lengths count Unicode scalars.
public typealias FugueText = FugueList<Unicode.Scalar>

extension FugueList where Element == Unicode.Scalar {
    /// The visible text.
    public var text: String {
        var scalars = String.UnicodeScalarView()
        core.tree.forEachRun { run in
            if !run.isDeleted {
                let start = Int(run.contentOffset)
                scalars.append(contentsOf: contents[start..<start + run.count])
            }
        }
        return String(scalars)
    }

    /// Inserts `string` at scalar `position` on behalf of `replica`; returns the operation to ship.
    @discardableResult
    public mutating func insert(_ string: String, at position: Int, replica: ReplicaID) -> Operation? {
        insert(contentsOf: string.unicodeScalars, at: position, replica: replica)
    }
}
