import Foundation
import SyncEngine
import SyncEngineHTTPClient
import SyncModels
import SyncProtocol
import SyncToolSupport
import Synchronization

/// What a real network and a flaky server do to a device's requests, injected in the transport with a
/// seeded random choice per request, around a real HTTP transport to the server.
enum Fault: String, CaseIterable, Codable, Sendable {
    /// The request never leaves the device.
    case lostRequest = "lost-request"
    /// The server handles the request; the answer is lost (the device sees a network error).
    case lostResponse = "lost-response"
    /// The request reaches the server twice; the device gets the second answer.
    case duplicate
    /// The request leaves 50–500 ms late.
    case delay
    /// The request is held back (the device sees it lost) and reaches the server later, just before the
    /// device's next request: a retransmission arriving after newer traffic.
    case reorder
    /// The device gets HTTP 500 without the server seeing the request.
    case serverError = "server-error"
}

/// One device's transport: a real `HTTPClientTransport` (shared connection pool) behind an online switch
/// and seeded faults on `POST /v1/sync` and on subscriptions to the live stream. Long-polls (`pull`) get
/// only the online switch.
///
/// The live stream's faults, drawn per subscription: a lost request or a 500 refuse it; a delay holds it
/// back; a duplicate opens a second subscription and drops it; a lost response or a reorder breaks the
/// connection 0.5–10 s later (the device sees a network failure and subscribes again). Going offline
/// breaks the open streams.
final class FaultyTransport: SyncTransport {
    private let inner: HTTPClientTransport
    /// Where pushes and pulls that do not wait go, when not through `inner` (a thin device's: a small pool
    /// of connections shared by all of them, beside the connection each holds for its stream).
    private let requests: HTTPClientTransport
    private let metrics: LoadMetrics
    private struct State {
        var online = true
        var faultRate: Double
        var random: SplitMix64
        /// Requests held back by a `reorder` fault, sent just before the next one.
        var heldBack: [@Sendable () async -> Void] = []
        /// How to break each live stream open through this transport, which going offline does.
        var streams: [Int: @Sendable () -> Void] = [:]
        var nextStream = 0
    }
    private let state: Mutex<State>

    /// A new token for this device's requests: a full replica's engine (`tokenProvider`), or a thin device
    /// renewing its own (`--token-lifetime`).
    func setToken(_ token: String?) {
        inner.setToken(token)
        if requests !== inner { requests.setToken(token) }
    }

    init(
        inner: HTTPClientTransport, requests: HTTPClientTransport? = nil, metrics: LoadMetrics, faultRate: Double,
        seed: UInt64
    ) {
        self.inner = inner
        self.requests = requests ?? inner
        self.metrics = metrics
        self.state = Mutex(State(faultRate: faultRate, random: SplitMix64(seed: seed)))
    }

    var isOnline: Bool { state.withLock { $0.online } }

    func setOnline(_ online: Bool) {
        let broken = state.withLock { state -> [@Sendable () -> Void] in
            state.online = online
            guard !online else { return [] }
            defer { state.streams.removeAll() }
            return Array(state.streams.values)
        }
        for breakStream in broken { breakStream() }
    }

    /// Stops injecting faults (the verdict's settling phase).
    func stopFaults() { state.withLock { $0.faultRate = 0 } }

    func sync(_ request: SyncRequest) async throws(SyncFailure) -> TransportExchange {
        let inner = inner
        return try await faulted({ _ = try? await inner.sync(request) }) { () async throws(SyncFailure) in
            try await inner.sync(request)
        }
    }

    /// One `POST /v1/push` (a thin device's), with the same faults as a sync.
    func push(_ request: PushRequest) async throws(SyncFailure) -> (results: [PushResult], traffic: Traffic) {
        let requests = requests
        return try await faulted({ _ = try? await requests.push(request) }) { () async throws(SyncFailure) in
            try await requests.push(request)
        }
    }

