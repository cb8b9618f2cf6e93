import Dispatch
import Foundation

/// Waits for SIGINT or SIGTERM, so that the proxy prints its statistics before it exits.
enum TerminationSignal {
    static func wait() async {
        let stream = AsyncStream<Void> { continuation in
            let queue = DispatchQueue(label: "sync-fault-proxy.signals")
            // Only touched on creation and in onTermination, which runs once; the sources are not Sendable.
            nonisolated(unsafe) let sources = [SIGINT, SIGTERM].map { number -> DispatchSourceSignal in
                signal(number, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
                source.setEventHandler { continuation.yield() }
                source.resume()
                return source
            }
            continuation.onTermination = { _ in sources.forEach { $0.cancel() } }
        }
        for await _ in stream { return }
    }
}
