import HomewardCore
import HomewardProtocol
import XCTest

/// Issue 11: a stranger could push a friend request event 40 times in 0.3 s (request, withdraw,
/// request). Repeats are now quiet, and a user can block another without the other finding out.
final class BlockingRulesTests: XCTestCase {
    private let now = CoreFixture.now
    private let noPresence = CoreTestPresence()
    private static let users = ["alice", "bob", "carol", "dave", "mallory"]

    private func pending(_ state: RelayState, _ username: String) -> (incoming: [JSONValue], outgoing: [JSONValue]) {
        let list = state.friendList(username, presence: noPresence)
        return (list.reply("incoming")?.coreTestElements ?? [], list.reply("outgoing")?.coreTestElements ?? [])
    }

    // MARK: Repeated requests

    func testRequestWithdrawRequestPushesOneEventPerCooldown() throws {
        var state = CoreFixture.state(Self.users)
        var events = 0
        for step in 0..<40 {
            let request = try state.requestFriend("mallory", "alice", now: now + Int64(step))
            XCTAssertEqual(request.reply("status"), "requested", "every repeat is answered as a request")
            events += request.recipients(of: "friend.request").count
            _ = try state.removeFriend("mallory", "alice")
        }
        XCTAssertEqual(events, 1, "one friend.request event, not 40")
    }

    func testAQuietRepeatIsStillARealRequest() throws {
        var state = CoreFixture.state(Self.users)
        _ = try state.requestFriend("bob", "alice", now: now)
        _ = try state.declineFriend("alice", "bob")
        let again = try state.requestFriend("bob", "alice", now: now + 1000)
        XCTAssertEqual(again.events.count, 0)
        XCTAssertEqual(again.changes, [.addFriendRequest(from: "bob", to: "alice", at: now + 1000)])
        XCTAssertEqual(pending(state, "alice").incoming, [CoreFixture.user("bob")], "alice finds it in her list")
        XCTAssertTrue(state.backlog(for: "alice").contains { $0["type"] == "friend.request" }, "and at her next sign-in")
        _ = try state.acceptFriend("alice", "bob", now: now + 2000)
        XCTAssertTrue(state.areFriends("alice", "bob"))
    }

    func testFriendsWhoPartedAskAgainAsAnyoneWould() throws {
        var state = CoreFixture.state(Self.users, friends: [("alice", "bob")])
        _ = try state.removeFriend("alice", "bob")
        let again = try state.requestFriend("alice", "bob", now: now + 1)
        XCTAssertEqual(again.recipients(of: "friend.request"), ["bob"], "the accepted request cleared the cooldown")
    }

    func testTheCooldownEndsAndOtherPairsAreNotAffected() throws {
        var state = CoreFixture.state(Self.users)
        _ = try state.requestFriend("bob", "alice", now: now)
        _ = try state.removeFriend("bob", "alice")
        let other = try state.requestFriend("bob", "carol", now: now + 1)
        XCTAssertEqual(other.recipients(of: "friend.request"), ["carol"])
        let later = try state.requestFriend("bob", "alice", now: now + 10 * 60 * 1000)
        XCTAssertEqual(later.recipients(of: "friend.request"), ["alice"], "after the cooldown a request rings again")
    }

    // MARK: Block

