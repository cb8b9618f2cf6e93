import SyncModels

/// A text CRDT: a `FugueList` of Unicode scalars. Positions and lengths count Unicode scalars.
public typealias FugueText = FugueList<Unicode.Scalar>

extension FugueList where Element == Unicode.Scalar {
    /// The visible text.
    public var text: String {
        // UTF-8 gathered in one buffer, then one `String`: appending scalars to a `UnicodeScalarView` one by
        // one costs several times more (every saved note computes its text).
        var utf8: [UInt8] = []
        utf8.reserveCapacity(count)
        appendUTF8(to: &utf8)
        return String(decoding: utf8, as: UTF8.self)
    }

    /// Appends the visible text's UTF-8 to `utf8` (what `text` holds, without making the string).
    public func appendUTF8(to utf8: inout [UInt8]) {
        core.tree.forEachRun { run in
            if !run.isDeleted {
                let start = Int(run.contentOffset)
                for scalar in contents[start..<start + run.count] {
                    if scalar.isASCII {
                        utf8.append(UInt8(truncatingIfNeeded: scalar.value))
                    } else {
                        utf8.append(contentsOf: UTF8.encode(scalar)!)
                    }
                }
            }
        }
    }

    /// Inserts `string` at scalar `position` on behalf of `replica`; returns the operation to ship.
    @discardableResult
    public mutating func insert(_ string: String, at position: Int, replica: ReplicaID) -> Operation? {
        insert(contentsOf: string.unicodeScalars, at: position, replica: replica)
    }
}
