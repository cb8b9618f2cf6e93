/// The elements of a sequence in document order, tombstones included, as runs in a counted B+ tree.
///
/// Leaves hold up to `leafCapacity` runs; branches hold up to `branchCapacity` children. Every leaf and branch
/// keeps the number of visible elements and of all elements below it, so a visible position or a document
/// index (tombstones included) is found in O(log n). `leafOf` maps every element to its leaf, so an element is
/// found by id in O(1) plus a scan of one leaf. Everything lives in flat arrays indexed by integers, so the
/// tree is a plain value with copy-on-write.
struct RunTree: Sendable {
    static let leafCapacity = 32
    static let branchCapacity = 16

    /// A position in the tree: a run in a leaf and an element offset in that run (which may equal the run's
    /// length: just after it).
    struct Cursor: Sendable {
        var leaf: Int
        var run: Int
        var offset: Int
    }

    private(set) var runs: [Run] = []
    private(set) var leafRunCount: [Int32] = []
    private(set) var leafVisible: [Int] = []
    private(set) var leafTotal: [Int] = []
    private(set) var leafParent: [Int32] = []
    private(set) var leafNext: [Int32] = []

    private var children: [Int32] = []
    private var branchChildCount: [Int32] = []
    private var branchVisible: [Int] = []
    private var branchTotal: [Int] = []
    private var branchParent: [Int32] = []
    /// 1 when a branch's children are leaves.
    private var branchLevel: [Int32] = []

    private var root: Int = 0
    private var height: Int = 0
    private(set) var firstLeaf: Int = 0

    /// For each agent, the leaf of each of its elements by counter (-1: not in the tree).
    private(set) var leafOf: [[Int32]] = []

    /// An empty tree (one empty leaf).
    init() {
        // A copy of one shared empty tree: its arrays are shared until the first edit, so the many lists that
        // stay empty (a note without a checklist) allocate nothing.
        self = Self.empty
    }

    private init(allocatingFirstLeaf: Void) {
        _ = allocateLeaf()
    }

    private static let empty = RunTree(allocatingFirstLeaf: ())

    /// Bytes held by the tree's arrays (capacities times strides), the element index included.
    var memoryFootprint: Int {
        runs.capacity * MemoryLayout<Run>.stride
            + (leafRunCount.capacity + leafParent.capacity + leafNext.capacity + children.capacity
                + branchChildCount.capacity + branchParent.capacity + branchLevel.capacity) * 4
            + (leafVisible.capacity + leafTotal.capacity + branchVisible.capacity + branchTotal.capacity) * 8
            + leafOf.reduce(leafOf.capacity * 8) { $0 + $1.capacity * 4 }
    }

    // MARK: Totals

    /// The number of visible elements.
    var visibleCount: Int { height == 0 ? leafVisible[root] : branchVisible[root] }
    /// The number of elements, tombstones included.
    var totalCount: Int { height == 0 ? leafTotal[root] : branchTotal[root] }
    /// The number of runs.
    var runCount: Int {
        var count = 0
        var leaf = firstLeaf
        while leaf >= 0 {
            count += Int(leafRunCount[leaf])
            leaf = Int(leafNext[leaf])
        }
        return count
    }

    subscript(leaf: Int, run: Int) -> Run {
        get { runs[leaf &* Self.leafCapacity &+ run] }
    }

    func runCount(inLeaf leaf: Int) -> Int { Int(leafRunCount[leaf]) }

    func nextLeaf(_ leaf: Int) -> Int { Int(leafNext[leaf]) }

    /// Calls `body` with every run in document order.
    func forEachRun(_ body: (Run) throws -> Void) rethrows {
        var leaf = firstLeaf
        while leaf >= 0 {
            let base = leaf * Self.leafCapacity
            for index in base..<base + Int(leafRunCount[leaf]) { try body(runs[index]) }
            leaf = Int(leafNext[leaf])
        }
    }

    /// Lets `body` change every run in document order (content offsets only: counts must not change).
    mutating func updateEachRun(_ body: (inout Run) throws -> Void) rethrows {
        var leaf = firstLeaf
        while leaf >= 0 {
            let base = leaf * Self.leafCapacity
            for index in base..<base + Int(leafRunCount[leaf]) { try body(&runs[index]) }
            leaf = Int(leafNext[leaf])
        }
    }

    // MARK: Finding elements

