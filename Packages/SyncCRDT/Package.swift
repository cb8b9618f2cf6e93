// swift-tools-version: 6.2
import PackageDescription

let package = Package(
    name: "SyncCRDT",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .library(name: "SyncCRDT", targets: ["SyncCRDT"]),
        // Loads the real editing traces (gzip through SyncCompression) and replays them into SyncCRDT types.
        // Used by the tests and by sync-bench only; the SyncCRDT library itself never links zlib.
        .library(name: "EditingTraces", targets: ["EditingTraces"]),
    ],
    dependencies: [
        .package(path: "../SyncModels"),
        .package(path: "../SyncCompression"),
    ],
    targets: [
        .target(name: "SyncCRDT", dependencies: [.product(name: "SyncModels", package: "SyncModels")]),
        .target(
            name: "EditingTraces",
            dependencies: [
                "SyncCRDT", .product(name: "SyncModels", package: "SyncModels"),
                .product(name: "SyncCompression", package: "SyncCompression"),
            ]
        ),
        // The tests (Tests/SyncCRDTTests) are declared once, in the repository's root Package.swift, which
        // runs every package's tests with one build.
    ],
    swiftLanguageModes: [.v6]
)
