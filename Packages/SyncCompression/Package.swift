// swift-tools-version: 6.2
import PackageDescription

let package = Package(
    name: "SyncCompression",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .library(name: "SyncCompression", targets: ["SyncCompression"])
    ],
    targets: [
        .systemLibrary(name: "CZlib", providers: [.apt(["zlib1g-dev"]), .brew(["zlib"])]),
        .target(name: "SyncCompression", dependencies: ["CZlib"]),
        // The tests (Tests/SyncCompressionTests) are declared once, in the repository's root Package.swift, which
        // runs every package's tests with one build.
    ],
    swiftLanguageModes: [.v6]
)
