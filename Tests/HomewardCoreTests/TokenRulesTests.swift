import HomewardCore
import HomewardProtocol
import XCTest

/// Sign-in tokens: a sliding lifetime, a list of devices, and revoking one or all.
final class TokenRulesTests: XCTestCase {
    private let now = CoreFixture.now
    private let day: Int64 = 86_400_000
    private var lifetime: Int64 { 30 * day }

    func testATokensHashIsItsSHA256InLowercaseHex() {
        // The store holds these: a hash written differently would match no stored token.
        XCTAssertEqual(Token.hash("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        XCTAssertEqual(Token.hash(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    func testATokenExpiresALifetimeAfterItsLastUse() throws {
        var state = CoreFixture.state()
        XCTAssertEqual(state.issueToken("h1", to: "alice", now: now, lifetime: lifetime),
                       [.createToken(hash: "h1", username: "alice", at: now)])
        XCTAssertEqual(try state.useToken("h1", now: now + 29 * day, lifetime: lifetime).username, "alice")
        // That use moved the expiry: 29 more days are fine, 30 after the last use are not.
        let used = try state.useToken("h1", now: now + 58 * day, lifetime: lifetime)
        XCTAssertEqual(used.changes, [.useToken(hash: "h1", at: now + 58 * day)])
        assertRelayError(try state.useToken("h1", now: now + 88 * day, lifetime: lifetime), .unauthenticated)
        assertRelayError(try state.useToken("unknown", now: now, lifetime: lifetime), .unauthenticated)
    }

    func testUsesWithinAMinuteAreNotStoredAgain() throws {
        var state = CoreFixture.state()
        _ = state.issueToken("h1", to: "alice", now: now, lifetime: lifetime)
        XCTAssertEqual(try state.useToken("h1", now: now + 30_000, lifetime: lifetime).changes, [])
        XCTAssertEqual(try state.useToken("h1", now: now + 60_000, lifetime: lifetime).changes, [.useToken(hash: "h1", at: now + 60_000)])
    }

    func testTheListShowsIdsNotTokensAndMarksTheCurrentOne() throws {
        var state = CoreFixture.state()
        _ = state.issueToken("aaaaaaaaaaaaaaaa1111", to: "alice", now: now, lifetime: lifetime)
        _ = state.issueToken("bbbbbbbbbbbbbbbb2222", to: "alice", now: now + 5, lifetime: lifetime)
        _ = state.issueToken("cccccccccccccccc3333", to: "bob", now: now, lifetime: lifetime)
        let list = state.tokenList("alice", current: "bbbbbbbbbbbbbbbb2222", now: now + 10, lifetime: lifetime)
        XCTAssertEqual(list.reply("sessions"), [
            ["id": "tk_aaaaaaaaaaaaaaaa", "createdAt": .int(now), "lastUsed": .int(now), "expiresAt": .int(now + lifetime),
             "current": false],
            ["id": "tk_bbbbbbbbbbbbbbbb", "createdAt": .int(now + 5), "lastUsed": .int(now + 5),
             "expiresAt": .int(now + 5 + lifetime), "current": true],
        ])
    }

    func testRevokeByIdOnlyTheUsersOwn() throws {
        var state = CoreFixture.state()
        _ = state.issueToken("aaaaaaaaaaaaaaaa1111", to: "alice", now: now, lifetime: lifetime)
        _ = state.issueToken("cccccccccccccccc3333", to: "bob", now: now, lifetime: lifetime)
        assertRelayError(try state.revokeToken("alice", id: "tk_cccccccccccccccc"), .notFound)
        let revoked = try state.revokeToken("alice", id: "tk_aaaaaaaaaaaaaaaa")
        XCTAssertEqual(revoked.changes, [.revokeToken(hash: "aaaaaaaaaaaaaaaa1111")])
        assertRelayError(try state.useToken("aaaaaaaaaaaaaaaa1111", now: now, lifetime: lifetime), .unauthenticated)
        XCTAssertEqual(try state.useToken("cccccccccccccccc3333", now: now, lifetime: lifetime).username, "bob")
    }

    func testLogoutAllRevokesEveryTokenOfTheUser() throws {
        var state = CoreFixture.state()
        for hash in ["h1", "h2", "h3"] { _ = state.issueToken(hash, to: "alice", now: now, lifetime: lifetime) }
        _ = state.issueToken("hb", to: "bob", now: now, lifetime: lifetime)
        let one = state.logOut("alice", token: "h1", all: false)
        XCTAssertEqual(one.changes, [.revokeToken(hash: "h1")])
        let all = state.logOut("alice", token: "h2", all: true)
        XCTAssertEqual(all.changes, [.revokeToken(hash: "h2"), .revokeToken(hash: "h3")])
        for hash in ["h1", "h2", "h3"] { assertRelayError(try state.useToken(hash, now: now, lifetime: lifetime), .unauthenticated) }
        XCTAssertEqual(try state.useToken("hb", now: now, lifetime: lifetime).username, "bob")
    }

    func testALoginDropsTheUsersExpiredTokens() {
        var state = CoreFixture.state()
        _ = state.issueToken("old", to: "alice", now: now, lifetime: lifetime)
        let changes = state.issueToken("new", to: "alice", now: now + lifetime, lifetime: lifetime)
        XCTAssertEqual(changes, [.revokeToken(hash: "old"), .createToken(hash: "new", username: "alice", at: now + lifetime)])
    }

    func testTokensSurviveALoad() throws {
        var stored = StoredState()
        stored.users = [UserProfile(username: "alice", name: "Alice")]
        stored.tokens = [IssuedToken(hash: "h1", username: "alice", createdAt: now - 40 * day, lastUsed: now - day)]
        var state = RelayState(stored)
        XCTAssertEqual(try state.useToken("h1", now: now, lifetime: lifetime).username, "alice")
    }
}
