import HomewardCore
import HomewardCoreTestSupport
import HomewardProtocol
import XCTest

/// Devices and token revocation, search limits and the registration throttle (issue 11).
final class AccountLimitsEndToEndTests: EndToEndTestCase {
    func testSessionsListRevokeAndLogoutAll() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        let phone = try await relay.connect()
        let login = try await phone.ok("login", ["username": .string(alice.username), "password": .string(alice.password)])
        let phoneToken = try XCTUnwrap(login["token"]?.stringValue)

        let list = try await phone.ok("auth.sessions")
        let sessions = try XCTUnwrap(list["sessions"]?.arrayValue)
        XCTAssertEqual(sessions.count, 2)
        XCTAssertEqual(sessions.map { $0["current"] }, [false, true])
        for session in sessions {
            let id = try XCTUnwrap(session["id"]?.stringValue)
            XCTAssertFalse(id.contains(alice.token) || id.contains(phoneToken), "an id is not the token")
            XCTAssertNotNil(session["createdAt"]?.numberValue)
            XCTAssertNotNil(session["lastUsed"]?.numberValue)
        }

        // Revoking the first device's token: it can no longer sign in.
        let firstID = try XCTUnwrap(sessions[0]["id"])
        try await phone.ok("auth.revoke", ["tokenId": firstID])
        let revoked = try await relay.connect()
        let code = try await revoked.failure("hello", ["token": .string(alice.token)])
        XCTAssertEqual(code, "unauthenticated")
        let again = try await phone.failure("auth.revoke", ["tokenId": firstID])
        XCTAssertEqual(again, "not_found")
        let missing = try await phone.failure("auth.revoke", [])
        XCTAssertEqual(missing, "bad_request")

        // logout all: every token goes, this connection is signed out.
        let tablet = try await relay.connect()
        let tabletLogin = try await tablet.ok("login", ["username": .string(alice.username), "password": .string(alice.password)])
        try await phone.ok("logout", ["all": true])
        let after = try await phone.failure("auth.sessions")
        XCTAssertEqual(after, "unauthenticated")
        for token in [phoneToken, try XCTUnwrap(tabletLogin["token"]?.stringValue)] {
            let client = try await relay.connect()
            let code = try await client.failure("hello", ["token": .string(token)])
            XCTAssertEqual(code, "unauthenticated")
        }
        // (The tablet was signed in with a token that logout all revoked: it has been closed.)
        let badFlag = try await phone.failure("logout", ["all": "yes"])
        XCTAssertEqual(badFlag, "bad_request")
    }

    func testAThiefsSixteenConnectionsDoNotLockTheOwnerOutAndRevokingClosesThem() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        // The registering connection moves to a token of its own and signs out: the stolen token has no
        // connection yet, and alice none at all.
        try await alice.client.ok("login", ["username": .string(alice.username), "password": .string(alice.password)])
        try await alice.client.ok("logout")

        // A thief with alice's token fills the 16 connections she may have; a token alone gets no 17th.
        var thief: [TestClient] = []
        for _ in 0..<16 {
            let connection = try await relay.connect(label: "thief")
            try await connection.ok("hello", ["token": .string(alice.token)])
            thief.append(connection)
        }
        let seventeenth = try await relay.connect(label: "thief-17")
        let refused = try await seventeenth.failure("hello", ["token": .string(alice.token)])
        XCTAssertEqual(refused, "rate_limited")

        // Alice's password gets her in: the oldest of the thief's connections makes room.
        let owner = try await relay.connect(label: "owner")
        try await owner.ok("login", ["username": .string(alice.username), "password": .string(alice.password)])
        let oldestClose = try await thief[0].closeCode()
        XCTAssertEqual(oldestClose, 1008)
        for connection in thief.dropFirst() { XCTAssertTrue(connection.isActive) }

        // She revokes the stolen token: the thief's other 15 connections close, hers stays.
        let listed = try await owner.ok("auth.sessions")
        let sessions = try XCTUnwrap(listed["sessions"]?.arrayValue)
        let stolen = try XCTUnwrap(sessions.first { $0["current"] == false })
        try await owner.ok("auth.revoke", ["tokenId": try XCTUnwrap(stolen["id"])])
        for connection in thief.dropFirst() {
            let code = try await connection.closeCode()
            XCTAssertEqual(code, 1008)
        }
        try await owner.ok("auth.sessions")
        let again = try await relay.connect(label: "thief-again")
        let revoked = try await again.failure("hello", ["token": .string(alice.token)])
        XCTAssertEqual(revoked, "unauthenticated")
    }

    func testFailedHellosAreLimitedPerAddressWhileKnownTokensStillSignIn() async throws {
        let relay = try await startRelay { $0.relayLimits.helloFailuresPerAddress = 3 }
        let alice = try await relay.user("alice")
        // Two connections (each closes after 5 failures of its own): the count is the address's.
        let first = try await relay.connect(label: "guesser-1")
        for _ in 0..<2 {
            let code = try await first.failure("hello", ["token": .string(Token.mint())])
            XCTAssertEqual(code, "unauthenticated")
        }
        let second = try await relay.connect(label: "guesser-2")
        let third = try await second.failure("hello", ["token": .string(Token.mint())])
        XCTAssertEqual(third, "unauthenticated")
        let limited = try await second.failure("hello", ["token": .string(Token.mint())])
        XCTAssertEqual(limited, "rate_limited")
        // A device with a valid token behind the same address still signs in.
        let device = try await relay.connect(label: "alice-device")
        try await device.ok("hello", ["token": .string(alice.token)])
    }

    func testShortQueriesFindNobodyAndSearchesAreRateLimited() async throws {
        let relay = try await startRelay()
        let searcher = try await relay.user("searcher")
        // Two letters of a real username, and queries no username could start with: nobody, not an error.
        let short = String(searcher.username.prefix(2))
        for query in ["", "a", short, "a b", "abc\u{0}"] {
            let reply = try await searcher.client.ok("user.search", ["query": .string(query)])
            XCTAssertEqual(reply["users"], .array([]), query.debugDescription)
        }
        let exact = try await searcher.client.ok("user.search", ["query": .string(searcher.username)])
        XCTAssertEqual(exact["users"]?.arrayCount, 1)
        // 30 searches in 15 minutes, the six above included.
        for _ in 0..<24 { try await searcher.client.ok("user.search", ["query": "zzz"]) }
        let limited = try await searcher.client.failure("user.search", ["query": "zzz"])
        XCTAssertEqual(limited, "rate_limited")
    }

    func testRegistrationsPerAddressAreLimited() async throws {
        let relay = try await startRelay { $0.relayLimits.registrationsPerAddress = 2 }
        _ = try await relay.user("first")
        _ = try await relay.user("second")
        let third = try await relay.connect()
        let code = try await third.failure("register", ["username": .string(TestRelay.uniqueUsername("third")),
                                                        "password": "long enough pw"])
        XCTAssertEqual(code, "rate_limited")
    }
}
