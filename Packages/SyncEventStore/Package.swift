// swift-tools-version: 6.2
import PackageDescription

let package = Package(
    name: "SyncEventStore",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .library(name: "SyncEventStore", targets: ["SyncEventStore"]),
        // Fixtures shared by the tests of this and other packages (a small CRDT-style projection, draft
        // builders), with SyncTestSupport re-exported. Not for production use.
        .library(name: "SyncEventStoreTestSupport", targets: ["SyncEventStoreTestSupport"]),
    ],
    dependencies: [
        .package(path: "../SyncModels"),
        .package(path: "../SyncStorage"),
        .package(path: "../SyncCompression"),
        .package(path: "../SyncTestSupport"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
    ],
    targets: [
        .target(
            name: "SyncEventStore",
            dependencies: [
                "SyncModels", "SyncStorage", "SyncCompression", .product(name: "GRDB", package: "GRDB.swift"),
                // SQLite's C API, for reading log rows in place during replays.
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
            ]
        ),
        .target(
            name: "SyncEventStoreTestSupport",
            dependencies: [
                "SyncEventStore", "SyncModels", "SyncStorage", .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "SyncTestSupport", package: "SyncTestSupport"),
            ]
        ),
        // The tests (Tests/SyncEventStoreTests) are declared once, in the repository's root Package.swift, which
        // runs every package's tests with one build.
    ],
    swiftLanguageModes: [.v6]
)
