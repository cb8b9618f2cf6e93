// swift-tools-version: 6.2
// Tasks: a second app on the offline-sync stack, built from outside the stack's own manifest, the way an app
// of yours would be. It depends on the repository's packages by path here; an app in its own repository adds
// them by URL and a version range instead, and picks the same products:
//
//     .package(url: "https://github.com/OWNER/offline-sync.git", from: "0.4.0"),
//
// The other dependencies are the ones these targets import themselves (GRDB for the projection's tables,
// PostgresNIO and swift-log for the server rule, swift-argument-parser for the command lines); they take the
// same version ranges as the stack, so both resolve together.
import PackageDescription

let package = Package(
    name: "Tasks",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .library(name: "TasksModel", targets: ["TasksModel"]),
        .library(name: "TasksDomain", targets: ["TasksDomain"]),
        .library(name: "TasksServer", targets: ["TasksServer"]),
        .executable(name: "tasks-server", targets: ["tasks-server"]),
        .executable(name: "tasks", targets: ["tasks"]),
    ],
    dependencies: [
        .package(name: "offline-sync", path: "../.."),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        // Only the tests: the server on a loopback port.
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
    ],
    targets: [
        // What the client and the server share: the event vocabulary, the payloads, the task's CRDT state and
        // the rules any replica can check alone. Only SyncModels and SyncCRDT, so the server links no SQLite.
        .target(
            name: "TasksModel",
            dependencies: [
                .product(name: "SyncModels", package: "offline-sync"),
                .product(name: "SyncCRDT", package: "offline-sync"),
            ]
        ),
        // The client: the projection, the commands and the engine over the local event store.
        .target(
            name: "TasksDomain",
            dependencies: [
                "TasksModel",
                .product(name: "SyncModels", package: "offline-sync"),
                .product(name: "SyncCRDT", package: "offline-sync"),
                .product(name: "SyncStorage", package: "offline-sync"),
                .product(name: "SyncEventStore", package: "offline-sync"),
                .product(name: "SyncEngine", package: "offline-sync"),
                .product(name: "SyncEngineHTTPClient", package: "offline-sync"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        // The domain plugged into the generic server, with its one rule.
        .target(
            name: "TasksServer",
            dependencies: [
                "TasksModel",
                .product(name: "SyncModels", package: "offline-sync"),
                .product(name: "SyncProtocol", package: "offline-sync"),
                .product(name: "SyncServer", package: "offline-sync"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "tasks-server",
            dependencies: [
                "TasksServer",
                .product(name: "SyncServer", package: "offline-sync"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "tasks",
            dependencies: [
                "TasksDomain",
                .product(name: "SyncEngine", package: "offline-sync"),
                .product(name: "SyncModels", package: "offline-sync"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .testTarget(
            name: "TasksTests",
            dependencies: [
                "TasksModel",
                "TasksDomain",
                "TasksServer",
                .product(name: "SyncModels", package: "offline-sync"),
                .product(name: "SyncCRDT", package: "offline-sync"),
                .product(name: "SyncEventStore", package: "offline-sync"),
                .product(name: "SyncEventStoreTestSupport", package: "offline-sync"),
                .product(name: "SyncEngine", package: "offline-sync"),
                .product(name: "SyncServer", package: "offline-sync"),
                .product(name: "SyncServerTesting", package: "offline-sync"),
                .product(name: "SyncStorage", package: "offline-sync"),
                .product(name: "SyncTestSupport", package: "offline-sync"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
