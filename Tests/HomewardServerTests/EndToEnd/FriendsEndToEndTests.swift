import Foundation
import HomewardCoreTestSupport
import HomewardProtocol
import XCTest

/// friend.request / accept / decline / remove / list and user.search.
final class FriendsEndToEndTests: EndToEndTestCase {
    func testRequestAndAccept() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice", name: "Alice")
        let bob = try await relay.user("bob", name: "Bob")

        let reply = try await alice.client.ok("friend.request", ["username": .string(bob.username)])
        XCTAssertEqual(reply["status"], "requested")
        let request = try await bob.client.event("friend.request")
        XCTAssertEqual(request["from"], ["username": .string(alice.username), "name": "Alice"])

        // Pending on both sides.
        let aliceList = try await alice.client.ok("friend.list")
        XCTAssertEqual(aliceList["outgoing"], [["username": .string(bob.username), "name": "Bob"]])
        XCTAssertEqual(aliceList["incoming"], [])
        let bobList = try await bob.client.ok("friend.list")
        XCTAssertEqual(bobList["incoming"], [["username": .string(alice.username), "name": "Alice"]])
        XCTAssertEqual(bobList["outgoing"], [])

        try await bob.client.ok("friend.accept", ["username": .string(alice.username)])
        let aliceAdded = try await alice.client.event("friend.added")
        XCTAssertEqual(aliceAdded["user"], ["username": .string(bob.username), "name": "Bob"])
        let bobAdded = try await bob.client.event("friend.added")
        XCTAssertEqual(bobAdded["user"], ["username": .string(alice.username), "name": "Alice"])

