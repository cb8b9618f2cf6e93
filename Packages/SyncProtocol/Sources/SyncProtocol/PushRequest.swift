import SyncModels

/// The body of `POST /v1/push`: events made by one replica, in the order it made them.
public struct PushRequest: Codable, Hashable, Sendable {
    /// The replica that sends the events.
    public var replica: ReplicaID
    public var events: [Event]

    public init(replica: ReplicaID, events: [Event]) {
        self.replica = replica
        self.events = events
    }
}