    /// The cursor on the visible element at `position` (0-based, `position < visibleCount`), and the visible
    /// position of the start of its leaf.
    func findVisible(_ position: Int) -> (cursor: Cursor, leafStart: Int) {
        var remaining = position
        var node = root
        var level = height
        while level > 0 {
            let base = node * Self.branchCapacity
            let count = Int(branchChildCount[node])
            var slot = 0
            while true {
                let child = Int(children[base + slot])
                let width = level == 1 ? leafVisible[child] : branchVisible[child]
                if remaining < width || slot == count - 1 {
                    node = child
                    break
                }
                remaining -= width
                slot += 1
            }
            level -= 1
        }
        let leafStart = position - remaining
        return (findVisible(remaining, inLeaf: node), leafStart)
    }

    /// The cursor on the visible element at `position` counted from the start of `leaf`.
    func findVisible(_ position: Int, inLeaf leaf: Int) -> Cursor {
        var remaining = position
        let base = leaf * Self.leafCapacity
        for index in 0..<Int(leafRunCount[leaf]) {
            let run = runs[base + index]
            if !run.isDeleted {
                if remaining < run.count { return Cursor(leaf: leaf, run: index, offset: remaining) }
                remaining -= run.count
            }
        }
        preconditionFailure("visible position past the end of its leaf")
    }

    /// The cursor on the element at document index `index` (tombstones counted), `index < totalCount`.
    func findIndex(_ index: Int) -> Cursor {
        var remaining = index
        var node = root
        var level = height
        while level > 0 {
            let base = node * Self.branchCapacity
            let count = Int(branchChildCount[node])
            var slot = 0
            while true {
                let child = Int(children[base + slot])
                let width = level == 1 ? leafTotal[child] : branchTotal[child]
                if remaining < width || slot == count - 1 {
                    node = child
                    break
                }
                remaining -= width
                slot += 1
            }
            level -= 1
        }
        let base = node * Self.leafCapacity
        for index in 0..<Int(leafRunCount[node]) {
            let count = runs[base + index].count
            if remaining < count { return Cursor(leaf: node, run: index, offset: remaining) }
            remaining -= count
        }
        preconditionFailure("document index past the end")
    }

    /// Whether `item` is in the tree.
    func contains(_ item: ItemID) -> Bool {
        let agent = item.agent
        guard agent < leafOf.count else { return false }
        let counter = Int(item.counter)
        return counter < leafOf[agent].count && leafOf[agent][counter] >= 0
    }

    /// The cursor on `item`, which must be in the tree.
    func find(_ item: ItemID) -> Cursor {
        let leaf = Int(leafOf[item.agent][Int(item.counter)])
        let base = leaf * Self.leafCapacity
        for index in 0..<Int(leafRunCount[leaf]) {
            let run = runs[base + index]
            if run.contains(item) {
                return Cursor(leaf: leaf, run: index, offset: Int(item.raw &- run.id.raw))
            }
        }
        preconditionFailure("element not in its leaf")
    }

    /// The document index (tombstones counted) of the element at `cursor`.
    func index(of cursor: Cursor) -> Int {
        var index = cursor.offset
        let base = cursor.leaf * Self.leafCapacity
        for run in 0..<cursor.run { index += runs[base + run].count }
        var child = cursor.leaf
        var parent = Int(leafParent[child])
        var childIsLeaf = true
        while parent >= 0 {
            let childBase = parent * Self.branchCapacity
            var slot = 0
            while Int(children[childBase + slot]) != child {
                let sibling = Int(children[childBase + slot])
                index += childIsLeaf ? leafTotal[sibling] : branchTotal[sibling]
                slot += 1
            }
            child = parent
            parent = Int(branchParent[parent])
            childIsLeaf = false
        }
        return index
    }

    /// The document index of `item`, which must be in the tree.
    func index(of item: ItemID) -> Int { index(of: find(item)) }

    /// The visible position of the first element of `leaf`.
    func visibleStart(ofLeaf leaf: Int) -> Int {
        var position = 0
        var child = leaf
        var parent = Int(leafParent[child])
        var childIsLeaf = true
        while parent >= 0 {
            let childBase = parent * Self.branchCapacity
            var slot = 0
            while Int(children[childBase + slot]) != child {
                let sibling = Int(children[childBase + slot])
                position += childIsLeaf ? leafVisible[sibling] : branchVisible[sibling]
                slot += 1
            }
            child = parent
            parent = Int(branchParent[parent])
            childIsLeaf = false
        }
        return position
    }

