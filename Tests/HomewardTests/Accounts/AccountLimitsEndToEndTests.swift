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
