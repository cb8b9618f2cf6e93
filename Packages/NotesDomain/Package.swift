// swift-tools-version: 6.2
import PackageDescription

let package = Package(
    name: "NotesDomain",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        // The vocabulary, the CRDT of a note and the rules: what the agent, the load generator and the
        // server's validation share.
        .library(name: "NotesDomain", targets: ["NotesDomain"]),
        // The notes projection and commands over SyncEventStore: what a client app uses.
        .library(name: "NotesStore", targets: ["NotesStore"]),
        // The Notes domain plugged into the generic SyncServer: its push rules (payloads, the per-scope
        // quota of live notes) and its commutative types. What `sync-server` serves.
        .library(name: "NotesServer", targets: ["NotesServer"]),
    ],
    dependencies: [
        .package(path: "../SyncModels"),
        .package(path: "../SyncCRDT"),
        .package(path: "../SyncStorage"),
        .package(path: "../SyncEventStore"),
        .package(path: "../SyncProtocol"),
        .package(path: "../SyncServer"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
    ],
    targets: [
        .target(name: "NotesDomain", dependencies: ["SyncModels", "SyncCRDT"]),
        .target(
            name: "NotesStore",
            dependencies: [
                "NotesDomain", "SyncModels", "SyncCRDT", "SyncStorage", "SyncEventStore",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
            ]
        ),
        .target(
            name: "NotesServer",
            dependencies: [
                "NotesDomain", "SyncModels", "SyncProtocol", "SyncServer",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // The tests (Tests/NotesDomainTests, Tests/NotesServerTests) are declared once, in the repository's
        // root Package.swift, which runs every package's tests with one build.
    ],
    swiftLanguageModes: [.v6]
)