    /// The cursor one element after `cursor`, normalized to the start of the next run (nil at the end).
    func cursorAfter(_ cursor: Cursor) -> Cursor? {
        normalized(Cursor(leaf: cursor.leaf, run: cursor.run, offset: cursor.offset + 1))
    }

    /// `cursor` moved to the start of the next run when it points past its run's end (nil at the end).
    func normalized(_ cursor: Cursor) -> Cursor? {
        var cursor = cursor
        while cursor.offset >= self[cursor.leaf, cursor.run].count {
            cursor.offset = 0
            cursor.run += 1
            while cursor.run >= Int(leafRunCount[cursor.leaf]) {
                let next = Int(leafNext[cursor.leaf])
                if next < 0 { return nil }
                cursor.leaf = next
                cursor.run = 0
            }
        }
        return cursor
    }

    /// The cursor on the first element (nil when empty).
    var start: Cursor? {
        leafRunCount[firstLeaf] == 0 ? nil : Cursor(leaf: firstLeaf, run: 0, offset: 0)
    }

    // MARK: Changing runs

    /// Extends the run at (`leaf`, `run`) by `count` elements (its content must follow on).
    mutating func extendRun(leaf: Int, run: Int, by count: Int) {
        let index = leaf &* Self.leafCapacity &+ run
        let item = runs[index]
        runs[index].length += Int32(count)
        setLeaf(leaf, for: item.id.advanced(by: item.count), count: count)
        adjust(leaf: leaf, visible: item.isDeleted ? 0 : count, total: count)
    }

    /// Inserts `item` as run `index` of `leaf` (splitting the leaf when full) and returns where it went.
    @discardableResult
    mutating func insert(_ item: Run, leaf: Int, at index: Int) -> Cursor {
        var leaf = leaf
        var index = index
        if Int(leafRunCount[leaf]) == Self.leafCapacity {
            let half = Self.leafCapacity / 2
            let newLeaf = splitLeaf(leaf, at: half)
            if index > half {
                leaf = newLeaf
                index -= half
            }
        }
        let base = leaf * Self.leafCapacity
        let count = Int(leafRunCount[leaf])
        if index < count {
            runs.withUnsafeMutableBufferPointer { buffer in
                var position = base + count
                while position > base + index {
                    buffer[position] = buffer[position - 1]
                    position -= 1
                }
            }
        }
        runs[base + index] = item
        leafRunCount[leaf] += 1
        setLeaf(leaf, for: item.id, count: item.count)
        adjust(leaf: leaf, visible: item.visibleCount, total: item.count)
        return Cursor(leaf: leaf, run: index, offset: 0)
    }

    /// Splits the run at `cursor` before `cursor.offset` (0 < offset < length); returns the cursor on the
    /// second part. The first part is always the run just before it in the same leaf.
    @discardableResult
    mutating func split(at cursor: Cursor) -> Cursor {
        let index = cursor.leaf * Self.leafCapacity + cursor.run
        let item = runs[index]
        let suffix = item.suffix(from: cursor.offset)
        runs[index].length = Int32(cursor.offset)
        adjust(leaf: cursor.leaf, visible: -suffix.visibleCount, total: -suffix.count)
        return insert(suffix, leaf: cursor.leaf, at: cursor.run + 1)
    }

    /// Marks up to `count` elements deleted from `cursor` on, within its run; returns how many were marked
    /// (visible ones only count) and the cursor just after them.
    mutating func delete(at cursor: Cursor, count: Int) -> (deleted: Int, after: Cursor) {
        var cursor = cursor
        let available = self[cursor.leaf, cursor.run].count - cursor.offset
        let take = min(count, available)
        if self[cursor.leaf, cursor.run].isDeleted {
            return (0, Cursor(leaf: cursor.leaf, run: cursor.run, offset: cursor.offset + take))
        }
        if cursor.offset > 0 { cursor = split(at: cursor) }
        if take < self[cursor.leaf, cursor.run].count {
            let suffix = split(at: Cursor(leaf: cursor.leaf, run: cursor.run, offset: take))
            cursor = Cursor(leaf: suffix.leaf, run: suffix.run - 1, offset: 0)
        }
        runs[cursor.leaf * Self.leafCapacity + cursor.run].isDeleted = true
        adjust(leaf: cursor.leaf, visible: -take, total: 0)
        // Tombstones that continue each other become one run again.
        var run = cursor.run
        var offset = take
        if run + 1 < Int(leafRunCount[cursor.leaf]) && self[cursor.leaf, run].canAppend(self[cursor.leaf, run + 1]) {
            mergeWithPrevious(leaf: cursor.leaf, run: run + 1)
        }
        if run > 0 && self[cursor.leaf, run - 1].canAppend(self[cursor.leaf, run]) {
            offset += self[cursor.leaf, run - 1].count
            mergeWithPrevious(leaf: cursor.leaf, run: run)
            run -= 1
        }
        return (take, Cursor(leaf: cursor.leaf, run: run, offset: offset))
    }

