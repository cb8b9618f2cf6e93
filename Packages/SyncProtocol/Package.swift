// swift-tools-version: 6.1
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
        .package(url: "https://github.com/mattpolzin/OpenAPIKit.git", exact: "6.4.0"),
    ],
    targets: [
        .target(
            name: "SyncProtocol",
            dependencies: [
                .product(name: "SyncModels", package: "SyncModels"),
                .product(name: "SyncCompression", package: "SyncCompression"),
            ]
        ),
        .testTarget(
            name: "SyncProtocolTests",
            dependencies: [
                "SyncProtocol",
                .product(name: "OpenAPIKit", package: "OpenAPIKit"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
