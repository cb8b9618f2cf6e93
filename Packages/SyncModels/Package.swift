// swift-tools-version: 6.2
import PackageDescription

let package = Package(
    name: "SyncModels",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .library(name: "SyncModels", targets: ["SyncModels"])
    ],
    targets: [
        .target(name: "SyncModels")
        // The tests (Tests/SyncModelsTests) are declared once, in the repository's root Package.swift, which
        // runs every package's tests with one build.
    ],
    swiftLanguageModes: [.v6]
)
