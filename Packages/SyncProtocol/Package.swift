// swift-tools-version: 6.2
import PackageDescription

let package = Package(
    name: "SyncProtocol",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .library(name: "SyncProtocol", targets: ["SyncProtocol"])
    ],
    dependencies: [
        .package(path: "../SyncModels"),
        .package(path: "../SyncCompression"),
    ],
    targets: [
        .target(
            name: "SyncProtocol",
            dependencies: [
                .product(name: "SyncModels", package: "SyncModels"),
                .product(name: "SyncCompression", package: "SyncCompression"),
            ]
        )
        // The tests (Tests/SyncProtocolTests) are declared once, in the repository's root Package.swift, which
        // runs every package's tests with one build.
    ],
    swiftLanguageModes: [.v6]
)
