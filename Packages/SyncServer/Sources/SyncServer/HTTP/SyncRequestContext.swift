import Hummingbird
import NIOCore

/// The request context of the sync API: Hummingbird's basic one, plus the request's connection, which the live
/// stream watches to end a subscription as soon as its client goes away (`LiveDisconnectHandler`).
struct SyncRequestContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    /// The connection the request came on.
    let channel: any Channel

    init(source: ApplicationRequestContextSource) {
        coreContext = CoreRequestContextStorage(source: source)
        channel = source.channel
    }
}
