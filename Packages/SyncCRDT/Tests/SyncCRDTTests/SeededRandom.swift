import SyncModels
import SyncTestSupport

/// The seeded generator of every randomized test (SplitMix64, from SyncTestSupport): every property test draws
/// its seed, runs a whole scenario from it, and prints it on failure, so any failing case can be replayed exactly.
typealias SeededRandom = SplitMix64

/// Replica ids for tests: `replica(0) < replica(1) < …`.
func replica(_ index: Int) -> ReplicaID { ReplicaID(high: UInt64(index + 1), low: 0xC0FFEE) }

/// A simulated network of replicas: each mutation broadcasts a message; delivery is random, messages may be
/// duplicated and reordered, links may be partitioned for a while, and states are sometimes merged whole
/// (anti-entropy). `settle()` then delivers everything.
struct Network<State, Message> {
    var states: [State]
    private var inboxes: [[Message]]
    private var partitioned: Set<Int> = []
    private let receive: (inout State, Message) -> Void
    private let mergeState: (inout State, State) -> Void

    init(
        replicas: Int, initial: State, receive: @escaping (inout State, Message) -> Void,
        mergeState: @escaping (inout State, State) -> Void
    ) {
        states = Array(repeating: initial, count: replicas)
        inboxes = Array(repeating: [], count: replicas)
        self.receive = receive
        self.mergeState = mergeState
    }

    /// Replica `index` makes a change; its messages go to every other replica's inbox.
    mutating func mutate(_ index: Int, _ change: (inout State) -> [Message]) {
        let messages = change(&states[index])
        for other in states.indices where other != index { inboxes[other] += messages }
    }

    /// One random network event: deliver (maybe duplicating) a random message, toggle a partition, or merge
    /// two replicas' whole states.
    mutating func step(_ random: inout SeededRandom) {
        let roll = random.int(below: 100)
        if roll < 5 {
            let index = random.int(below: states.count)
            if partitioned.contains(index) { partitioned.remove(index) } else { partitioned.insert(index) }
        } else if roll < 12 {
            let from = random.int(below: states.count)
            let to = random.int(below: states.count)
            if from != to && !partitioned.contains(from) && !partitioned.contains(to) {
                mergeState(&states[to], states[from])
            }
        } else {
            let index = random.int(below: states.count)
            guard !partitioned.contains(index), !inboxes[index].isEmpty else { return }
            let position = random.int(below: inboxes[index].count)
            let message = inboxes[index][position]
            if !random.chance(0.15) { inboxes[index].remove(at: position) }
            receive(&states[index], message)
        }
    }

    /// Heals partitions and delivers every message still in flight, in a random order.
    mutating func settle(_ random: inout SeededRandom) {
        partitioned = []
        for index in states.indices {
            inboxes[index].shuffle(using: &random)
            for message in inboxes[index] { receive(&states[index], message) }
            inboxes[index] = []
        }
    }
}
