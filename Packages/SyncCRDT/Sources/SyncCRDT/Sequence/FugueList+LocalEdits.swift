import SyncModels

extension FugueList {
    /// Inserts `newElements` at visible `position` on behalf of `replica`; returns the operation to ship.
    ///
    /// - Precondition: `0 <= position <= count`.
    @discardableResult
    public mutating func insert(contentsOf newElements: some Collection<Element>, at position: Int, replica: ReplicaID)
        -> Operation?
    {
        insert(contentsOf: newElements, at: position, agent: core.agent(for: replica), counter: nil)
    }

    /// Inserts `newElements` at visible `position` with ids from `firstID` on (counters not used before by that
    /// replica, e.g. taken from an event's dot range); returns the operation to ship.
    @discardableResult
    public mutating func insert(contentsOf newElements: some Collection<Element>, at position: Int, firstID: Dot)
        -> Operation?
    {
        insert(contentsOf: newElements, at: position, agent: core.agent(for: firstID.replica), counter: firstID.counter)
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
        remove(at: position, count: count, agent: core.agent(for: replica), counter: nil)
    }

    /// Deletes `count` visible elements from `position`, the deletion taking the counters from `firstID` on;
    /// returns the operation to ship.
    @discardableResult
    public mutating func remove(at position: Int, count: Int, firstID: Dot) -> Operation? {
        remove(at: position, count: count, agent: core.agent(for: firstID.replica), counter: firstID.counter)
    }

    /// Deletes `deleteCount` elements at `position`, then inserts `newElements` there, without building the
    /// operations: the history keeps them for `operations(since:)`. This is the fast path for local typing.
    @inlinable
    public mutating func replace(
        at position: Int, deleting deleteCount: Int, with newElements: some Collection<Element>, replica: ReplicaID
    ) {
        let agent = core.agent(for: replica)
        let offset = contents.count
        contents.append(contentsOf: newElements)
        core.localReplace(
            at: position, deleting: deleteCount, inserting: contents.count - offset, contentOffset: Int32(offset),
            agent: agent)
    }

    private mutating func insert(
        contentsOf newElements: some Collection<Element>, at position: Int, agent: Int, counter: UInt64?
    ) -> Operation? {
        let offset = contents.count
        contents.append(contentsOf: newElements)
        guard contents.count > offset else { return nil }
        let (id, originLeft, rightParent) = core.localInsert(
            count: contents.count - offset, contentOffset: Int32(offset), at: position, agent: agent, counter: counter)
        return .insert(
            Insertion(
                id: core.dot(id), elements: Array(contents[offset...]), originLeft: core.optionalDot(originLeft),
                rightParent: core.optionalDot(rightParent)))
    }

    private mutating func remove(at position: Int, count: Int, agent: Int, counter: UInt64?) -> Operation? {
        guard count > 0 else { return nil }
        let (id, targets) = core.localRemove(at: position, count: count, agent: agent, counter: counter)
        return .delete(
            Deletion(
                id: core.dot(id),
                targets: targets.map {
                    DotRange(replica: core.replicas[$0.first.agent], first: $0.first.counter, count: UInt64($0.count))
                }))
    }
}
