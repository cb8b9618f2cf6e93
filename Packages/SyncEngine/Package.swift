// swift-tools-version: 6.2
import PackageDescription

let package = Package(
    name: "SyncEngine",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .library(name: "SyncEngine", targets: ["SyncEngine"]),
        // For tests of clients: an in-memory server deciding pushes with the real server's `PushPlan`, and a
        // transport to it with injected faults (the way Hummingbird ships HummingbirdTesting).
        .library(name: "SyncEngineTesting", targets: ["SyncEngineTesting"]),
        // `HTTPClientTransport` over AsyncHTTPClient, for headless clients on Linux and servers; apps on Apple
        // platforms use `HTTPTransport` (URLSession) and need not build SwiftNIO.
        .library(name: "SyncEngineHTTPClient", targets: ["SyncEngineHTTPClient"]),
    ],
    dependencies: [
        .package(path: "../SyncModels"),
        .package(path: "../SyncEventStore"),
        .package(path: "../SyncProtocol"),
        .package(path: "../SyncCompression"),
        .package(path: "../SyncStorage"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
    ],
    targets: [
        .target(
            name: "SyncEngine",
            dependencies: [
                "SyncModels", "SyncEventStore", "SyncProtocol", "SyncCompression", "SyncStorage",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        .target(name: "SyncEngineTesting", dependencies: ["SyncEngine", "SyncModels", "SyncProtocol"]),
        .target(
            name: "SyncEngineHTTPClient",
            dependencies: [
                "SyncEngine", "SyncModels", "SyncProtocol",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        // The tests (Tests/SyncEngineTests) are declared once, in the repository's root Package.swift, which
        // runs every package's tests with one build.
    ],
    swiftLanguageModes: [.v6]
)
