import Logging
import ServiceLifecycle

/// Deletes expired upload sessions (`BlobService.sweep`) and collects blobs no event refers to any more
/// (`BlobService.collect`) every `intervalSeconds`, as a service of the server's `ServiceGroup`. Errors are logged and the next round tries again; a graceful shutdown stops it.
struct BlobSweepService: Service {
    let blobs: BlobService
    let intervalSeconds: Int
    let logger: Logger

    func run() async throws {
        try? await cancelWhenGracefulShutdown { [self] in
            while true {
                try await Task.sleep(for: .seconds(intervalSeconds))
                do {
                    let swept = try await blobs.sweep(logger: logger)
                    if swept > 0 {
                        logger.info("expired upload sessions swept", metadata: ["sync.uploads": "\(swept)"])
                    }
                    let collected = try await blobs.collect(logger: logger)
                    if collected.blobs > 0 {
                        logger.info(
                            "unreferenced blobs collected",
                            metadata: ["sync.blobs": "\(collected.blobs)", "sync.blob.bytes": "\(collected.bytes)"])
                    }
                } catch let error where !(error is CancellationError) && !Task.isCancelled {
                    logger.warning("upload sweep failed; retrying next round", metadata: ["error": "\(error)"])
                }
            }
        }
    }
}
