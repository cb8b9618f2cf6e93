// swift-tools-version: 6.2
import PackageDescription

let package = Package(
    name: "SyncTestSupport",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        // What the tests of every package share: temporary directories, event builders, and SyncToolSupport's
        // seeded generator and child processes (re-exported). For tests and benchmarks only.
        .library(name: "SyncTestSupport", targets: ["SyncTestSupport"])
    ],
    dependencies: [
        .package(path: "../SyncModels"),
        .package(path: "../SyncToolSupport"),
    ],
    targets: [
        .target(
            name: "SyncTestSupport",
            dependencies: [
                .product(name: "SyncModels", package: "SyncModels"),
                .product(name: "SyncToolSupport", package: "SyncToolSupport"),
            ]
        )
        // The tests (Tests/SyncTestSupportTests) are declared once, in the repository's root Package.swift.
    ],
    swiftLanguageModes: [.v6]
)
