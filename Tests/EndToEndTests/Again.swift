import SyncEngine

/// `body`, made again (up to 10 times, a second apart) after a failure to try again later, as an app does:
/// with a second test suite running beside this one (load average above 50 on two cores), a connect once took
/// longer than the client's 10 s. What a test sends again duplicates nothing: its exact counts still say so.
func again<T>(_ body: () async throws -> T) async throws -> T {
    var attempt = 0
    while true {
        attempt += 1
        do {
            return try await body()
        } catch {
            guard case .retryable? = error as? SyncFailure, attempt < 10 else { throw error }
            try await Task.sleep(for: .seconds(1))
        }
    }
}
