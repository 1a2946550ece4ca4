import HomewardCoreTestSupport
import HomewardProtocol
import XCTest

/// register, login, hello, logout, and what an unauthenticated connection may do.
final class AuthenticationEndToEndTests: EndToEndTestCase {
    func testRegisterReturnsUserAndTokenAndLowercasesTheUsername() async throws {
        let relay = try await startRelay()
        let client = try await relay.connect()
        let username = TestRelay.uniqueUsername("MixedCase")
        let reply = try await client.ok("register", ["username": .string(username), "password": "long enough pw"])
        XCTAssertEqual(reply["user"]?["username"], .string(username.lowercased()))
        XCTAssertEqual(reply["user"]?["name"], .string(username.lowercased()), "name defaults to the username")
        XCTAssertNotNil(reply["token"]?.stringValue)
        XCTAssertFalse(reply["token"]?.stringValue?.isEmpty ?? true)
        // Signed in now: a request that needs authentication works.
        let list = try await client.ok("friend.list")
        XCTAssertEqual(list["friends"], [])
    }

    /// Every sign-in reply names the relay node (`--node-id`) the connection is served by.
    func testSignInRepliesNameTheNode() async throws {
        let relay = try await startRelay { $0.nodeID = "relay-b.2" }
        let username = TestRelay.uniqueUsername("node")
        let register = try await relay.connect()
        let registered = try await register.ok("register", ["username": .string(username), "password": "long enough pw"])
        XCTAssertEqual(registered["node"], "relay-b.2")
        let login = try await relay.connect()
        let loggedIn = try await login.ok("login", ["username": .string(username), "password": "long enough pw"])
        XCTAssertEqual(loggedIn["node"], "relay-b.2")
        let hello = try await relay.connect()
        let resumed = try await hello.ok("hello", ["token": registered["token"] ?? .null])
        XCTAssertEqual(resumed["node"], "relay-b.2")
    }

