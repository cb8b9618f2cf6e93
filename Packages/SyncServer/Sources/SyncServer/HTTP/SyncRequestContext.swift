import Hummingbird
import NIOCore

/// The request context of the sync API: Hummingbird's basic one, plus the request's connection, which the live
/// stream watches to end a subscription as soon as its client goes away (`LiveDisconnectHandler`), and what a
/// route learns for the request's access line (`AccessLogMiddleware`).
struct SyncRequestContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    /// The connection the request came on.
    let channel: any Channel
    /// What the route adds to the access line; shared by every copy of the context.
    let access = AccessNotes()

    init(source: ApplicationRequestContextSource) {
        coreContext = CoreRequestContextStorage(source: source)
        channel = source.channel
    }
}
