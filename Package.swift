// swift-tools-version: 6.1
// The root package: one build for the apps, the benchmarks and the end-to-end tests, over the local packages
// in Packages/ by path. Every test target of the repository is declared here, once: a package's tests live
// in its own Tests/ folder but run from here, so `swift test` runs every test with one build of the
// dependencies (SwiftPM never runs the tests of a dependency package).
import PackageDescription

let package = Package(
    name: "offline-sync",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .executable(name: "sync-server", targets: ["sync-server"]),
        .executable(name: "sync-agent", targets: ["sync-agent"]),
        .executable(name: "sync-bench", targets: ["SyncBench"]),
        .executable(name: "sync-load", targets: ["sync-load"]),
        .executable(name: "sync-fault-proxy", targets: ["sync-fault-proxy"]),
    ],
    dependencies: [
        .package(path: "Packages/SyncModels"),
        .package(path: "Packages/SyncStorage"),
        .package(path: "Packages/SyncCompression"),
        .package(path: "Packages/SyncEventStore"),
        .package(path: "Packages/SyncEngine"),
        .package(path: "Packages/NotesDomain"),
        .package(path: "Packages/SyncCRDT"),
        .package(path: "Packages/SyncServer"),
        .package(path: "Packages/SyncTestSupport"),
        .package(url: "https://github.com/groue/GRDB.swift.git", exact: "7.10.0"),
        .package(url: "https://github.com/x-sheep/swift-property-based.git", exact: "2.0.1"),
        .package(path: "Packages/SyncProtocol"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", exact: "2.28.1"),
        .package(url: "https://github.com/vapor/postgres-nio.git", exact: "1.33.2"),
        .package(url: "https://github.com/vapor/jwt-kit.git", exact: "5.8.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", exact: "2.4.1"),
        .package(url: "https://github.com/apple/swift-metrics.git", exact: "2.13.0"),
        .package(url: "https://github.com/apple/swift-log.git", exact: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", exact: "2.13.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", exact: "1.8.2"),
        .package(url: "https://github.com/swift-server/async-http-client.git", exact: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio.git", exact: "2.101.3"),
        .package(url: "https://github.com/mattpolzin/OpenAPIKit.git", exact: "6.4.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift.git", exact: "0.2.0"),
    ],
    targets: [
        .testTarget(
            name: "RepositoryTests",
            dependencies: [.product(name: "SyncTestSupport", package: "SyncTestSupport")],
            path: "Tests/RepositoryTests"),

        // Package tests, run from here so that one build serves them all.
        .testTarget(
            name: "SyncModelsTests",
            dependencies: [
                .product(name: "SyncModels", package: "SyncModels"),
                .product(name: "SyncTestSupport", package: "SyncTestSupport"),
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            path: "Packages/SyncModels/Tests/SyncModelsTests",
            exclude: ["Fixtures"]
        ),
        .testTarget(
            name: "SyncCRDTTests",
            dependencies: [
                .product(name: "SyncCRDT", package: "SyncCRDT"),
                .product(name: "EditingTraces", package: "SyncCRDT"),
                .product(name: "SyncModels", package: "SyncModels"),
                .product(name: "SyncTestSupport", package: "SyncTestSupport"),
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            path: "Packages/SyncCRDT/Tests/SyncCRDTTests"
        ),
        .testTarget(
            name: "SyncStorageTests",
            dependencies: [
                .product(name: "SyncStorage", package: "SyncStorage"),
                .product(name: "SyncTestSupport", package: "SyncTestSupport"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            path: "Packages/SyncStorage/Tests/SyncStorageTests"
        ),
        .testTarget(
            name: "SyncCompressionTests",
            dependencies: [.product(name: "SyncCompression", package: "SyncCompression")],
            path: "Packages/SyncCompression/Tests/SyncCompressionTests"
        ),
        .testTarget(
            name: "SyncEventStoreTests",
            dependencies: [
                .product(name: "SyncEventStore", package: "SyncEventStore"),
                .product(name: "SyncEventStoreTestSupport", package: "SyncEventStore"),
                .product(name: "SyncModels", package: "SyncModels"),
                .product(name: "SyncStorage", package: "SyncStorage"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            path: "Packages/SyncEventStore/Tests/SyncEventStoreTests",
            exclude: ["Fixtures"]
        ),
        .testTarget(
            name: "SyncEngineTests",
            dependencies: [
                .product(name: "SyncEngine", package: "SyncEngine"),
                .product(name: "SyncEngineTesting", package: "SyncEngine"),
                .product(name: "SyncEventStore", package: "SyncEventStore"),
                .product(name: "SyncEventStoreTestSupport", package: "SyncEventStore"),
                .product(name: "SyncModels", package: "SyncModels"),
                .product(name: "SyncProtocol", package: "SyncProtocol"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            path: "Packages/SyncEngine/Tests/SyncEngineTests"
        ),
        .testTarget(
            name: "NotesDomainTests",
            dependencies: [
                .product(name: "NotesDomain", package: "NotesDomain"),
                .product(name: "NotesStore", package: "NotesDomain"),
                .product(name: "SyncEventStore", package: "SyncEventStore"),
                .product(name: "SyncEventStoreTestSupport", package: "SyncEventStore"),
                .product(name: "SyncModels", package: "SyncModels"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            path: "Packages/NotesDomain/Tests/NotesDomainTests"
        ),

        // sync-agent: a headless replica of the Notes app with a CLI.
        .executableTarget(
            name: "sync-agent",
            dependencies: [
                .product(name: "NotesDomain", package: "NotesDomain"),
                .product(name: "NotesStore", package: "NotesDomain"),
                .product(name: "SyncEngine", package: "SyncEngine"),
                .product(name: "SyncEngineHTTPClient", package: "SyncEngine"),
                .product(name: "SyncEventStore", package: "SyncEventStore"),
                .product(name: "SyncModels", package: "SyncModels"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Apps/SyncAgent/Sources/sync-agent"
        ),
        // sync-load: the load generator, many real devices in one process, with a verdict.
        .executableTarget(
            name: "sync-load",
            dependencies: [
                .product(name: "NotesDomain", package: "NotesDomain"),
                .product(name: "NotesStore", package: "NotesDomain"),
                .product(name: "SyncEngine", package: "SyncEngine"),
                .product(name: "SyncEngineHTTPClient", package: "SyncEngine"),
                .product(name: "SyncEventStore", package: "SyncEventStore"),
                .product(name: "SyncModels", package: "SyncModels"),
                .product(name: "SyncProtocol", package: "SyncProtocol"),
                .product(name: "SyncStorage", package: "SyncStorage"),
                .product(name: "SyncTestSupport", package: "SyncTestSupport"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
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
                .product(name: "SyncTestSupport", package: "SyncTestSupport"),
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
                .product(name: "SyncTestSupport", package: "SyncTestSupport"),
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
                .product(name: "NotesStore", package: "NotesDomain"),
                .product(name: "SyncEngine", package: "SyncEngine"),
                .product(name: "SyncEngineHTTPClient", package: "SyncEngine"),
                .product(name: "SyncModels", package: "SyncModels"),
                .product(name: "SyncTestSupport", package: "SyncTestSupport"),
            ],
            path: "Tests/EndToEndTests"
        ),

        // sync-server: the generic SyncServer library with the Notes domain plugged in.
        .executableTarget(
            name: "sync-server",
            dependencies: [
                .product(name: "SyncServer", package: "SyncServer"),
                .product(name: "NotesServer", package: "NotesDomain"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Apps/SyncServer/Sources/sync-server"
        ),
        .testTarget(
            name: "SyncServerExecutableTests",
            dependencies: [
                "sync-server",
                .product(name: "SyncServer", package: "SyncServer"),
                .product(name: "SyncServerTesting", package: "SyncServer"),
                .product(name: "SyncTestSupport", package: "SyncTestSupport"),
                .product(name: "SyncProtocol", package: "SyncProtocol"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ],
            path: "Apps/SyncServer/Tests/SyncServerExecutableTests"
        ),
        .testTarget(
            name: "SyncProtocolTests",
            dependencies: [
                .product(name: "SyncProtocol", package: "SyncProtocol"),
                .product(name: "SyncModels", package: "SyncModels"),
                .product(name: "SyncTestSupport", package: "SyncTestSupport"),
                .product(name: "OpenAPIKit", package: "OpenAPIKit"),
            ],
            path: "Packages/SyncProtocol/Tests/SyncProtocolTests"
        ),
        .testTarget(
            name: "SyncServerTests",
            dependencies: [
                .product(name: "SyncServer", package: "SyncServer"),
                .product(name: "SyncServerTesting", package: "SyncServer"),
                .product(name: "SyncTestSupport", package: "SyncTestSupport"),
                .product(name: "SyncModels", package: "SyncModels"),
                .product(name: "SyncCompression", package: "SyncCompression"),
                // The client's store, for the canonical-bytes test across client, database and wire.
                .product(name: "SyncEventStore", package: "SyncEventStore"),
                .product(name: "SyncStorage", package: "SyncStorage"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "SyncProtocol", package: "SyncProtocol"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "OpenAPIKit", package: "OpenAPIKit"),
            ],
            path: "Packages/SyncServer/Tests/SyncServerTests"
        ),
        .testTarget(
            name: "NotesServerTests",
            dependencies: [
                .product(name: "NotesServer", package: "NotesDomain"),
                .product(name: "NotesDomain", package: "NotesDomain"),
                .product(name: "SyncServer", package: "SyncServer"),
                .product(name: "SyncServerTesting", package: "SyncServer"),
                .product(name: "SyncTestSupport", package: "SyncTestSupport"),
                .product(name: "SyncModels", package: "SyncModels"),
                .product(name: "SyncProtocol", package: "SyncProtocol"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Packages/NotesDomain/Tests/NotesServerTests"
        ),
        .testTarget(
            name: "SyncTestSupportTests",
            dependencies: [
                .product(name: "SyncTestSupport", package: "SyncTestSupport"),
                .product(name: "SyncModels", package: "SyncModels"),
            ],
            path: "Packages/SyncTestSupport/Tests/SyncTestSupportTests"
        ),

        // sync-bench (Benchmarks/SyncBench): the performance suite's command line.
        .executableTarget(
            name: "SyncBench",
            dependencies: [
                .product(name: "SyncCRDT", package: "SyncCRDT"),
                .product(name: "EditingTraces", package: "SyncCRDT"),
                .product(name: "SyncModels", package: "SyncModels"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "SyncTestSupport", package: "SyncTestSupport"),
                // rebuild
                .product(name: "NotesDomain", package: "NotesDomain"),
                .product(name: "NotesStore", package: "NotesDomain"),
                .product(name: "SyncEventStore", package: "SyncEventStore"),
                .product(name: "GRDB", package: "GRDB.swift"),
                // push, pg-baseline, bootstrap
                .product(name: "SyncProtocol", package: "SyncProtocol"),
                .product(name: "SyncEngine", package: "SyncEngine"),
                .product(name: "SyncEngineHTTPClient", package: "SyncEngine"),
                .product(name: "SyncCompression", package: "SyncCompression"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                // churn: the server's compaction, run in process
                .product(name: "SyncServer", package: "SyncServer"),
                .product(name: "NotesServer", package: "NotesDomain"),
            ],
            path: "Benchmarks/SyncBench"
        ),
    ],
    swiftLanguageModes: [.v6]
)
