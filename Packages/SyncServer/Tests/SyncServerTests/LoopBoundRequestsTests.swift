import AsyncHTTPClient
import Foundation
import NIOCore
import NIOPosix
import PostgresNIO
import Prometheus
import SyncModels
import SyncProtocol
import SyncServerTesting
import SyncTestSupport
import Testing

@testable import SyncServer

/// Requests served on their connection's event loop (`ServerConfiguration.requestsOnTheirLoops`): the executor
/// keeps a task on its loop across awaits, a lease made on a loop gets a connection of that loop's pool, and a
/// server serving this way pushes, pulls and wakes its long-polls.
@Suite struct LoopBoundRequestsTests {
    /// A task that prefers a loop's executor runs there, and comes back there after awaiting work done on another
    /// loop and on the concurrency pool.
    @Test func aTaskPreferringALoopRunsOnItAfterEveryAwait() async throws {
        let executors = LoopExecutors.singleton
        #expect(executors.loops.count == System.coreCount)
        #expect(executors.current == nil, "a test's task runs on the concurrency pool")
        for (index, loop) in executors.loops.enumerated() {
            let executor = try #require(executors.executor(for: loop))
            let other = executors.loops[(index + 1) % executors.loops.count]
            let where_ = await withTaskExecutorPreference(executor) { () async -> [Bool] in
                var seen = [MultiThreadedEventLoopGroup.currentEventLoop === loop]
                await Task.yield()
                seen.append(MultiThreadedEventLoopGroup.currentEventLoop === loop)
                _ = try? await other.submit { 1 }.get()
                seen.append(MultiThreadedEventLoopGroup.currentEventLoop === loop)
                await Task.detached { await Task.yield() }.value
                seen.append(executors.current === executor)
                // A child task inherits the preference.
                async let child = MultiThreadedEventLoopGroup.currentEventLoop === loop
                seen.append(await child)
                return seen
            }
            #expect(where_ == [true, true, true, true, true], "loop \(index)")
        }
    }

    /// With a pool per loop, a lease made on a loop takes a connection that loop serves, and the body runs there;
    /// a lease made off the loops takes one of the shared pool.
    @Test func aLeaseOnALoopTakesAConnectionOfThatLoop() async throws {
        try await TestDatabase.with { testDatabase in
            let executors = LoopExecutors.singleton
            let shared = PostgresClient(
                configuration: Database.clientConfiguration(testDatabase.url, poolSize: 2),
                backgroundLogger: TestDatabase.logger)
            var loopPools: [ObjectIdentifier: LoopPool] = [:]
            for loop in executors.loops {
                loopPools[ObjectIdentifier(loop)] = LoopPool(
                    configuration: Database.clientConfiguration(testDatabase.url, poolSize: 1), size: 1,
                    keepAlive: nil, loop: loop, logger: TestDatabase.logger)
            }
            let metrics = ServerMetrics(factory: PrometheusMetricsFactory(registry: PrometheusCollectorRegistry()))
            let database = Database(
                client: shared, queueLimit: 16, acquireTimeout: .seconds(20), metrics: metrics,
                loopPools: loopPools)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await shared.run() }
                for loop in executors.loops {
                    let service = LoopPoolService(
                        pool: loopPools[ObjectIdentifier(loop)]!, executor: executors.executor(for: loop)!,
                        logger: TestDatabase.logger)
                    group.addTask { try await service.run() }
                }
                for loop in executors.loops {
                    let executor = try #require(executors.executor(for: loop))
                    let (connectionLoop, bodyLoop, value) = try await withTaskExecutorPreference(executor) {
                        try await database.withConnection { connection in
                            let value = try await DatabaseLeaseTests.selectOne(connection)
                            return (
                                ObjectIdentifier(connection.eventLoop),
                                MultiThreadedEventLoopGroup.currentEventLoop.map { ObjectIdentifier($0) }, value
                            )
                        }
                    }
                    #expect(connectionLoop == ObjectIdentifier(loop))
                    #expect(bodyLoop == ObjectIdentifier(loop))
                    #expect(value == 1)
                }
                // Off the loops: the shared pool, and the body on the concurrency pool.
                let offLoop = try await database.withConnection { connection in
                    (try await DatabaseLeaseTests.selectOne(connection), MultiThreadedEventLoopGroup.currentEventLoop)
                }
                #expect(offLoop.0 == 1 && offLoop.1 == nil)
                group.cancelAll()
            }
        }
    }

    @Test func theSettingIsABoolean() throws {
        #expect(ServerConfiguration().requestsOnTheirLoops)
        #expect(try ServerConfiguration(environment: ["SYNC_REQUESTS_ON_THEIR_LOOPS": "true"]).requestsOnTheirLoops)
        #expect(try !ServerConfiguration(environment: ["SYNC_REQUESTS_ON_THEIR_LOOPS": "off"]).requestsOnTheirLoops)
        #expect(throws: ConfigurationError.self) {
            try ServerConfiguration(environment: ["SYNC_REQUESTS_ON_THEIR_LOOPS": "maybe"])
        }
    }

    /// A server serving each connection on its loop, over real HTTP: long-polls of several connections (so on
    /// both loops) are woken by a push through the LISTEN connection read on its own loop, and pushes and pulls
    /// are answered.
    @Test func aServerOnItsLoopsWakesItsLongPollsAndAnswers() async throws {
        let devices = 40
        let scope: Scope = "loops"
        let wait = 120
        try await FanoutTests.withClient(
            devices: devices,
            configure: {
                $0.requestsOnTheirLoops = true
                $0.limits.maxWaitSeconds = wait
            }
        ) { http, base, server in
            var tokens: [String] = []
            for index in 0..<devices { tokens.append(try await server.token([scope.name], subject: "device-\(index)")) }
            while try await FanoutTests.metric("sync_longpoll_listening", http: http, base: base) < 1 {
                try await Task.sleep(for: .milliseconds(20))
            }
            try await withThrowingTaskGroup(of: (Int, PullResponse?).self) { group in
                for token in tokens {
                    group.addTask {
                        try await FanoutTests.poll(http: http, base: base, token: token, scope: scope, wait: wait)
                    }
                }
                try await FanoutTests.waitUntilParked(devices, http: http, base: base)
                let event = EventFixtures.event(scope: scope)
                #expect(try await FanoutTests.push(event, http: http, base: base, token: tokens[0]) == 200)
                var woken = 0
                for try await (status, page) in group {
                    #expect(status == 200)
                    #expect(page?.events.map(\.id) == [event.id])
                    woken += 1
                }
                #expect(woken == devices)
            }
            let page = try await server.pull(PullRequest(scopes: [scope]), scopes: [scope.name])
            #expect(page.events.count == 1)
        }
    }
}
