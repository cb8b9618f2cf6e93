import Foundation
import SyncModels

/// One frame of the live stream (`GET /v1/live`, an `events` message): the events of one scope with `seq`
/// in `after + 1 ... head`, in order and without gaps, as one commit (or several that arrived together)
/// left them. The server encodes a frame once and sends the same bytes to every subscriber of the scope, so
/// it carries the scope's own position after it (`head`) rather than a subscriber's whole cursor.
///
/// A subscriber at position `p` in `scope` applies the frame when `p == after` and moves to `head`; it has
/// the frame already when `p >= head`; when `p < after` it missed events (it must not apply the frame:
/// it pulls from its cursor, then subscribes again).
public struct LiveFrame: Codable, Hashable, Sendable {
    public var scope: Scope
    /// The scope's position before the frame's first event.
    public var after: Int64
    /// The scope's position after the frame's last event (the last event's `seq`).
    public var head: Int64
    public var events: [Event]

    public init(scope: Scope, after: Int64, head: Int64, events: [Event]) {
        self.scope = scope
        self.after = after
        self.head = head
        self.events = events
    }

    /// What a subscriber at `position` in the frame's scope does with it.
    public func placement(at position: Int64) -> Placement {
        if position >= head { return .known }
        return position == after ? .next : .gap
    }

    public enum Placement: Sendable, Hashable {
        /// It continues the subscriber's position: apply it and move to `head`.
        case next
        /// The subscriber has every event of it already.
        case known
        /// The subscriber lacks events before it: catch up by pulling, then subscribe again.
        case gap
    }
}

/// The messages of the live stream, as `text/event-stream` (Server-Sent Events) carries them.
public enum LiveMessage: Sendable, Hashable {
    /// The first message: the subscription is in place; every commit after the request's cursor follows.
    /// `heartbeatSeconds` says how often the server writes when nothing happens (a client that hears
    /// nothing for a few of them treats the connection as dead).
    case subscribed(heartbeatSeconds: Int)
    case frame(LiveFrame)
    /// The server dropped this subscriber back to catch-up (it read too slowly, or it asked from a position
    /// too far behind): pull from the cursor, then subscribe again. The server closes the stream after it.
    case behind
    /// The stream ends with this error (`auth.expired` when the token expires); the server closes it after.
    case error(ErrorBody.Detail)
    /// A heartbeat (an SSE comment line).
    case heartbeat

    /// The SSE `event:` names.
    public static let subscribedEvent = "live"
    public static let frameEvent = "events"
    public static let behindEvent = "behind"
    public static let errorEvent = "error"

    /// The message an SSE event stands for; nil for an event name this version does not know (ignore it).
    /// - Throws: `SyncProtocolError` `request.malformed` / `request.invalid` for data that is not what the
    ///   event name says.
    public init?(event: String, data: Data, codec: WireCodec = WireCodec()) throws(SyncProtocolError) {
        switch event {
        case Self.frameEvent:
            self = .frame(try codec.decode(LiveFrame.self, from: data))
        case Self.subscribedEvent:
            self = .subscribed(heartbeatSeconds: try codec.decode(Subscribed.self, from: data).heartbeatSeconds)
        case Self.behindEvent:
            self = .behind
        case Self.errorEvent:
            self = .error(try codec.decode(ErrorBody.self, from: data).error)
        default:
            return nil
        }
    }

    /// The data of the `live` message.
    public struct Subscribed: Codable, Hashable, Sendable {
        public var heartbeatSeconds: Int

        public init(heartbeatSeconds: Int) {
            self.heartbeatSeconds = heartbeatSeconds
        }
    }
}

/// Splits a `text/event-stream` body into events as its bytes arrive, in any chunks (the parsing rules of
/// the HTML standard's "Server-sent events", for the fields this protocol uses: `event`, `data`, comments).
/// A pure value: feed it bytes, take the events.
public struct ServerSentEventParser: Sendable {
    public struct Event: Sendable, Hashable {
        /// `message` when the event named none.
        public var name: String
        public var data: Data
    }

