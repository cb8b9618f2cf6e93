import Logging
import ServiceLifecycle

/// Deletes expired upload sessions every `intervalSeconds` (`BlobService.sweep`), as a service of the server's
/// `ServiceGroup`. Errors are logged and the next round tries again; a graceful shutdown stops it.
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
                } catch let error where !(error is CancellationError) && !Task.isCancelled {
                    logger.warning("upload sweep failed; retrying next round", metadata: ["error": "\(error)"])
                }
            }
        }
    }
}
