import SyncServer

/// The `sync-server` executable; everything lives in the `SyncServer` library.
@main
struct SyncServerMain {
    static func main() async {
        await SyncServerCommand.main()
    }
}
