// swift-tools-version: 6.1
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
    ],
    dependencies: [
        .package(path: "../SyncModels"),
        .package(path: "../SyncCRDT"),
        .package(path: "../SyncStorage"),
        .package(path: "../SyncEventStore"),
        .package(url: "https://github.com/groue/GRDB.swift.git", exact: "7.10.0"),
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
        .testTarget(
            name: "NotesDomainTests",
            dependencies: [
                "NotesDomain", "NotesStore",
                .product(name: "SyncEventStoreTestSupport", package: "SyncEventStore"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
