import HomewardProtocol
import XCTest

/// `user.block` / `user.unblock` / `user.blocks`, and the friend request flood of issue 11.
final class BlockingEndToEndTests: EndToEndTestCase {
    func testRequestWithdrawFloodRingsOnce() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        let mallory = try await relay.user("mallory")
        for _ in 0..<40 {
            try await mallory.client.ok("friend.request", ["username": .string(alice.username)])
            try await mallory.client.ok("friend.remove", ["username": .string(alice.username)])
        }
        try await mallory.client.ok("friend.request", ["username": .string(alice.username)])
        let events = try await alice.client.eventsAfterRoundTrip("friend.request")
        XCTAssertEqual(events.count, 1, "one event for 41 requests")
        let list = try await alice.client.ok("friend.list")
        XCTAssertEqual(list["incoming"], [["username": .string(mallory.username), "name": .string(mallory.username)]])
    }

    func testBlockedRequestsReachNobodyAndTheBlockSurvivesARestart() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        let mallory = try await relay.user("mallory")
        try await befriend(alice, mallory)
        try await alice.client.ok("user.block", ["username": .string(mallory.username)])
        try await mallory.client.event("friend.removed")

        try await relay.restart()
        let alice2 = try await relay.reconnect(alice)
        let mallory2 = try await relay.reconnect(mallory)

        let blocks = try await alice2.client.ok("user.blocks")
        XCTAssertEqual(blocks["users"], [["username": .string(mallory.username), "name": .string(mallory.username)]])
        let asked = try await mallory2.client.ok("friend.request", ["username": .string(alice.username)])
        XCTAssertEqual(asked["status"], "requested", "the answer an unblocked user gets")
        let again = try await mallory2.client.failure("friend.request", ["username": .string(alice.username)])
        XCTAssertEqual(again, "conflict", "already asked, as for anyone")
        let events = try await alice2.client.eventsAfterRoundTrip("friend.request")
        XCTAssertEqual(events, [], "no event to the blocker")
        let list = try await alice2.client.ok("friend.list")
        XCTAssertEqual(list["incoming"], [])
        XCTAssertEqual(list["friends"], [])

        try await alice2.client.ok("user.unblock", ["username": .string(mallory.username)])
        let unblocked = try await alice2.client.ok("user.blocks")
        XCTAssertEqual(unblocked["users"], [])
    }

    func testBlockBadInput() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        let cases: [(String, [(String, JSONValue)], String)] = [
            ("user.block", [], "bad_request"),
            ("user.block", [("username", "a\u{0}bc")], "bad_request"),
            ("user.block", [("username", .string(alice.username))], "bad_request"),
            ("user.block", [("username", "nobody-here")], "not_found"),
            ("user.unblock", [("username", "nobody-here")], "not_found"),
            ("user.unblock", [("username", 7)], "bad_request"),
        ]
        for (type, fields, expected) in cases {
            let code = try await alice.client.failure(type, fields)
            XCTAssertEqual(code, expected, "\(type) \(fields)")
        }
        let anonymous = try await relay.connect()
        let code = try await anonymous.failure("user.blocks")
        XCTAssertEqual(code, "unauthenticated")
    }
}
