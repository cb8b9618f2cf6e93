/// What asks for a sync.
public enum SyncTrigger: String, Sendable, Hashable, CaseIterable {
    /// A local write: debounced, so a burst of edits makes one sync.
    case localWrite
    /// The periodic timer.
    case interval
    /// The network came back.
    case connectivity
    /// The user or app asked explicitly ("sync now").
    case explicit
    /// A new token arrived after an authentication pause.
    case tokenRefreshed
    /// A long-poll saw another replica's event on the server (`SyncEngine.Configuration.longPoll`).
    case remoteChange
}
