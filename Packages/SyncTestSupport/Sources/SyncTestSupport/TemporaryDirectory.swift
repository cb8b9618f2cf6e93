import Foundation

/// A fresh directory per test, removed with everything in it when the value is released.
public final class TemporaryDirectory: Sendable {
    public let url: URL

    /// - Throws: when the directory cannot be created.
    public init(prefix: String = "SyncTests") throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    /// The path of `name` inside the directory.
    public func path(_ name: String) -> String { url.appendingPathComponent(name).path }

    deinit { try? FileManager.default.removeItem(at: url) }
}