    /// Sends a request through the online switch and a seeded fault: `again` sends it once more (a
    /// duplicate, or a held-back request arriving late), `send` sends it and returns the answer.
    private func faulted<T>(
        _ again: @escaping @Sendable () async -> Void, _ send: () async throws(SyncFailure) -> T
    ) async throws(SyncFailure) -> T {
        let (online, fault, late, delay) = state.withLock {
            state -> (Bool, Fault?, [@Sendable () async -> Void], Duration) in
            guard state.online else { return (false, nil, [], .zero) }
            let late = state.heldBack
            state.heldBack.removeAll()
            var fault: Fault? = nil
            if state.faultRate > 0, Double.random(in: 0..<1, using: &state.random) < state.faultRate {
                fault = Fault.allCases.randomElement(using: &state.random)
            }
            if fault == .reorder { state.heldBack.append(again) }
            return (true, fault, late, .milliseconds(Int.random(in: 50...500, using: &state.random)))
        }
        guard online else { throw .retryable(reason: "network: offline", retryAfter: nil) }
        for request in late { await request() }
        if let fault { metrics.injected(fault) }
        switch fault {
        case .lostRequest?, .reorder?:
            throw .retryable(reason: "network: request lost (injected)", retryAfter: nil)
        case .serverError?:
            throw SyncFailure.from(status: 500, code: "server.internal", message: "injected")
        case .delay?:
            try? await Task.sleep(for: delay)
        case .duplicate?:
            await again()
        case .lostResponse?, nil:
            break
        }
        let answer: T
        do {
            answer = try await send()
        } catch {
            metrics.failed(error)
            throw error
        }
        if fault == .lostResponse { throw .retryable(reason: "network: response lost (injected)", retryAfter: nil) }
        return answer
    }

    func pull(_ request: PullRequest) async throws(SyncFailure) -> PullResponse {
        guard isOnline else { throw .retryable(reason: "network: offline", retryAfter: nil) }
        do {
            return try await (request.wait > 0 ? inner : requests).pull(request)
        } catch {
            if !Task.isCancelled { metrics.failed(error) }
            throw error
        }
    }

    func checksum(_ request: ChecksumRequest) async throws(SyncFailure) -> ChecksumResponse {
        guard isOnline else { throw .retryable(reason: "network: offline", retryAfter: nil) }
        return try await requests.checksum(request)
    }
}

extension FaultyTransport {
    /// The fault of one subscription to the live stream, drawn and counted: a lost request or a 500 refuse
    /// it (thrown here, as is being offline); a delay holds it back (slept here); a duplicate opens a second
    /// subscription and drops it; a lost response or a reorder break the connection `delay` later.
    func liveFault() async throws(SyncFailure) -> (fault: Fault?, delay: Duration) {
        let (online, fault, delay) = state.withLock { state -> (Bool, Fault?, Duration) in
            guard state.online else { return (false, nil, .zero) }
            var fault: Fault? = nil
            if state.faultRate > 0, Double.random(in: 0..<1, using: &state.random) < state.faultRate {
                fault = Fault.allCases.randomElement(using: &state.random)
            }
            let delay =
                fault == .delay
                ? Duration.milliseconds(Int.random(in: 50...500, using: &state.random))
                : .milliseconds(Int.random(in: 500...10_000, using: &state.random))
            return (true, fault, delay)
        }
        guard online else { throw .retryable(reason: "network: offline", retryAfter: nil) }
        if let fault { metrics.injected(fault) }
        switch fault {
        case .lostRequest?:
            throw .retryable(reason: "network: request lost (injected)", retryAfter: nil)
        case .serverError?:
            throw SyncFailure.from(status: 500, code: "server.internal", message: "injected")
        case .delay?:
            try? await Task.sleep(for: delay)
        default: break
        }
        return (fault, delay)
    }

    /// Registers how to break a live stream when the transport goes offline; nil (and nothing registered)
    /// when it is offline already. Pass the id to `unregister` when the stream ends.
    func register(breaker: @escaping @Sendable () -> Void) -> Int? {
        state.withLock { state in
            guard state.online else { return nil }
            state.nextStream += 1
            state.streams[state.nextStream] = breaker
            return state.nextStream
        }
    }

