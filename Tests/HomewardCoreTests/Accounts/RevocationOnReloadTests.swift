import HomewardCore
import HomewardCoreTestSupport
import HomewardProtocol
import HomewardStorage
import XCTest

/// A revocation this relay never heard of (another relay's notice was lost while the bus was away, or
/// dropped by a full buffer) still closes the connections signed in with the token: every reload
/// closes those whose token the store no longer has.
final class RevocationOnReloadTests: XCTestCase {
    func testABusReconnectClosesConnectionsWhoseTokenAnotherRelayRevoked() async throws {
        let harness = try await SafetyHarness(users: ["alice", "bob"], friends: [("alice", "bob")])
        let (alice, _) = try await harness.connect("alice")
        let (bob, _) = try await harness.connect("bob")
        // Another relay revoked alice's token in the shared store; its notice never arrived here.
        let store = try SQLiteStore(path: harness.databasePath)
        try await store.apply([.revokeToken(hash: Token.hash(try XCTUnwrap(harness.tokens["alice"])))])
        try store.close()

        harness.relay.busReconnected()
        await harness.relay.drain()
        XCTAssertEqual(alice.closes, [.policyViolation])
        XCTAssertEqual(bob.closes, [], "a connection whose token is still stored stays")
    }

    func testAnUnreadableNoticeReloadsAndClosesThemToo() async throws {
        let harness = try await SafetyHarness(users: ["alice"], friends: [])
        let (alice, _) = try await harness.connect("alice")
        let store = try SQLiteStore(path: harness.databasePath)
        try await store.apply([.revokeToken(hash: Token.hash(try XCTUnwrap(harness.tokens["alice"])))])
        try store.close()

        // What the bus hands on when it dropped notices (its buffer was full) or could not read one.
        harness.relay.remoteChanges(.unreadable)
        await harness.relay.drain()
        XCTAssertEqual(alice.closes, [.policyViolation])
    }
}
