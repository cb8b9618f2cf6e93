// swift-tools-version: 6.2
// The repository's one manifest for users: every reusable library of Packages/ is a product here, so an app
// adds the whole stack by one URL and picks the products it needs, e.g.
//
//     .package(url: "https://github.com/OWNER/offline-sync.git", from: "0.4.0"),
//     .product(name: "SyncEngine", package: "offline-sync"),
//
// The library targets are declared here by path (Packages/<Package>/Sources/<Target>); each package folder
// also keeps a manifest of its own for working on it alone, and `ManifestConsistencyTests` holds the two in
// step (same products, targets, dependencies and version ranges). The apps, the benchmarks and every test
// target build from here with one build of the dependencies (SwiftPM never runs the tests of a dependency).
//
// Dependencies take version ranges (`from:`): an app resolves them together with its own. The lower bounds
// are the versions this repository is built and tested with; hummingbird, jwt-kit and async-http-client
// need Swift tools 6.2, which is therefore the minimum toolchain.
import PackageDescription

let package = Package(
    name: "offline-sync",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        // Packages/SyncModels
        .library(name: "SyncModels", targets: ["SyncModels"]),
        // Packages/SyncCRDT
        .library(name: "SyncCRDT", targets: ["SyncCRDT"]),
        .library(name: "EditingTraces", targets: ["EditingTraces"]),
        // Packages/SyncStorage
        .library(name: "SyncStorage", targets: ["SyncStorage"]),
        // Packages/SyncCompression
        .library(name: "SyncCompression", targets: ["SyncCompression"]),
        // Packages/SyncEventStore
        .library(name: "SyncEventStore", targets: ["SyncEventStore"]),
        .library(name: "SyncEventStoreTestSupport", targets: ["SyncEventStoreTestSupport"]),
        // Packages/SyncProtocol
        .library(name: "SyncProtocol", targets: ["SyncProtocol"]),
        // Packages/SyncEngine
        .library(name: "SyncEngine", targets: ["SyncEngine"]),
        .library(name: "SyncEngineTesting", targets: ["SyncEngineTesting"]),
        .library(name: "SyncEngineHTTPClient", targets: ["SyncEngineHTTPClient"]),
        // Packages/SyncServer
        .library(name: "SyncServer", targets: ["SyncServer"]),
        .library(name: "SyncServerTesting", targets: ["SyncServerTesting"]),
        // Packages/SyncTestSupport
        .library(name: "SyncTestSupport", targets: ["SyncTestSupport"]),
        // Packages/SyncToolSupport
        .library(name: "SyncToolSupport", targets: ["SyncToolSupport"]),
        // Packages/NotesDomain: the reference domain
        .library(name: "NotesDomain", targets: ["NotesDomain"]),
        .library(name: "NotesStore", targets: ["NotesStore"]),
        .library(name: "NotesServer", targets: ["NotesServer"]),

        .executable(name: "sync-server", targets: ["sync-server"]),
        .executable(name: "sync-agent", targets: ["sync-agent"]),
        .executable(name: "sync-bench", targets: ["SyncBench"]),
        .executable(name: "sync-load", targets: ["sync-load"]),
        .executable(name: "sync-fault-proxy", targets: ["sync-fault-proxy"]),
    ],
    dependencies: [
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.8.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        // Only the tests, the benchmarks and sync-load use these.
        .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.1"),
        .package(url: "https://github.com/mattpolzin/OpenAPIKit.git", from: "6.4.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift.git", from: "0.2.0"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
    ],
    targets: [
        // MARK: Library targets, one block per package folder (the same as the package's own manifest).

        // Packages/SyncModels: ids, hybrid logical clock, dots, scopes, the event envelope, cursors.
        .target(name: "SyncModels", path: "Packages/SyncModels/Sources/SyncModels"),

        // Packages/SyncCRDT: the CRDTs, and the editing traces' loader (tests and benchmarks only).
        .target(name: "SyncCRDT", dependencies: ["SyncModels"], path: "Packages/SyncCRDT/Sources/SyncCRDT"),
        .target(
            name: "EditingTraces",
            dependencies: ["SyncCRDT", "SyncModels", "SyncCompression"],
            path: "Packages/SyncCRDT/Sources/EditingTraces"
        ),

        // Packages/SyncStorage: SQLite through GRDB, and its encrypting VFS.
        .target(
            name: "CSyncCipher",
            path: "Packages/SyncStorage/Sources/CSyncCipher",
            linkerSettings: [.linkedLibrary("sqlite3"), .linkedLibrary("crypto", .when(platforms: [.linux]))]
        ),
        .target(
            name: "SyncStorage",
            dependencies: [
                "CSyncCipher",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
            ],
            path: "Packages/SyncStorage/Sources/SyncStorage"
        ),

        // Packages/SyncCompression: gzip over the system's zlib.
        .systemLibrary(
            name: "CZlib",
            path: "Packages/SyncCompression/Sources/CZlib",
            providers: [.apt(["zlib1g-dev"]), .brew(["zlib"])]
        ),
        .target(
            name: "SyncCompression", dependencies: ["CZlib"], path: "Packages/SyncCompression/Sources/SyncCompression"),

        // Packages/SyncEventStore: the local event log (also the outbox) and projections.
        .target(
            name: "SyncEventStore",
            dependencies: [
                "SyncModels", "SyncStorage", "SyncCompression",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
            ],
            path: "Packages/SyncEventStore/Sources/SyncEventStore"
        ),
        .target(
            name: "SyncEventStoreTestSupport",
            dependencies: [
                "SyncEventStore", "SyncModels", "SyncStorage", "SyncTestSupport",
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            path: "Packages/SyncEventStore/Sources/SyncEventStoreTestSupport"
        ),

        // Packages/SyncProtocol: protocol v1's wire types, codec and OpenAPI document.
        .target(
            name: "SyncProtocol",
            dependencies: ["SyncModels", "SyncCompression"],
            path: "Packages/SyncProtocol/Sources/SyncProtocol"
        ),

        // Packages/SyncEngine: the sync client, its testing product and its AsyncHTTPClient transport.
        .target(
            name: "SyncEngine",
            dependencies: [
                "SyncModels", "SyncEventStore", "SyncProtocol", "SyncCompression", "SyncStorage",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            path: "Packages/SyncEngine/Sources/SyncEngine"
        ),
        .target(
            name: "SyncEngineTesting",
            dependencies: ["SyncEngine", "SyncModels", "SyncProtocol"],
            path: "Packages/SyncEngine/Sources/SyncEngineTesting"
        ),
        .target(
            name: "SyncEngineHTTPClient",
            dependencies: [
                "SyncEngine", "SyncModels", "SyncProtocol",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "Packages/SyncEngine/Sources/SyncEngineHTTPClient"
        ),

        // Packages/SyncServer: the generic server library and its testing product.
        .target(
            name: "SyncServer",
            dependencies: [
                "SyncModels", "SyncProtocol", "SyncCompression",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            path: "Packages/SyncServer/Sources/SyncServer",
            resources: [
                .embedInCode("Resources/Dashboard/dashboard.html"),
                .embedInCode("Resources/Dashboard/dashboard.js"),
                .embedInCode("Resources/Dashboard/dashboard.css"),
            ]
        ),
        .target(
            name: "SyncServerTesting",
            dependencies: [
                "SyncServer", "SyncModels", "SyncProtocol", "SyncCompression", "SyncTestSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            path: "Packages/SyncServer/Sources/SyncServerTesting"
        ),

        // Packages/SyncTestSupport: temporary folders and event builders shared by tests, with SyncToolSupport
        // re-exported. For tests and benchmarks only: no shipped target depends on it (LayeringTests).
        .target(
            name: "SyncTestSupport",
            dependencies: ["SyncModels", "SyncToolSupport"],
            path: "Packages/SyncTestSupport/Sources/SyncTestSupport"
        ),

        // Packages/SyncToolSupport: the seeded generator and child processes, shared by sync-load,
        // sync-fault-proxy and the tests.
        .target(name: "SyncToolSupport", path: "Packages/SyncToolSupport/Sources/SyncToolSupport"),

        // Packages/NotesDomain: the reference domain (events and state, the client store, the server rules).
        .target(
            name: "NotesDomain",
            dependencies: ["SyncModels", "SyncCRDT"],
            path: "Packages/NotesDomain/Sources/NotesDomain"
        ),
        .target(
            name: "NotesStore",
            dependencies: [
                "NotesDomain", "SyncModels", "SyncCRDT", "SyncStorage", "SyncEventStore",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
            ],
            path: "Packages/NotesDomain/Sources/NotesStore"
        ),
        .target(
            name: "NotesServer",
            dependencies: [
                "NotesDomain", "SyncModels", "SyncProtocol", "SyncServer",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Packages/NotesDomain/Sources/NotesServer"
        ),

        // MARK: Tests, apps and benchmarks.

        .testTarget(
            name: "RepositoryTests",
            dependencies: ["SyncTestSupport"],
            path: "Tests/RepositoryTests"),

        // Package tests, run from here so that one build serves them all.
        .testTarget(
            name: "SyncModelsTests",
            dependencies: [
                "SyncModels",
                "SyncTestSupport",
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            path: "Packages/SyncModels/Tests/SyncModelsTests",
            exclude: ["Fixtures"]
        ),
        .testTarget(
            name: "SyncCRDTTests",
            dependencies: [
                "SyncCRDT",
                "EditingTraces",
                "SyncModels",
                "SyncTestSupport",
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            path: "Packages/SyncCRDT/Tests/SyncCRDTTests"
        ),
        .testTarget(
            name: "SyncStorageTests",
            dependencies: [
                "SyncStorage",
                "SyncTestSupport",
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            path: "Packages/SyncStorage/Tests/SyncStorageTests"
        ),
        .testTarget(
            name: "SyncCompressionTests",
            dependencies: ["SyncCompression", "SyncTestSupport"],
            path: "Packages/SyncCompression/Tests/SyncCompressionTests"
        ),
        .testTarget(
            name: "SyncEventStoreTests",
            dependencies: [
                "SyncEventStore",
                "SyncEventStoreTestSupport",
                "SyncModels",
                "SyncStorage",
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            path: "Packages/SyncEventStore/Tests/SyncEventStoreTests",
            exclude: ["Fixtures"]
        ),
        .testTarget(
            name: "SyncEngineTests",
            dependencies: [
                "SyncEngine",
                "SyncEngineTesting",
                "SyncEventStore",
                "SyncEventStoreTestSupport",
                "SyncModels",
                "SyncProtocol",
                "SyncTestSupport",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PropertyBased", package: "swift-property-based"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            path: "Packages/SyncEngine/Tests/SyncEngineTests"
        ),
        .testTarget(
            name: "NotesDomainTests",
            dependencies: [
                "NotesDomain",
                "NotesStore",
                "SyncCRDT",
                "SyncEventStore",
                "SyncEventStoreTestSupport",
                "SyncModels",
                "SyncTestSupport",
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            path: "Packages/NotesDomain/Tests/NotesDomainTests"
        ),

        // sync-agent: a headless replica of the Notes app with a CLI.
        .executableTarget(
            name: "sync-agent",
            dependencies: [
                "NotesDomain",
                "NotesStore",
                "SyncEngine",
                "SyncEngineHTTPClient",
                "SyncEventStore",
                "SyncModels",
                "SyncStorage",
                "SyncToolSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Apps/SyncAgent/Sources/sync-agent"
        ),
        // sync-load: the load generator, many real devices in one process, with a verdict.
        .executableTarget(
            name: "sync-load",
            dependencies: [
                "NotesDomain",
                "NotesStore",
                "SyncEngine",
                "SyncEngineHTTPClient",
                "SyncEventStore",
                "SyncModels",
                "SyncProtocol",
                "SyncStorage",
                "SyncToolSupport",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
            ],
            path: "Apps/SyncLoad/Sources/sync-load"
        ),
        // sync-fault-proxy: a TCP proxy that injects network faults (latency, bandwidth caps, resets, black
        // holes) between sync-load's devices and nginx in `make chaos`.
        .target(
            name: "FaultProxy",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                // SplitMix64: the seeded draws.
                "SyncToolSupport",
            ],
            path: "Apps/SyncFaultProxy/Sources/FaultProxy"
        ),
        .executableTarget(
            name: "sync-fault-proxy",
            dependencies: [
                "FaultProxy",
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Apps/SyncFaultProxy/Sources/sync-fault-proxy"
        ),
        .testTarget(
            name: "FaultProxyTests",
            dependencies: [
                "FaultProxy",
                "SyncTestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ],
            path: "Apps/SyncFaultProxy/Tests/FaultProxyTests"
        ),
        // End-to-end: PostgreSQL, sync-server and sync-agent as real processes on loopback; sync-bench run as
        // its users run it.
        .testTarget(
            name: "EndToEndTests",
            dependencies: [
                "sync-server", "sync-agent", "SyncBench", "sync-load", "sync-fault-proxy",
                "NotesDomain",
                "NotesStore",
                "SyncEngine",
                "SyncEngineHTTPClient",
                "SyncEventStore",
                "SyncModels",
                "SyncProtocol",
                "SyncTestSupport",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ],
            path: "Tests/EndToEndTests"
        ),

        // sync-server: the generic SyncServer library with the Notes domain plugged in.
        .executableTarget(
            name: "sync-server",
            dependencies: [
                "SyncServer",
                "NotesServer",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Apps/SyncServer/Sources/sync-server"
        ),
        .testTarget(
            name: "SyncServerExecutableTests",
            dependencies: [
                "sync-server",
                "SyncServer",
                "SyncServerTesting",
                "SyncTestSupport",
                "SyncModels",
                "SyncProtocol",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            path: "Apps/SyncServer/Tests/SyncServerExecutableTests"
        ),
        .testTarget(
            name: "SyncProtocolTests",
            dependencies: [
                "SyncProtocol",
                "SyncModels",
                "SyncCompression",
                "SyncTestSupport",
                .product(name: "OpenAPIKit", package: "OpenAPIKit"),
            ],
            path: "Packages/SyncProtocol/Tests/SyncProtocolTests"
        ),
        .testTarget(
            name: "SyncServerTests",
            dependencies: [
                "SyncServer",
                "SyncServerTesting",
                "SyncTestSupport",
                "SyncModels",
                "SyncCompression",
                // The client's store, for the canonical-bytes test across client, database and wire.
                "SyncEventStore",
                "SyncStorage",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                "SyncProtocol",
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "OpenAPIKit", package: "OpenAPIKit"),
                // ReadAheadTests: the request's header fields (HTTPField.Name).
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            path: "Packages/SyncServer/Tests/SyncServerTests"
        ),
        .testTarget(
            name: "NotesServerTests",
            dependencies: [
                "NotesServer",
                "NotesDomain",
                "SyncServer",
                "SyncServerTesting",
                "SyncTestSupport",
                "SyncModels",
                "SyncProtocol",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Packages/NotesDomain/Tests/NotesServerTests"
        ),
        .testTarget(
            name: "SyncTestSupportTests",
            dependencies: [
                "SyncTestSupport",
                "SyncModels",
            ],
            path: "Packages/SyncTestSupport/Tests/SyncTestSupportTests"
        ),
        .testTarget(
            name: "SyncToolSupportTests",
            dependencies: ["SyncToolSupport", "SyncTestSupport"],
            path: "Packages/SyncToolSupport/Tests/SyncToolSupportTests"
        ),

        // sync-bench (Benchmarks/SyncBench): the performance suite's command line.
        .executableTarget(
            name: "SyncBench",
            dependencies: [
                "SyncCRDT",
                "EditingTraces",
                "SyncModels",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                "SyncTestSupport",
                // rebuild
                "NotesDomain",
                "NotesStore",
                "SyncEventStore",
                .product(name: "GRDB", package: "GRDB.swift"),
                // push, pg-baseline, bootstrap
                "SyncProtocol",
                "SyncEngine",
                "SyncEngineHTTPClient",
                "SyncCompression",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                // churn: the server's compaction, run in process; bare-server: its loops
                "SyncServer",
                "NotesServer",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            path: "Benchmarks/SyncBench"
        ),
    ],
    swiftLanguageModes: [.v6]
)
