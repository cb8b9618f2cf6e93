// swift-tools-version: 6.2
import PackageDescription

let package = Package(
    name: "SyncServer",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        // The generic sync server: protocol v1 over Hummingbird 2 and PostgreSQL. A domain plugs in through
        // `SyncDomain`; the library itself knows none.
        .library(name: "SyncServer", targets: ["SyncServer"]),
        // For tests of servers built on the library: a fresh PostgreSQL database per test and a running
        // server to talk protocol v1 to (the way Hummingbird ships HummingbirdTesting).
        .library(name: "SyncServerTesting", targets: ["SyncServerTesting"]),
    ],
    dependencies: [
        .package(path: "../SyncModels"),
        .package(path: "../SyncProtocol"),
        .package(path: "../SyncCompression"),
        .package(path: "../SyncTestSupport"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.8.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
    ],
    targets: [
        .target(
            name: "SyncServer",
            dependencies: [
                .product(name: "SyncModels", package: "SyncModels"),
                .product(name: "SyncProtocol", package: "SyncProtocol"),
                .product(name: "SyncCompression", package: "SyncCompression"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            // The dashboard (`/dashboard`), built into the binary: nothing to ship beside it.
            resources: [
                .embedInCode("Resources/Dashboard/dashboard.html"),
                .embedInCode("Resources/Dashboard/dashboard.js"),
                .embedInCode("Resources/Dashboard/dashboard.css"),
            ]
        ),
        .target(
            name: "SyncServerTesting",
            dependencies: [
                "SyncServer",
                .product(name: "SyncModels", package: "SyncModels"),
                .product(name: "SyncProtocol", package: "SyncProtocol"),
                .product(name: "SyncCompression", package: "SyncCompression"),
                .product(name: "SyncTestSupport", package: "SyncTestSupport"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        // The tests (Tests/SyncServerTests) are declared once, in the repository's root Package.swift, which
        // runs every package's tests with one build.
    ],
    swiftLanguageModes: [.v6]
)