    /// Sets the content offset of the run at `cursor`.
    mutating func setContentOffset(_ offset: Int32, leaf: Int, run: Int) {
        runs[leaf * Self.leafCapacity + run].contentOffset = offset
    }

    /// Merges the run at `cursor` into the run before it when it continues it.
    mutating func mergeWithPrevious(leaf: Int, run: Int) {
        guard run > 0 else { return }
        let base = leaf * Self.leafCapacity
        let previous = runs[base + run - 1]
        let current = runs[base + run]
        guard previous.canAppend(current) else { return }
        runs[base + run - 1].length += current.length
        let count = Int(leafRunCount[leaf])
        runs.withUnsafeMutableBufferPointer { buffer in
            for position in (base + run)..<(base + count - 1) { buffer[position] = buffer[position + 1] }
        }
        leafRunCount[leaf] -= 1
    }

    // MARK: Structure

    private mutating func allocateLeaf() -> Int {
        let leaf = leafRunCount.count
        runs.append(
            contentsOf: repeatElement(
                Run(id: .none, originLeft: .none, rightParent: .none, length: 0, contentOffset: -1, isDeleted: true),
                count: Self.leafCapacity))
        leafRunCount.append(0)
        leafVisible.append(0)
        leafTotal.append(0)
        leafParent.append(-1)
        leafNext.append(-1)
        return leaf
    }

    private mutating func allocateBranch(level: Int) -> Int {
        let branch = branchChildCount.count
        children.append(contentsOf: repeatElement(-1, count: Self.branchCapacity))
        branchChildCount.append(0)
        branchVisible.append(0)
        branchTotal.append(0)
        branchParent.append(-1)
        branchLevel.append(Int32(level))
        return branch
    }

    private mutating func setLeaf(_ leaf: Int, for first: ItemID, count: Int) {
        let agent = first.agent
        while leafOf.count <= agent { leafOf.append([]) }
        let start = Int(first.counter)
        let end = start + count
        if leafOf[agent].count < end {
            leafOf[agent].append(contentsOf: repeatElement(-1, count: end - leafOf[agent].count))
        }
        let value = Int32(leaf)
        leafOf[agent].withUnsafeMutableBufferPointer { buffer in
            for counter in start..<end { buffer[counter] = value }
        }
    }

    /// Forgets where `count` elements from `first` are (they left the tree).
    mutating func clearLeaf(for first: ItemID, count: Int) {
        let agent = first.agent
        let start = Int(first.counter)
        leafOf[agent].withUnsafeMutableBufferPointer { buffer in
            for counter in start..<(start + count) { buffer[counter] = -1 }
        }
    }

    private mutating func adjust(leaf: Int, visible: Int, total: Int) {
        leafVisible[leaf] &+= visible
        leafTotal[leaf] &+= total
        var parent = Int(leafParent[leaf])
        while parent >= 0 {
            branchVisible[parent] &+= visible
            branchTotal[parent] &+= total
            parent = Int(branchParent[parent])
        }
    }

    /// Moves the runs of `leaf` from `at` on to a new leaf placed after it; returns the new leaf.
    private mutating func splitLeaf(_ leaf: Int, at split: Int) -> Int {
        let newLeaf = allocateLeaf()
        let base = leaf * Self.leafCapacity
        let newBase = newLeaf * Self.leafCapacity
        let count = Int(leafRunCount[leaf])
        var movedVisible = 0
        var movedTotal = 0
        for index in split..<count {
            let item = runs[base + index]
            runs[newBase + index - split] = item
            movedVisible += item.visibleCount
            movedTotal += item.count
            setLeaf(newLeaf, for: item.id, count: item.count)
        }
        leafRunCount[leaf] = Int32(split)
        leafRunCount[newLeaf] = Int32(count - split)
        leafVisible[leaf] -= movedVisible
        leafTotal[leaf] -= movedTotal
        leafVisible[newLeaf] = movedVisible
        leafTotal[newLeaf] = movedTotal
        leafNext[newLeaf] = leafNext[leaf]
        leafNext[leaf] = Int32(newLeaf)
        if height == 0 {
            let branch = allocateBranch(level: 1)
            children[branch * Self.branchCapacity] = Int32(leaf)
            children[branch * Self.branchCapacity + 1] = Int32(newLeaf)
            branchChildCount[branch] = 2
            branchVisible[branch] = leafVisible[leaf] + movedVisible
            branchTotal[branch] = leafTotal[leaf] + movedTotal
            leafParent[leaf] = Int32(branch)
            leafParent[newLeaf] = Int32(branch)
            root = branch
            height = 1
        } else {
            insertChild(newLeaf, after: leaf, in: Int(leafParent[leaf]))
        }
        return newLeaf
    }