        let after = try await alice.client.ok("friend.list")
        XCTAssertEqual(after["friends"]?.arrayCount, 1)
        XCTAssertEqual(after["friends"]?[0]?["username"], .string(bob.username))
        XCTAssertEqual(after["incoming"], [])
        XCTAssertEqual(after["outgoing"], [])
        let bobAfter = try await bob.client.ok("friend.list")
        XCTAssertEqual(bobAfter["friends"]?[0]?["username"], .string(alice.username))
        XCTAssertEqual(bobAfter["incoming"], [])
    }

    func testFriendListShape() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice", name: "Alice")
        let bob = try await relay.user("bob", name: "Bob")
        let carol = try await relay.user("carol", name: "Carol")
        let dave = try await relay.user("dave", name: "Dave")
        try await befriend(alice, bob)
        try await befriend(alice, carol)
        try await dave.client.ok("friend.request", ["username": .string(alice.username)])
        try await alice.client.event("friend.request")
        await carol.client.close()
        try await alice.client.event("presence", where: { $0["username"] == .string(carol.username) && $0["online"] == false })

        let list = try await alice.client.ok("friend.list")
        guard case .array(let friends)? = list["friends"] else { return XCTFail("friends is not an array: \(list)") }
        XCTAssertEqual(friends.count, 2)
        let byName = Dictionary(uniqueKeysWithValues: friends.map { ($0["username"]?.stringValue ?? "?", $0) })
        let bobEntry = try XCTUnwrap(byName[bob.username])
        XCTAssertEqual(bobEntry["name"], "Bob")
        XCTAssertEqual(bobEntry["online"], true)
        XCTAssertNotNil(bobEntry["lastSeen"]?.numberValue, "lastSeen is a number of milliseconds: \(bobEntry)")
        let carolEntry = try XCTUnwrap(byName[carol.username])
        XCTAssertEqual(carolEntry["name"], "Carol")
        XCTAssertEqual(carolEntry["online"], false)
        let lastSeen = try XCTUnwrap(carolEntry["lastSeen"]?.numberValue)
        XCTAssertEqual(lastSeen, Date().timeIntervalSince1970 * 1000, accuracy: 60_000, "lastSeen is Unix milliseconds")
        for friend in friends {
            XCTAssertEqual(friend.keys.sorted(), ["lastSeen", "name", "online", "username"])
        }
        XCTAssertEqual(list["incoming"], [["username": .string(dave.username), "name": "Dave"]])
        XCTAssertEqual(list["outgoing"], [])
    }

    func testDecline() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        let bob = try await relay.user("bob")
        try await alice.client.ok("friend.request", ["username": .string(bob.username)])
        try await bob.client.event("friend.request")
        try await bob.client.ok("friend.decline", ["username": .string(alice.username)])
        let declined = try await alice.client.event("friend.declined")
        XCTAssertEqual(declined["username"], .string(bob.username))
        let aliceList = try await alice.client.ok("friend.list")
        XCTAssertEqual(aliceList["friends"], [])
        XCTAssertEqual(aliceList["outgoing"], [])
        let bobList = try await bob.client.ok("friend.list")
        XCTAssertEqual(bobList["incoming"], [])
        // Nothing to accept any more.
        let code = try await bob.client.failure("friend.accept", ["username": .string(alice.username)])
        XCTAssertEqual(code, "not_found")
        // Alice may ask again.
        let again = try await alice.client.ok("friend.request", ["username": .string(bob.username)])
        XCTAssertEqual(again["status"], "requested")
    }

    func testRemoveTellsTheOtherSide() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        let bob = try await relay.user("bob")
        try await befriend(alice, bob)
        try await alice.client.ok("friend.remove", ["username": .string(bob.username)])
        let removed = try await bob.client.event("friend.removed")
        XCTAssertEqual(removed["username"], .string(alice.username))
        let aliceList = try await alice.client.ok("friend.list")
        XCTAssertEqual(aliceList["friends"], [])
        let bobList = try await bob.client.ok("friend.list")
        XCTAssertEqual(bobList["friends"], [])
        // Removing again: no longer a friend.
        let code = try await alice.client.failure("friend.remove", ["username": .string(bob.username)])
        XCTAssertEqual(code, "not_found")
    }

    func testMutualRequestBefriendsAtOnce() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        let bob = try await relay.user("bob")
        try await alice.client.ok("friend.request", ["username": .string(bob.username)])
        try await bob.client.event("friend.request")
        let reply = try await bob.client.ok("friend.request", ["username": .string(alice.username)])
        XCTAssertEqual(reply["status"], "friends")
        let aliceAdded = try await alice.client.event("friend.added")
        XCTAssertEqual(aliceAdded["user"]?["username"], .string(bob.username))
        let bobAdded = try await bob.client.event("friend.added")
        XCTAssertEqual(bobAdded["user"]?["username"], .string(alice.username))
        // Alice got no friend.request from bob: it became the friendship instead.
        let stray = try await alice.client.eventsAfterRoundTrip("friend.request")
        XCTAssertEqual(stray, [])
        let list = try await alice.client.ok("friend.list")
        XCTAssertEqual(list["friends"]?.arrayCount, 1)
        XCTAssertEqual(list["outgoing"], [])
        XCTAssertEqual(list["incoming"], [])
    }

    func testFriendErrors() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        let bob = try await relay.user("bob")
        let carol = try await relay.user("carol")
        let nobody = TestRelay.uniqueUsername("nobody")

        var code = try await alice.client.failure("friend.request", ["username": .string(nobody)])
        XCTAssertEqual(code, "not_found", "request to an unknown user")
        code = try await alice.client.failure("friend.request", ["username": .string(alice.username)])
        XCTAssertEqual(code, "bad_request", "request to yourself")
        code = try await alice.client.failure("friend.request", ["username": .string(alice.username.uppercased())])
        XCTAssertEqual(code, "bad_request", "request to yourself, other case")
        code = try await alice.client.failure("friend.request")
        XCTAssertEqual(code, "bad_request", "missing username")
        code = try await alice.client.failure("friend.request", ["username": 7])
        XCTAssertEqual(code, "bad_request", "username not a string")
        code = try await alice.client.failure("friend.request", ["username": "x"])
        XCTAssertEqual(code, "bad_request", "invalid username")

        try await alice.client.ok("friend.request", ["username": .string(bob.username)])
        code = try await alice.client.failure("friend.request", ["username": .string(bob.username)])
        XCTAssertEqual(code, "conflict", "already requested")
        try await befriend(alice, carol)
        code = try await alice.client.failure("friend.request", ["username": .string(carol.username)])
        XCTAssertEqual(code, "conflict", "already friends")
        code = try await carol.client.failure("friend.request", ["username": .string(alice.username)])
        XCTAssertEqual(code, "conflict", "already friends, other side")

        code = try await alice.client.failure("friend.accept", ["username": .string(bob.username)])
        XCTAssertEqual(code, "not_found", "accepting a request that was never made (alice asked bob, not the reverse)")
        code = try await alice.client.failure("friend.accept", ["username": .string(nobody)])
        XCTAssertEqual(code, "not_found", "accepting an unknown user")
        code = try await alice.client.failure("friend.accept", ["username": .string(alice.username)])
        XCTAssertEqual(code, "bad_request", "accepting yourself")
        code = try await alice.client.failure("friend.accept", ["username": .string(carol.username)])
        XCTAssertEqual(code, "conflict", "accepting someone already a friend")
        code = try await alice.client.failure("friend.decline", ["username": .string(bob.username)])
        XCTAssertEqual(code, "not_found", "declining a request that was never made")
        code = try await alice.client.failure("friend.decline", ["username": .string(nobody)])
        XCTAssertEqual(code, "not_found", "declining an unknown user")
        code = try await alice.client.failure("friend.decline")
        XCTAssertEqual(code, "bad_request", "declining without a username")
        code = try await bob.client.failure("friend.remove", ["username": .string(carol.username)])
        XCTAssertEqual(code, "not_found", "removing a non-friend")
        code = try await bob.client.failure("friend.remove", ["username": .string(nobody)])
        XCTAssertEqual(code, "not_found", "removing an unknown user")
        code = try await bob.client.failure("friend.remove", ["username": .string(bob.username)])
        XCTAssertEqual(code, "bad_request", "removing yourself")
        code = try await bob.client.failure("friend.remove", ["username": []])
        XCTAssertEqual(code, "bad_request", "username of the wrong type")

        // None of it changed anything.
        let list = try await alice.client.ok("friend.list")
        XCTAssertEqual(list["friends"]?.arrayCount, 1)
        XCTAssertEqual(list["outgoing"]?.arrayCount, 1)
        let bobList = try await bob.client.ok("friend.list")
        XCTAssertEqual(bobList["incoming"]?.arrayCount, 1)
    }

    func testPendingRequestIsDeliveredAtNextSignIn() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice", name: "Alice")
        let bob = try await relay.user("bob")
        await bob.client.close()
        try await alice.client.ok("friend.request", ["username": .string(bob.username)])
        let bobAgain = try await relay.reconnect(bob)
        let request = try await bobAgain.client.event("friend.request")
        XCTAssertEqual(request["from"], ["username": .string(alice.username), "name": "Alice"])
        try await bobAgain.client.ok("friend.accept", ["username": .string(alice.username)])
        try await alice.client.event("friend.added")
    }

    func testEventsReachEveryDevice() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        let bob = try await relay.user("bob")
        let bobPhone = try await relay.device(of: bob, label: "bob-phone")
        try await alice.client.ok("friend.request", ["username": .string(bob.username)])
        try await bob.client.event("friend.request")
        try await bobPhone.event("friend.request")
        try await bobPhone.ok("friend.accept", ["username": .string(alice.username)])
        try await bob.client.event("friend.added")
        try await bobPhone.event("friend.added")
        try await alice.client.event("friend.added")
        // Each device got each event once.
        let extraLaptop = try await bob.client.eventsAfterRoundTrip("friend.request")
        let extraPhone = try await bobPhone.eventsAfterRoundTrip("friend.added")
        XCTAssertEqual(extraLaptop, [])
        XCTAssertEqual(extraPhone, [])
    }

    func testUserSearch() async throws {
        let relay = try await startRelay()
        let searcher = try await relay.user("searcher")
        let prefix = TestRelay.uniqueUsername("srch") + "x"
        for suffix in ["alpha", "alps", "beta"] {
            let client = try await relay.connect()
            try await client.ok("register", ["username": .string(prefix + suffix), "password": "long enough pw",
                                             "name": .string("Name " + suffix)])
        }
        let reply = try await searcher.client.ok("user.search", ["query": .string(prefix + "al")])
        XCTAssertEqual(reply["users"], [
            ["username": .string(prefix + "alpha"), "name": "Name alpha"],
            ["username": .string(prefix + "alps"), "name": "Name alps"],
        ])
        let upper = try await searcher.client.ok("user.search", ["query": .string((prefix + "B").uppercased())])
        XCTAssertEqual(upper["users"], [["username": .string(prefix + "beta"), "name": "Name beta"]])
        let none = try await searcher.client.ok("user.search", ["query": "zzzzz-no-such"])
        XCTAssertEqual(none["users"], [])
        let all = try await searcher.client.ok("user.search", ["query": .string(prefix)])
        XCTAssertEqual(all["users"]?.arrayCount, 3)
        let missing = try await searcher.client.failure("user.search")
        XCTAssertEqual(missing, "bad_request")
        let wrongType = try await searcher.client.failure("user.search", ["query": 3])
        XCTAssertEqual(wrongType, "bad_request")
    }

    func testUserSearchReturnsAtMostTwenty() async throws {
        let relay = try await startRelay()
        let searcher = try await relay.user("searcher")
        let prefix = TestRelay.uniqueUsername("many") + "x"
        // One after another: each connection must sign in within the relay's sign-in timeout, and 23
        // registrations at once queue behind the password-hashing pool (4 at a time) on a loaded machine.
        for index in 0..<23 {
            let client = try await relay.connect()
            try await client.ok("register", ["username": .string(prefix + String(format: "%02d", index)),
                                             "password": "long enough pw"], timeout: 60)
            await client.close()
        }
        let reply = try await searcher.client.ok("user.search", ["query": .string(prefix)])
        guard case .array(let users)? = reply["users"] else { return XCTFail("users is not an array: \(reply)") }
        XCTAssertEqual(users.count, 20)
        for user in users {
            XCTAssertTrue(user["username"]?.stringValue?.hasPrefix(prefix) ?? false, "\(user)")
        }
    }
}
