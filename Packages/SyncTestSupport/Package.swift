// swift-tools-version: 6.2
import PackageDescription

let package = Package(
    name: "SyncTestSupport",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        // What the tests of every package share: a seeded generator, temporary directories, event builders.
        // For tests and benchmarks only.
        .library(name: "SyncTestSupport", targets: ["SyncTestSupport"])
    ],
    dependencies: [
        .package(path: "../SyncModels")
    ],
    targets: [
        .target(name: "SyncTestSupport", dependencies: [.product(name: "SyncModels", package: "SyncModels")])
        // The tests (Tests/SyncTestSupportTests) are declared once, in the repository's root Package.swift.
    ],
    swiftLanguageModes: [.v6]
)
