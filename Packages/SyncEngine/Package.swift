// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "SyncEngine",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .library(name: "SyncEngine", targets: ["SyncEngine"])
    ],
    dependencies: [
        .package(url: "https://github.com/x-sheep/swift-property-based.git", exact: "2.0.1")
    ],
    targets: [
        .target(name: "SyncEngine"),
        .testTarget(
            name: "SyncEngineTests",
            dependencies: ["SyncEngine", .product(name: "PropertyBased", package: "swift-property-based")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
