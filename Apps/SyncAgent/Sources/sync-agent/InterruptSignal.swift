import Dispatch
import Foundation

/// Waits for SIGINT or SIGTERM (or a timeout), so `run` stops cleanly on Ctrl-C.
enum InterruptSignal {
    /// Returns when SIGINT or SIGTERM arrives, or after `seconds` (0: no timeout).
    static func wait(seconds: Double) async {
        let stream = AsyncStream<Void> { continuation in
            let queue = DispatchQueue(label: "sync-agent.signals")
            // Only touched on creation and in onTermination, which runs once; the sources are not Sendable.
            nonisolated(unsafe) let sources = [SIGINT, SIGTERM].map { number -> DispatchSourceSignal in
                signal(number, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
                source.setEventHandler { continuation.yield() }
                source.resume()
                return source
            }
            if seconds > 0 {
                queue.asyncAfter(deadline: .now() + seconds) { continuation.yield() }
            }
            continuation.onTermination = { _ in sources.forEach { $0.cancel() } }
        }
        for await _ in stream { return }
    }
}
