// swift-tools-version: 6.0
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
        .package(url: "https://github.com/x-sheep/swift-property-based.git", exact: "2.0.1"),
    ],
    targets: [
        // Package tests, run from here so that one build serves them all.
        .testTarget(
            name: "SyncModelsTests",
            dependencies: [
                .product(name: "SyncModels", package: "SyncModels"),
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            path: "Packages/SyncModels/Tests/SyncModelsTests",
            exclude: ["Fixtures"]
        )
    ],
    swiftLanguageModes: [.v6]
)
