import SyncCRDT
import SyncModels
import SyncTestSupport
import Testing

/// Keeps the README example compiling and working: the body below is the README's code.
@Suite(.onOwnThreads) struct ReadmeExampleTests {
    @Test func readmeExampleRuns() {
        // README begins
        let phone = ReplicaID.random(), laptop = ReplicaID.random()
        var a = FugueText(), b = FugueText()
        b.apply(a.insert("Hello world", at: 0, replica: phone)!)
        let fromPhone = a.insert(" dear", at: 5, replica: phone)!
        let fromLaptop = b.remove(at: 5, count: 6, replica: laptop)!
        a.apply(fromLaptop)
        b.apply(fromPhone)
        print(a.text, a.text == b.text)  // "Hello dear true"
        // README ends
        #expect(a.text == "Hello dear" && b.text == "Hello dear")
    }
}
