// swift-tools-version: 6.2
import PackageDescription

let package = Package(
    name: "SyncStorage",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .library(name: "SyncStorage", targets: ["SyncStorage"])
    ],
    dependencies: [
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
    ],
    targets: [
        // The encrypting VFS, in C over the system SQLite (the one GRDB links: one SQLite in the process).
        .target(
            name: "CSyncCipher",
            linkerSettings: [.linkedLibrary("sqlite3"), .linkedLibrary("crypto", .when(platforms: [.linux]))]),
        .target(
            name: "SyncStorage",
            dependencies: [
                "CSyncCipher",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
            ]
        ),
        // The tests (Tests/SyncStorageTests) are declared once, in the repository's root Package.swift, which
        // runs every package's tests with one build.
    ],
    swiftLanguageModes: [.v6]
)
