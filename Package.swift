// swift-tools-version: 6.1
// The root package: one build for the apps, the benchmarks and the end-to-end tests, over the local packages
// in Packages/ by path. It also runs every package's own test target (by path), so `swift test` here runs
// every test in the repository with one build of the dependencies.
import PackageDescription

let package = Package(
    name: "offline-sync",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [],
    dependencies: [
        .package(path: "Packages/SyncModels"),
        .package(path: "Packages/SyncStorage"),
        .package(path: "Packages/SyncCompression"),
        .package(path: "Packages/SyncEventStore"),
        .package(url: "https://github.com/groue/GRDB.swift.git", exact: "7.10.0"),
        .package(url: "https://github.com/x-sheep/swift-property-based.git", exact: "2.0.1"),
    ],
    targets: [
        .testTarget(name: "RepositoryTests", path: "Tests/RepositoryTests"),

        // Package tests, run from here so that one build serves them all.
        .testTarget(
            name: "SyncModelsTests",
            dependencies: [
                .product(name: "SyncModels", package: "SyncModels"),
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            path: "Packages/SyncModels/Tests/SyncModelsTests",
            exclude: ["Fixtures"]
        ),
        .testTarget(
            name: "SyncStorageTests",
            dependencies: [
                .product(name: "SyncStorage", package: "SyncStorage"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            path: "Packages/SyncStorage/Tests/SyncStorageTests"
        ),
        .testTarget(
            name: "SyncCompressionTests",
            dependencies: [.product(name: "SyncCompression", package: "SyncCompression")],
            path: "Packages/SyncCompression/Tests/SyncCompressionTests"
        ),
        .testTarget(
            name: "SyncEventStoreTests",
            dependencies: [
                .product(name: "SyncEventStore", package: "SyncEventStore"),
                .product(name: "SyncEventStoreTestSupport", package: "SyncEventStore"),
                .product(name: "SyncModels", package: "SyncModels"),
                .product(name: "SyncStorage", package: "SyncStorage"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            path: "Packages/SyncEventStore/Tests/SyncEventStoreTests",
            exclude: ["Fixtures"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