    func testRegisterWithDisplayName() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice", name: "Alice Ångström")
        let reply = try await alice.client.ok("hello", ["token": .string(alice.token)])
        XCTAssertEqual(reply["user"], ["username": .string(alice.username), "name": "Alice Ångström"])
    }

    func testRegisterTakenUsernameIsConflictCaseInsensitively() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        let other = try await relay.connect()
        let code = try await other.failure("register", ["username": .string(alice.username.uppercased()), "password": "another password"])
        XCTAssertEqual(code, "conflict")
        // Still unauthenticated after the failure.
        let list = try await other.failure("friend.list")
        XCTAssertEqual(list, "unauthenticated")
    }

    func testRegisterValidatesFields() async throws {
        let relay = try await startRelay()
        let client = try await relay.connect()
        let cases: [(String, [(String, JSONValue)])] = [
            ("too short username", [("username", "ab"), ("password", "long enough pw")]),
            ("too long username", [("username", .string(String(repeating: "a", count: 33))), ("password", "long enough pw")]),
            ("bad characters", [("username", "alice smith"), ("password", "long enough pw")]),
            ("missing username", [("password", "long enough pw")]),
            ("username not a string", [("username", 42), ("password", "long enough pw")]),
            ("short password", [("username", "validname"), ("password", "short")]),
            ("missing password", [("username", "validname")]),
            ("long name", [("username", "validname"), ("password", "long enough pw"),
                           ("name", .string(String(repeating: "n", count: 65)))]),
        ]
        for (what, fields) in cases {
            let code = try await client.failure("register", fields)
            XCTAssertEqual(code, "bad_request", what)
        }
        // None of them created the account.
        let ok = try await client.ok("register", ["username": "validname", "password": "long enough pw"])
        XCTAssertEqual(ok["user"]?["username"], "validname")
    }

    func testLoginOnAnotherConnection() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        let phone = try await relay.connect()
        let reply = try await phone.ok("login", ["username": .string(alice.username.uppercased()), "password": .string(alice.password)])
        XCTAssertEqual(reply["user"]?["username"], .string(alice.username))
        let token = try XCTUnwrap(reply["token"]?.stringValue)
        XCTAssertNotEqual(token, alice.token, "each login mints its own token")
        // The new token works on a third connection.
        let tablet = try await relay.connect()
        let hello = try await tablet.ok("hello", ["token": .string(token)])
        XCTAssertEqual(hello["user"]?["username"], .string(alice.username))
    }

    func testWrongPasswordAndUnknownUserGiveTheSameError() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        let client = try await relay.connect()
        let wrongPassword = try await client.request("login", ["username": .string(alice.username), "password": "not the password"])
        let unknownUser = try await client.request("login", ["username": "nobody-here", "password": .string(alice.password)])
        XCTAssertEqual(wrongPassword["type"], "error")
        XCTAssertEqual(wrongPassword["code"], "unauthenticated")
        XCTAssertEqual(unknownUser["code"], wrongPassword["code"])
        XCTAssertEqual(unknownUser["message"], wrongPassword["message"], "the message must not tell the two apart either")
        // Still unauthenticated.
        let code = try await client.failure("friend.list")
        XCTAssertEqual(code, "unauthenticated")
    }

    func testHelloWithBadTokenIsUnauthenticated() async throws {
        let relay = try await startRelay()
        let client = try await relay.connect()
        let code = try await client.failure("hello", ["token": "definitely-not-a-token"])
        XCTAssertEqual(code, "unauthenticated")
        let missing = try await client.failure("hello")
        XCTAssertEqual(missing, "bad_request")
    }

    func testEverythingButAuthenticationNeedsSignIn() async throws {
        let relay = try await startRelay()
        let client = try await relay.connect()
        let requests: [(String, [(String, JSONValue)])] = [
            ("friend.request", [("username", "bob")]),
            ("friend.list", []),
            ("user.search", [("query", "a")]),
            ("session.start", []),
            ("session.list", []),
            ("alarm.raise", []),
            ("alarm.contacts", []),
            ("logout", []),
            ("pos", [("lat", 1), ("lon", 2)]),
        ]
        for (type, fields) in requests {
            let code = try await client.failure(type, fields)
            XCTAssertEqual(code, "unauthenticated", type)
        }
    }

    func testLogoutRevokesTheTokenAndKeepsTheConnection() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        let reply = try await alice.client.ok("logout")
        XCTAssertEqual(reply["type"], "ok")
        // The connection stays, unauthenticated.
        try await alice.client.ok("ping")
        let afterLogout = try await alice.client.failure("friend.list")
        XCTAssertEqual(afterLogout, "unauthenticated")
        // The token is revoked, on this connection and on any other.
        let again = try await alice.client.failure("hello", ["token": .string(alice.token)])
        XCTAssertEqual(again, "unauthenticated")
        let other = try await relay.connect()
        let elsewhere = try await other.failure("hello", ["token": .string(alice.token)])
        XCTAssertEqual(elsewhere, "unauthenticated")
        // The password still works, on the same connection.
        let login = try await alice.client.ok("login", ["username": .string(alice.username), "password": .string(alice.password)])
        XCTAssertEqual(login["user"]?["username"], .string(alice.username))
        try await alice.client.ok("friend.list")
    }

    /// Revoking a token closes the other connections signed in with it (1008); the one that logged out
    /// stays, unauthenticated; connections with other tokens are untouched.
    func testRevokingATokenClosesTheConnectionsSignedInWithIt() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        let sameToken = try await relay.device(of: alice, label: "same-token")
        let phone = try await relay.connect(label: "phone")
        let login = try await phone.ok("login", ["username": .string(alice.username), "password": .string(alice.password)])
        let phoneToken = try XCTUnwrap(login["token"]?.stringValue)
        let tablet = try await relay.connect(label: "tablet")
        try await tablet.ok("hello", ["token": .string(phoneToken)])

        try await alice.client.ok("logout")
        let closed = try await sameToken.closeCode()
        XCTAssertEqual(closed, 1008)
        let signedOut = try await alice.client.failure("friend.list")
        XCTAssertEqual(signedOut, "unauthenticated", "signed out, still connected")
        try await phone.ok("friend.list")

        let sessions = try await phone.ok("auth.sessions")
        let id = try XCTUnwrap(sessions["sessions"]?.arrayValue?.first { $0["current"] == true }?["id"])
        let other = try await relay.connect(label: "other")
        let otherLogin = try await other.ok("login", ["username": .string(alice.username), "password": .string(alice.password)])
        XCTAssertNotNil(otherLogin["token"])
        try await other.ok("auth.revoke", ["tokenId": id])
        for client in [phone, tablet] {
            let code = try await client.closeCode()
            XCTAssertEqual(code, 1008, client.label)
        }
        try await other.ok("friend.list")
    }

    func testLogoutRevokesOnlyThatToken() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        let phone = try await relay.connect()
        let login = try await phone.ok("login", ["username": .string(alice.username), "password": .string(alice.password)])
        let phoneToken = try XCTUnwrap(login["token"]?.stringValue)
        try await alice.client.ok("logout")
        let other = try await relay.connect()
        let hello = try await other.ok("hello", ["token": .string(phoneToken)])
        XCTAssertEqual(hello["user"]?["username"], .string(alice.username))
    }

    func testTooManyFailedSignInsCloseWith1008() async throws {
        let relay = try await startRelay { $0.limits.maxAuthenticationFailures = 3 }
        let client = try await relay.connect()
        for _ in 0..<2 {
            let code = try await client.failure("hello", ["token": "wrong"])
            XCTAssertEqual(code, "unauthenticated")
        }
        try await client.send(#"{"type":"hello","id":"last","token":"wrong"}"#)
        let code = try await client.closeCode()
        XCTAssertEqual(code, 1008)
    }

    func testNoAuthenticationInTimeClosesWith1008() async throws {
        let relay = try await startRelay { $0.limits.authenticationTimeout = 0.5 }
        let client = try await relay.connect()
        let code = try await client.closeCode(timeout: 10)
        XCTAssertEqual(code, 1008)
        try await client.waitUntilClosed()
    }

    func testAuthenticatedConnectionIsNotClosedByTheAuthTimer() async throws {
        // Long enough for a registration's password hashing, short enough to wait out twice.
        let relay = try await startRelay { $0.limits.authenticationTimeout = 1.5 }
        let unauthenticated = try await relay.connect(label: "idle")
        let alice = try await relay.user("alice")
        // Wait out two timeouts of fresh idle connections: by then alice's timer, had it not been cancelled
        // by her sign-in, would have fired too. Her connection is still open and working afterwards.
        let code = try await unauthenticated.closeCode(timeout: 10)
        XCTAssertEqual(code, 1008)
        let again = try await relay.connect(label: "idle-2")
        _ = try await again.closeCode(timeout: 10)
        try await alice.client.ok("friend.list")
        XCTAssertTrue(alice.client.isActive)
    }
}
