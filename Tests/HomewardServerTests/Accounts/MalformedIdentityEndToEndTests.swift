import HomewardProtocol
import XCTest

/// Review findings of issue 11: a username with a NUL signed in as a second identity of a real user,
/// and text with a NUL was cut at the NUL by storage.
final class MalformedIdentityEndToEndTests: EndToEndTestCase {
    func testLoginWithNULInTheNameIsWrongCredentials() async throws {
        let relay = try await startRelay()
        let kate = try await relay.user("kate")
        let client = try await relay.connect()
        for name in [kate.username + "\u{0}", kate.username + "\u{0}anything", kate.username.uppercased() + "\u{0}"] {
            let reply = try await client.request("login", ["username": .string(name), "password": .string(kate.password)])
            XCTAssertEqual(reply["type"], "error", name.debugDescription)
            XCTAssertEqual(reply["code"], "unauthenticated", name.debugDescription)
            XCTAssertEqual(reply["message"], "wrong username or password", "the same message as a wrong password")
        }
        let stillAnonymous = try await client.failure("friend.list")
        XCTAssertEqual(stillAnonymous, "unauthenticated")
        // The real name still works.
        try await client.ok("login", ["username": .string(kate.username), "password": .string(kate.password)])
    }

    func testRegisterRefusesControlAndBidiCharactersInTheName() async throws {
        let relay = try await startRelay()
        let client = try await relay.connect()
        for name in ["Ann\u{0}Evil", "Ann\u{1B}]0;owned\u{7}", "\u{202E}nnA"] {
            let code = try await client.failure("register", ["username": "annvalid", "password": "long enough pw",
                                                             "name": .string(name)])
            XCTAssertEqual(code, "bad_request", name.debugDescription)
        }
    }

    func testAlarmTextWithNULArrivesWholeAfterRestart() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        let bob = try await relay.user("bob")
        try await befriend(alice, bob)
        await bob.client.close()
        let text = "help\u{0} at the bridge"
        let raised = try await alice.client.ok("alarm.raise", ["text": .string(text), "to": [.string(bob.username)]])
        XCTAssertEqual(raised["alarm"]?["text"], .string(text), "acknowledged whole")

        try await relay.restart()

        let bob2 = try await relay.reconnect(bob)
        let alarm = try await bob2.client.event("alarm")
        XCTAssertEqual(alarm["alarm"]?["text"], .string(text), "delivered after the restart as acknowledged")
    }
}