    /// What a chunk completed: events, and comment lines (heartbeats).
    public enum Item: Sendable, Hashable {
        case event(Event)
        case comment
    }

    private var line: [UInt8] = []
    private var name = ""
    private var data: [UInt8] = []
    private var hasData = false
    private var lastWasCR = false
    /// The longest line accepted; a longer one ends parsing with `LineTooLong` (a server gone wrong).
    public let maxLineBytes: Int

    public struct LineTooLong: Error, Sendable {}

    public init(maxLineBytes: Int = 16 * 1024 * 1024) {
        self.maxLineBytes = maxLineBytes
    }

    /// The items `bytes` completes, in order.
    public mutating func feed(_ bytes: some Sequence<UInt8>) throws(LineTooLong) -> [Item] {
        var result: Result<[Item], LineTooLong>?
        _ = bytes.withContiguousStorageIfAvailable { buffer in
            result = Result { () throws(LineTooLong) in try feed(UnsafeRawBufferPointer(buffer)) }
        }
        if let result { return try result.get() }
        let array = Array(bytes)
        array.withUnsafeBytes { buffer in result = Result { () throws(LineTooLong) in try feed(buffer) } }
        return try result!.get()
    }

    /// The items `buffer` completes, in order: lines are found by scanning and copied a run at a time (a
    /// byte at a time through a generic sequence cost a client following thousands of streams a fifth of
    /// its CPU).
    public mutating func feed(_ buffer: UnsafeRawBufferPointer) throws(LineTooLong) -> [Item] {
        guard !buffer.isEmpty else { return [] }
        var items: [Item] = []
        var index = 0
        // A CR ended the last chunk: an LF starting this one belongs to it.
        if lastWasCR, buffer.first == 0x0A { index = 1 }
        lastWasCR = false
        var start = index
        while index < buffer.count {
            let byte = buffer[index]
            guard byte == 0x0A || byte == 0x0D else {
                index += 1
                continue
            }
            try appendToLine(UnsafeRawBufferPointer(rebasing: buffer[start..<index]))
            if let item = endLine() { items.append(item) }
            if byte == 0x0D {
                if index + 1 < buffer.count {
                    if buffer[index + 1] == 0x0A { index += 1 }
                } else {
                    lastWasCR = true
                }
            }
            index += 1
            start = index
        }
        try appendToLine(UnsafeRawBufferPointer(rebasing: buffer[start..<buffer.count]))
        return items
    }

    private mutating func appendToLine(_ bytes: UnsafeRawBufferPointer) throws(LineTooLong) {
        guard !bytes.isEmpty else { return }
        guard line.count + bytes.count <= maxLineBytes else { throw LineTooLong() }
        line.append(contentsOf: bytes)
    }

    private mutating func endLine() -> Item? {
        defer { line.removeAll(keepingCapacity: true) }
        if line.isEmpty {
            // A blank line dispatches the event gathered so far.
            defer {
                name = ""
                data.removeAll(keepingCapacity: true)
                hasData = false
            }
            guard hasData else { return nil }
            return .event(Event(name: name.isEmpty ? "message" : name, data: Data(data)))
        }
        if line[0] == UInt8(ascii: ":") { return .comment }
        let colon = line.firstIndex(of: UInt8(ascii: ":")) ?? line.endIndex
        let field = String(decoding: line[..<colon], as: UTF8.self)
        var value = line[colon...].dropFirst()
        if value.first == UInt8(ascii: " ") { value = value.dropFirst() }
        switch field {
        case "event":
            name = String(decoding: value, as: UTF8.self)
        case "data":
            if hasData { data.append(0x0A) }
            data.append(contentsOf: value)
            hasData = true
        default:
            break  // `id`, `retry` and unknown fields: not used by this protocol.
        }
        return nil
    }
}
