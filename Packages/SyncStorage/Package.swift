// swift-tools-version: 6.2
import PackageDescription

let package = Package(
    name: "SyncStorage",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .library(name: "SyncStorage", targets: ["SyncStorage"])
    ],
    dependencies: [
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0")
    ],
    targets: [
        .target(
            name: "SyncStorage",
            dependencies: [
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
            ]
        )
        // The tests (Tests/SyncStorageTests) are declared once, in the repository's root Package.swift, which
        // runs every package's tests with one build.
    ],
    swiftLanguageModes: [.v6]
)