    private func childVisible(_ child: Int, level: Int) -> Int {
        level == 1 ? leafVisible[child] : branchVisible[child]
    }

    private func childTotal(_ child: Int, level: Int) -> Int {
        level == 1 ? leafTotal[child] : branchTotal[child]
    }

    private mutating func setParent(_ parent: Int, ofChild child: Int, level: Int) {
        if level == 1 { leafParent[child] = Int32(parent) } else { branchParent[child] = Int32(parent) }
    }

    /// Inserts `child` right after `previous` in `branch`, whose totals already include it.
    private mutating func insertChild(_ child: Int, after previous: Int, in branch: Int) {
        let level = Int(branchLevel[branch])
        let base = branch * Self.branchCapacity
        let count = Int(branchChildCount[branch])
        var list = Array(children[base..<base + count])
        let slot = list.firstIndex(of: Int32(previous))! + 1
        list.insert(Int32(child), at: slot)
        if list.count <= Self.branchCapacity {
            for (offset, value) in list.enumerated() { children[base + offset] = value }
            branchChildCount[branch] = Int32(list.count)
            setParent(branch, ofChild: child, level: level)
            return
        }
        // Split the branch in two halves.
        let half = list.count / 2
        let sibling = allocateBranch(level: level)
        let siblingBase = sibling * Self.branchCapacity
        var leftVisible = 0
        var leftTotal = 0
        var rightVisible = 0
        var rightTotal = 0
        for (offset, value) in list.enumerated() {
            let node = Int(value)
            if offset < half {
                children[base + offset] = value
                setParent(branch, ofChild: node, level: level)
                leftVisible += childVisible(node, level: level)
                leftTotal += childTotal(node, level: level)
            } else {
                children[siblingBase + offset - half] = value
                setParent(sibling, ofChild: node, level: level)
                rightVisible += childVisible(node, level: level)
                rightTotal += childTotal(node, level: level)
            }
        }
        branchChildCount[branch] = Int32(half)
        branchChildCount[sibling] = Int32(list.count - half)
        branchVisible[branch] = leftVisible
        branchTotal[branch] = leftTotal
        branchVisible[sibling] = rightVisible
        branchTotal[sibling] = rightTotal
        let parent = Int(branchParent[branch])
        if parent < 0 {
            let newRoot = allocateBranch(level: level + 1)
            children[newRoot * Self.branchCapacity] = Int32(branch)
            children[newRoot * Self.branchCapacity + 1] = Int32(sibling)
            branchChildCount[newRoot] = 2
            branchVisible[newRoot] = leftVisible + rightVisible
            branchTotal[newRoot] = leftTotal + rightTotal
            branchParent[branch] = Int32(newRoot)
            branchParent[sibling] = Int32(newRoot)
            root = newRoot
            height += 1
        } else {
            insertChild(sibling, after: branch, in: parent)
        }
    }

    // MARK: Bulk loading

    /// A tree holding `items` in order (used by decoding and compaction).
    init(runs items: [Run]) {
        self.init()
        var leaf = 0
        for item in items {
            if Int(leafRunCount[leaf]) == Self.leafCapacity * 3 / 4 {
                // Leave room in each leaf so that later edits do not split at once.
                leaf = appendLeaf(after: leaf)
            }
            let index = Int(leafRunCount[leaf])
            insert(item, leaf: leaf, at: index)
        }
    }

    private mutating func appendLeaf(after leaf: Int) -> Int {
        // Split with nothing to move: an empty leaf after `leaf`.
        splitLeaf(leaf, at: Int(leafRunCount[leaf]))
    }
}
