import Testing

@testable import SyncEngine

@Suite struct SyncDiagnosticsTests {
    @Test func scopeNamesAreReplacedOnlyAsWholeNames() {
        let scopes: Set = ["team-1", "team-12", "a"]
        let text = "team-1: 3 events; team-12 at 7; steam-1 and team-1x stay; a b"
        let redacted = SyncDiagnostics.redactingScopes(scopes, in: text)
        let one = SyncDiagnostics.scopeDigest("team-1")
        let twelve = SyncDiagnostics.scopeDigest("team-12")
        let a = SyncDiagnostics.scopeDigest("a")
        #expect(redacted == "\(one): 3 events; \(twelve) at 7; steam-1 and team-1x stay; \(a) b")
    }

    @Test func aRejectionKeepsItsIdTypeAndCodeAndLosesItsMessage() {
        #expect(
            SyncDiagnostics.withoutMessage("0192 note.created: validation.failed the title 'Payroll' is taken")
                == "0192 note.created: validation.failed")
        #expect(
            SyncDiagnostics.withoutMessage("0192 note.created: quota.exceeded") == "0192 note.created: quota.exceeded")
        #expect(SyncDiagnostics.withoutMessage("no code here") == "no code here")
    }
}
