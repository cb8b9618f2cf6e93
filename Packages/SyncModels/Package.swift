// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "SyncModels",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .library(name: "SyncModels", targets: ["SyncModels"])
    ],
    dependencies: [
        .package(url: "https://github.com/x-sheep/swift-property-based.git", exact: "2.0.1")
    ],
    targets: [
        .target(name: "SyncModels"),
        .testTarget(
            name: "SyncModelsTests",
            dependencies: [
                "SyncModels",
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            exclude: ["Fixtures"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
