import SyncCRDT
import SyncModels

extension FugueList where Element == Unicode.Scalar {
    /// Turns the text into `newText` with the smallest edit that keeps the common prefix and suffix, and
    /// returns the operations to ship. Keeping what did not change is what lets concurrent edits elsewhere
    /// in the text survive the merge.
    public mutating func replace(with newText: String, replica: ReplicaID) -> [Operation] {
        let old = Array(text.unicodeScalars)
        let new = Array(newText.unicodeScalars)
        var prefix = 0
        while prefix < old.count && prefix < new.count && old[prefix] == new[prefix] { prefix += 1 }
        var suffix = 0
        while suffix < old.count - prefix && suffix < new.count - prefix
            && old[old.count - 1 - suffix] == new[new.count - 1 - suffix]
        {
            suffix += 1
        }
        var operations: [Operation] = []
        let removed = old.count - prefix - suffix
        if removed > 0, let operation = remove(at: prefix, count: removed, replica: replica) {
            operations.append(operation)
        }
        let inserted = new[prefix..<(new.count - suffix)]
        if !inserted.isEmpty, let operation = insert(contentsOf: inserted, at: prefix, replica: replica) {
            operations.append(operation)
        }
        return operations
    }
}

extension FugueList where Element == String {
    /// Inserts the item id at `position`; returns the operation to ship.
    public mutating func insertElement(_ item: String, at position: Int, replica: ReplicaID) -> Operation {
        insert(item, at: position, replica: replica)
    }

    /// Removes the item id; nil when the list does not hold it.
    public mutating func removeElement(_ item: String, replica: ReplicaID) -> Operation? {
        guard let position = elements.firstIndex(of: item) else { return nil }
        return remove(at: position, replica: replica)
    }
}
