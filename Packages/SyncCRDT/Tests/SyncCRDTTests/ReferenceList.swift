import SyncCRDT
import SyncModels

/// A deliberately naive FugueMax list: one array slot per element, linear searches, the integration loop of
/// the Eg-walker reference implementation. The optimized `FugueList` (runs in a B+ tree, skipping inside
/// runs) must order every element exactly as this does.
struct ReferenceList<Element: Sendable & Hashable> {
    struct Item {
        var id: Dot
        var originLeft: Dot?
        var rightParent: Dot?
        var isDeleted: Bool
        var value: Element?
    }

    var items: [Item] = []

    var elements: [Element] { items.filter { !$0.isDeleted }.map { $0.value! } }

    func index(of id: Dot) -> Int { items.firstIndex { $0.id == id }! }

    static func precedes(_ a: Dot, _ b: Dot) -> Bool {
        a.replica == b.replica ? a.counter < b.counter : a.replica < b.replica
    }

    /// Applies operations given in a causal order.
    mutating func apply(_ operation: FugueList<Element>.Operation) {
        switch operation {
        case .insert(let insertion):
            for offset in 0..<insertion.count {
                let id = Dot(replica: insertion.id.replica, counter: insertion.id.counter + UInt64(offset))
                guard !items.contains(where: { $0.id == id }) else { continue }
                let originLeft =
                    offset == 0
                    ? insertion.originLeft : Dot(replica: id.replica, counter: id.counter - 1)
                integrate(
                    Item(
                        id: id, originLeft: originLeft, rightParent: offset == 0 ? insertion.rightParent : nil,
                        isDeleted: insertion.elements == nil, value: insertion.elements?[offset]))
            }
        case .delete(let deletion):
            for target in deletion.targets {
                for counter in target.first..<target.first + target.count {
                    items[index(of: Dot(replica: target.replica, counter: counter))].isDeleted = true
                }
            }
        }
    }

    private mutating func integrate(_ item: Item) {
        let left = item.originLeft.map(index(of:)) ?? -1
        let right = item.rightParent.map(index(of:)) ?? items.count
        var scanning = false
        var destination = left + 1
        var scan = left + 1
        while scan < right {
            let other = items[scan]
            let otherLeft = other.originLeft.map(index(of:)) ?? -1
            if otherLeft < left { break }
            if otherLeft == left {
                let otherRight = other.rightParent.map(index(of:)) ?? items.count
                if otherRight == right && Self.precedes(item.id, other.id) { break }
                scanning = otherRight < right
            }
            scan += 1
            if !scanning { destination = scan }
        }
        items.insert(item, at: destination)
    }
}
