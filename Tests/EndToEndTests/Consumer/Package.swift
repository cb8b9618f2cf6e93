// swift-tools-version: 6.2
// An app outside the repository, as a user writes it: it adds offline-sync by its git URL and a version
// range, and picks library products. `ConsumerPackageTests` copies this folder to a temporary directory,
// puts the repository's URL in place of OFFLINE_SYNC_URL, builds it and runs it.
import PackageDescription

let package = Package(
    name: "consumer",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(url: "OFFLINE_SYNC_URL", from: "0.4.0"),
        // The app's own dependencies resolve together with the stack's version ranges.
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.0.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.0.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.5.0"),
    ],
    targets: [
        .executableTarget(
            name: "TwoReplicas",
            dependencies: [
                .product(name: "SyncEngine", package: "offline-sync"),
                .product(name: "SyncEngineHTTPClient", package: "offline-sync"),
                .product(name: "SyncEventStore", package: "offline-sync"),
                .product(name: "SyncModels", package: "offline-sync"),
                .product(name: "SyncServer", package: "offline-sync"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Logging", package: "swift-log"),
            ]
        )
    ],
    swiftLanguageModes: [.v6]
)