    func testBlockEndsFriendshipAndOwnRequestAndHidesTheirs() throws {
        var state = CoreFixture.state(Self.users, friends: [("alice", "bob")])
        _ = try state.requestFriend("alice", "carol", now: now)
        _ = try state.requestFriend("dave", "alice", now: now)

        let blockBob = try state.block("alice", "bob", now: now + 1)
        XCTAssertFalse(state.areFriends("alice", "bob"))
        XCTAssertEqual(blockBob.recipients(of: "friend.removed"), ["bob"], "bob sees an unfriending, nothing more")
        XCTAssertTrue(blockBob.changes.contains(.addBlock(blocker: "alice", blocked: "bob", at: now + 1)))

        _ = try state.block("alice", "carol", now: now + 2)
        _ = try state.block("alice", "dave", now: now + 3)
        XCTAssertEqual(pending(state, "alice").outgoing, [], "alice's request to carol is withdrawn")
        XCTAssertEqual(pending(state, "alice").incoming, [], "dave's request no longer shows to alice")
        XCTAssertEqual(pending(state, "dave").outgoing, [CoreFixture.user("alice")], "dave still sees it pending")
        XCTAssertFalse(state.backlog(for: "alice").contains { $0["type"] == "friend.request" })
        assertRelayError(try state.acceptFriend("alice", "dave", now: now), .notFound)

        let list = state.blockList("alice")
        XCTAssertEqual(list.reply("users"), .array(["bob", "carol", "dave"].map(CoreFixture.user)))
    }

    func testABlockedUsersRequestIsAnsweredAsUsualButReachesNobody() throws {
        var state = CoreFixture.state(Self.users)
        _ = try state.block("alice", "mallory", now: now)
        let request = try state.requestFriend("mallory", "alice", now: now + 1)
        var fresh = CoreFixture.state(Self.users)
        let unblocked = try fresh.requestFriend("mallory", "alice", now: now + 1)
        XCTAssertEqual(request.reply("status"), unblocked.reply("status"))
        XCTAssertEqual(request.replyKeys, unblocked.replyKeys)
        XCTAssertEqual(request.events.count, 0)
        XCTAssertEqual(pending(state, "alice").incoming, [])
        XCTAssertEqual(pending(state, "mallory").outgoing, [CoreFixture.user("alice")])
        // Asking again looks like asking again, and withdrawing works.
        assertRelayError(try state.requestFriend("mallory", "alice", now: now + 2), .conflict)
        let withdrawn = try state.removeFriend("mallory", "alice")
        XCTAssertEqual(withdrawn.changes, [.removeFriendRequest(from: "mallory", to: "alice")])
        XCTAssertEqual(pending(state, "mallory").outgoing, [])
    }

    func testUnblockShowsARequestSentWhileBlockedWithoutAnEvent() throws {
        var state = CoreFixture.state(Self.users)
        _ = try state.block("alice", "mallory", now: now)
        _ = try state.requestFriend("mallory", "alice", now: now + 1)
        let unblock = try state.unblock("alice", "mallory")
        XCTAssertEqual(unblock.events.count, 0)
        XCTAssertEqual(unblock.changes, [.removeBlock(blocker: "alice", blocked: "mallory")])
        XCTAssertEqual(pending(state, "alice").incoming, [CoreFixture.user("mallory")])
        assertRelayError(try state.unblock("alice", "mallory"), .notFound)
    }

    func testBlockBadInput() throws {
        var state = CoreFixture.state(Self.users)
        assertRelayError(try state.block("alice", "alice", now: now), .invalid)
        assertRelayError(try state.block("alice", "nobody", now: now), .notFound)
        assertRelayError(try state.unblock("alice", "bob"), .notFound)
        _ = try state.block("alice", "bob", now: now)
        XCTAssertTrue(try state.block("alice", "bob", now: now + 1).changes.isEmpty, "blocking twice changes nothing")
        assertRelayError(try state.requestFriend("alice", "bob", now: now), .conflict)
    }

    func testBlocksAndHiddenRequestsSurviveALoad() throws {
        var stored = StoredState()
        stored.users = ["alice", "mallory"].map { UserProfile(username: $0, name: $0.capitalized) }
        stored.blocks = [(blocker: "alice", blocked: "mallory")]
        stored.friendRequests = [(from: "mallory", to: "alice")]
        let state = RelayState(stored)
        XCTAssertTrue(state.hasBlocked("alice", "mallory"))
        XCTAssertEqual(pending(state, "alice").incoming, [])
        XCTAssertEqual(pending(state, "mallory").outgoing, [CoreFixture.user("alice")])
    }
}
