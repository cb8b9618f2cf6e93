// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "SyncStorage",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .library(name: "SyncStorage", targets: ["SyncStorage"])
    ],
    dependencies: [
        .package(url: "https://github.com/groue/GRDB.swift.git", exact: "7.10.0")
    ],
    targets: [
        .target(name: "SyncStorage", dependencies: [.product(name: "GRDB", package: "GRDB.swift")]),
        .testTarget(name: "SyncStorageTests", dependencies: ["SyncStorage"]),
    ],
    swiftLanguageModes: [.v6]
)
