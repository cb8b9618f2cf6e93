import Foundation
import Hummingbird
import HummingbirdCore
import NIOCore
import ServiceLifecycle
import SyncModels
import SyncProtocol

extension SyncAPI {
    /// `GET /v1/live`: the live stream, Server-Sent Events (see docs/PROTOCOL.md). Authorised as a pull;
    /// everything wrong with the request is answered before the stream starts, as a JSON error. The stream
    /// then holds no database connection and no request slot (`RequestLimiter`): a subscriber waits in
    /// `LiveHub` for its scopes' frames, which are encoded once and written to every subscriber as the same
    /// bytes, uncompressed (no per-connection compression state).
    func handleLive(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let subscription = try await liveSubscription(
            authorization: request.headers[.authorization], path: request.uri.string)
        guard let live else {
            throw SyncProtocolError(.serverUnavailable, "this server does not serve the live stream")
        }
        context.logger.debug("live: subscribed")
        // A client that goes away ends its subscription at once, not at the next write that fails.
        let watcher = LiveDisconnectHandler { [id = subscription.id] in live.end(id) }
        let channel = context.channel
        try? await channel.pipeline.addHandler(watcher, position: .first).get()

        var headers = HTTPFields()
        headers[.contentType] = "text/event-stream"
        headers[.cacheControl] = "no-store"
        // nginx: pass each write on at once (deploy/nginx/sync.conf also turns buffering off).
        headers[.init("X-Accel-Buffering")!] = "no"
        let subscribed = live.subscribedMessage
        return Response(
            status: .ok, headers: headers,
            body: ResponseBody { writer in
                defer {
                    live.unsubscribe(subscription.id)
                    channel.pipeline.removeHandler(watcher, promise: nil)
                }
                try await withGracefulShutdownHandler {
                    try await writer.write(subscribed)
                    try await Self.stream(subscription, from: live, to: &writer)
                } onGracefulShutdown: {
                    live.end(subscription.id)
                }
                try await writer.finish(nil)
            })
    }

    /// Checks a live request (authorised as a pull: its token, its query, the scopes it may follow) and
    /// subscribes it (`LiveChannelHandler` on the event loop, `handleLive` through the router).
    /// - Parameters:
    ///   - authorization: the `Authorization` header.
    ///   - path: the request's path and query (`/v1/live?cursor=…&scopes=…`).
    /// - Throws: what the request gets instead, as a protocol error.
    func liveSubscription(authorization: String?, path: String) async throws -> LiveHub.Subscription {
        let identity = try await tokens.identity(authorization: authorization)
        guard let live else {
            throw SyncProtocolError(.serverUnavailable, "this server does not serve the live stream")
        }
        let query = URI(path).queryParameters.map { (name: String($0.key), value: String($0.value)) }
        let pullRequest = try PullRequest(query: query, limits: codec.limits)
        let scopes = try PullService.scopes(requested: pullRequest.scopes, identity: identity)
        guard !scopes.isEmpty else {
            throw SyncProtocolError(.requestInvalid, "the token grants no scope to follow")
        }
        let positions = Dictionary(uniqueKeysWithValues: scopes.map { ($0, pullRequest.cursor[$0]) })
        let expiresAt = identity.expiresAt.map { ContinuousClock.now + .seconds($0.timeIntervalSinceNow) }
        return try await live.subscribe(positions, expiresAt: expiresAt)
    }

    /// Writes the subscriber's backfill, then its frames and heartbeats until its stream ends.
    static func stream(
        _ subscription: LiveHub.Subscription, from live: LiveHub, to writer: inout any ResponseBodyWriter
    ) async throws {
        for backfill in subscription.backfills {
            guard let frames = try await live.frames(for: backfill) else {
                live.end(subscription.id, .behind)
                try await writer.write(Self.behind)
                return
            }
            try await writer.write(contentsOf: frames)
        }
        while true {
            switch await live.next(subscription.id) {
            case .frames(let frames):
                if frames.count == 1 {
                    try await writer.write(frames[0])
                } else {
                    try await writer.write(contentsOf: frames)
                }
            case .heartbeat:
                try await writer.write(LiveHub.heartbeat)
            case .end(let outcome):
                if let message = lastMessage(outcome) { try await writer.write(message) }
                return
            case .wait:
                return
            }
        }
    }

    /// The message a stream ending with `outcome` writes last: `behind`, the `auth.expired` error, or none.
    static func lastMessage(_ outcome: LiveHub.Feeds.Outcome) -> ByteBuffer? {
        switch outcome {
        case .behind: behind
        case .expired: expired
        case .closed: nil
        }
    }

    static let behind = LiveHub.message(LiveMessage.behindEvent, "{}")
    static let expired = LiveHub.message(
        LiveMessage.errorEvent, #"{"error":{"code":"auth.expired","message":"the token has expired"}}"#)
}
