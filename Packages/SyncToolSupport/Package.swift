// swift-tools-version: 6.2
import PackageDescription

let package = Package(
    name: "SyncToolSupport",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        // What the repository's programs (sync-load, sync-fault-proxy) share with its tests: a seeded generator
        // and a way to start a program. Shipped in those programs; the tests reach it through SyncTestSupport.
        .library(name: "SyncToolSupport", targets: ["SyncToolSupport"])
    ],
    targets: [
        .target(name: "SyncToolSupport")
        // The tests (Tests/SyncToolSupportTests) are declared once, in the repository's root Package.swift, which
        // runs every package's tests with one build.
    ],
    swiftLanguageModes: [.v6]
)