    func unregister(_ id: Int) { _ = state.withLock { $0.streams.removeValue(forKey: id) } }

    func live(_ request: PullRequest) async throws(SyncFailure) -> LiveMessages {
        let (fault, delay) = try await liveFault()
        if fault == .duplicate {
            // A second subscription, dropped at once (its connection closes when its stream goes).
            _ = try? await inner.live(request)
        }
        let messages: LiveMessages
        do {
            messages = try await inner.live(request)
        } catch {
            if !Task.isCancelled { metrics.failed(error) }
            throw error
        }
        let (stream, continuation) = LiveMessages.makeStream()
        // Offline meanwhile: the connection is lost at once.
        guard
            let id = register(breaker: {
                continuation.finish(throwing: SyncFailure.retryable(reason: "network: offline", retryAfter: nil))
            })
        else { throw .retryable(reason: "network: offline", retryAfter: nil) }
        let forward = Task {
            do {
                for try await message in messages { continuation.yield(message) }
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        let breaker =
            fault == .lostResponse || fault == .reorder
            ? Task {
                try? await Task.sleep(for: delay)
                if !Task.isCancelled {
                    continuation.finish(
                        throwing: SyncFailure.retryable(reason: "network: connection lost (injected)", retryAfter: nil))
                }
            } : nil
        continuation.onTermination = { [weak self] _ in
            forward.cancel()
            breaker?.cancel()
            self?.unregister(id)
        }
        return stream
    }
}

extension SplitMix64 {
    /// The generator of stream `index` of a run seeded with `seed` (each device draws from its own, so a
    /// run is reproducible from its seed).
    static func stream(_ seed: UInt64, _ index: Int) -> SplitMix64 {
        var mixer = SplitMix64(seed: seed ^ (UInt64(index) &* 0xD1B5_4A32_D192_ED03))
        return SplitMix64(seed: mixer.next())
    }
}

/// The blob routes through the same online switch and seeded faults as a sync: a lost request, a lost
/// answer, a duplicate, a delay, a reordered retransmission or a 500, per request (each chunk is one).
extension FaultyTransport: BlobTransport {
    func startUpload(_ request: UploadRequest) async throws(SyncFailure) -> UploadState {
        let requests = requests
        return try await faulted({ _ = try? await requests.startUpload(request) }) { () async throws(SyncFailure) in
            try await requests.startUpload(request)
        }
    }

    func putChunk(upload: String, index: Int, bytes: Data, sha256: BlobHash) async throws(SyncFailure)
        -> UploadState
    {
        try await putChunk(upload: upload, index: index, bytes: bytes, sha256: sha256, sent: {})
    }

    func putChunk(
        upload: String, index: Int, bytes: Data, sha256: BlobHash, sent: @escaping @Sendable () -> Void
    ) async throws(SyncFailure) -> UploadState {
        let requests = requests
        return try await faulted({
            _ = try? await requests.putChunk(upload: upload, index: index, bytes: bytes, sha256: sha256, sent: sent)
        }) {
            () async throws(SyncFailure) in
            try await requests.putChunk(upload: upload, index: index, bytes: bytes, sha256: sha256, sent: sent)
        }
    }

    func commitUpload(_ upload: String) async throws(SyncFailure) -> UploadState {
        let requests = requests
        return try await faulted({ _ = try? await requests.commitUpload(upload) }) { () async throws(SyncFailure) in
            try await requests.commitUpload(upload)
        }
    }

    func download(
        _ hash: BlobHash, scope: Scope, from offset: Int64, begin: (Int64, Int64) throws -> Void,
        receive: (Data) throws -> Void
    ) async throws(SyncFailure) {
        guard isOnline else { throw .retryable(reason: "network: offline", retryAfter: nil) }
        try await requests.download(hash, scope: scope, from: offset, begin: begin, receive: receive)
    }
}
