import Foundation
import SyncModels
import SyncProtocol
import Synchronization
import Testing

@testable import SyncServer

/// The pieces that keep a crowd of waiting devices cheap: the long-polls' lane of the database, and the
/// cache of verified tokens.
@Suite struct AdmissionTests {
    @Test func theGateAdmitsItsWidthAndTheRestWhenPlacesAreReleased() async throws {
        let gate = AsyncGate(width: 2)
        await gate.acquire()
        await gate.acquire()
        let admitted = Mutex(0)
        let third = Task {
            await gate.acquire()
            admitted.withLock { $0 += 1 }
        }
        try await Task.sleep(for: .milliseconds(100))
        #expect(admitted.withLock { $0 } == 0)
        gate.release()
        await third.value
        #expect(admitted.withLock { $0 } == 1)
        // Two places are held again (the first and the third); releasing both frees them.
        gate.release()
        gate.release()
        await gate.acquire()
        await gate.acquire()
    }

    @Test func verifiedTokensServeUntilTheyExpireAndStartOverWhenFull() {
        let cache = VerifiedTokens(capacity: 2)
        let now = Date()
        let alice = TokenIdentity(subject: "alice", scopes: [Scope("a")])
        cache.store("t1", alice, expiresAt: now + 60)
        #expect(cache.identity(for: "t1", at: now) == alice)
        #expect(cache.identity(for: "t1", at: now + 61) == nil)
        #expect(cache.identity(for: "t1", at: now) == nil)
        cache.store("t1", alice, expiresAt: now + 60)
        cache.store("t2", alice, expiresAt: now + 60)
        cache.store("t3", alice, expiresAt: now + 60)
        #expect(cache.identity(for: "t1", at: now) == nil)
        #expect(cache.identity(for: "t3", at: now) == alice)
    }

    @Test func anExpiredTokenIsRefusedEvenAfterItWasVerified() async throws {
        let verifier = await TokenVerifier(secret: "a-secret-of-thirty-two-bytes-or-more-0123")
        // A token of a second, verified while it is valid: on a loaded machine a second can go by between
        // minting and verifying, and then a longer one is tried.
        var ttl: TimeInterval = 1
        var token = ""
        var verified: TokenIdentity?
        repeat {
            token = try await verifier.mint(subject: "alice", scopes: ["a"], ttl: ttl)
            verified = try? await verifier.identity(authorization: "Bearer \t\(token) ")
            if verified == nil { ttl *= 2 }
        } while verified == nil && ttl <= 16
        #expect(verified?.subject == "alice")
        try await Task.sleep(for: .seconds(ttl) + .milliseconds(100))
        await #expect(throws: SyncProtocolError.self) { try await verifier.identity(authorization: "Bearer \(token)") }
    }

    @Test func blanksAreTrimmedWithoutFoundation() {
        #expect(TokenVerifier.trimmingBlanks(" \tabc \t") == "abc")
        #expect(TokenVerifier.trimmingBlanks("abc") == "abc")
        #expect(TokenVerifier.trimmingBlanks(" \t ") == "")
    }
}
