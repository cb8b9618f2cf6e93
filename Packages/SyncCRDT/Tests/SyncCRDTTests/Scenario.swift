import SyncCRDT

/// A random run of a network of replicas: `mutations` random changes interleaved with random network events.
/// Returns the states before and after everything in flight is delivered.
func runScenario<State, Message>(
    seed: UInt64, replicas: Int, mutations: Int, initial: State,
    mutate: (inout SeededRandom, Int, inout State) -> [Message],
    receive: @escaping (inout State, Message) -> Void,
    mergeState: @escaping (inout State, State) -> Void
) -> (unsettled: [State], settled: [State]) {
    var random = SeededRandom(seed: seed)
    var network = Network(replicas: replicas, initial: initial, receive: receive, mergeState: mergeState)
    for _ in 0..<mutations {
        let index = random.int(below: replicas)
        network.mutate(index) { state in mutate(&random, index, &state) }
        for _ in 0..<random.int(0...4) { network.step(&random) }
    }
    let unsettled = network.states
    network.settle(&random)
    return (unsettled, network.states)
}
