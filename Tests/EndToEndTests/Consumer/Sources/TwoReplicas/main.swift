// Two replicas of a to-do list syncing through a sync server, all in this process: the server on a free
// loopback port and PostgreSQL (`SYNC_DATABASE_URL`), each replica an event store on its own SQLite file in
// `CONSUMER_DIRECTORY`. Prints "converged" and exits 0 when each replica holds the other's to-do.
import Foundation
import Hummingbird
import Logging
import Prometheus
import SyncEngine
import SyncEngineHTTPClient
import SyncEventStore
import SyncModels
import SyncServer

struct ConsumerError: Error, CustomStringConvertible {
    var description: String
}

let environment = ProcessInfo.processInfo.environment
guard let databaseURL = environment["SYNC_DATABASE_URL"], let directory = environment["CONSUMER_DIRECTORY"] else {
    throw ConsumerError(description: "set SYNC_DATABASE_URL and CONSUMER_DIRECTORY")
}
let secret = "consumer-secret-0123456789abcdef-0123"

var configuration = ServerConfiguration()
configuration.databaseURL = databaseURL
configuration.jwtSecret = secret
configuration.port = 0
var logger = Logger(label: "consumer")
logger.logLevel = .warning
var server = SyncServerApp(configuration: configuration, logger: logger, registry: PrometheusCollectorRegistry())
let (ports, listening) = AsyncStream<Int>.makeStream()
server.onListening = { port in listening.yield(port) }
let application = try await server.makeApplication()

try await withThrowingTaskGroup(of: Void.self) { group in
    group.addTask { try await application.runService(gracefulShutdownSignals: []) }
    var next = ports.makeAsyncIterator()
    guard let port = await next.next() else { throw ConsumerError(description: "the server did not listen") }

    let token = try await TokenVerifier(secret: secret).mint(subject: "consumer", scopes: ["list-1"], ttl: 600)
    let transport = HTTPClientTransport(baseURL: URL(string: "http://127.0.0.1:\(port)")!, token: token)
    let phone = try EventStore(path: directory + "/phone.sqlite", projections: [])
    let laptop = try EventStore(path: directory + "/laptop.sqlite", projections: [])
    let engines = try [phone, laptop].map { try SyncEngine(store: $0, transport: transport) }

    _ = try await phone.append([
        EventDraft(
            scope: "list-1", stream: "todo:milk", type: "todo.added", payload: .object(["title": "Milk"]),
            expectedVersion: .noStream)
    ])
    _ = try await laptop.append([
        EventDraft(
            scope: "list-1", stream: "todo:bread", type: "todo.added", payload: .object(["title": "Bread"]),
            expectedVersion: .noStream)
    ])
    // Each pushes its own and pulls the other's; the first to sync sees the second's only on its next sync.
    for engine in engines + engines { try await engine.syncNow() }

    for (name, store) in [("phone", phone), ("laptop", laptop)] {
        for stream in ["todo:milk", "todo:bread"] {
            let events = try await store.events(stream: stream)
            guard events.count == 1, events[0].status == .confirmed else {
                throw ConsumerError(description: "\(name) holds \(events.map(\.status)) for \(stream)")
            }
        }
    }
    print("converged")
    group.cancelAll()
}
