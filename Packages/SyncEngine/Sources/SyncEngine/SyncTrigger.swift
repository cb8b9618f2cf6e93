/// What asks for a sync.
public enum SyncTrigger: String, Sendable, Hashable, CaseIterable {
    /// A local write: pushed at once when no push runs; writes made during one go together in the next
    /// (`SyncScheduler`'s `minPushInterval` bounds how often, its `debounce` may delay it).
    case localWrite
    /// The periodic timer.
    case interval
    /// The network came back.
    case connectivity
    /// The user or app asked explicitly ("sync now").
    case explicit
    /// A new token arrived after an authentication pause.
    case tokenRefreshed
    /// The live stream or a long-poll brought something for the run loop (`SyncEngine.Configuration.live`,
    /// `SyncEngine.Configuration.longPoll`): frames to apply, or a catch-up to run.
    case remoteChange
}
