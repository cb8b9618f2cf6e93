// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "SyncEventStore",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .library(name: "SyncEventStore", targets: ["SyncEventStore"])
    ],
    dependencies: [
        .package(path: "../SyncModels"),
        .package(path: "../SyncStorage"),
        .package(path: "../SyncCompression"),
        .package(url: "https://github.com/groue/GRDB.swift.git", exact: "7.10.0"),
    ],
    targets: [
        .target(
            name: "SyncEventStore",
            dependencies: [
                "SyncModels", "SyncStorage", "SyncCompression", .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        .testTarget(name: "SyncEventStoreTests", dependencies: ["SyncEventStore"], exclude: ["Fixtures"]),
    ],
    swiftLanguageModes: [.v6]
)
