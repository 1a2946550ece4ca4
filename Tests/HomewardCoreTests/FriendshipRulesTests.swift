import HomewardCore
import HomewardProtocol
import XCTest

final class FriendshipRulesTests: XCTestCase {
    private let now = CoreFixture.now
    private let noPresence = CoreTestPresence()

    private func pending(_ state: RelayState, _ username: String) -> (incoming: [JSONValue], outgoing: [JSONValue]) {
        let list = state.friendList(username, presence: noPresence)
        return (list.reply("incoming")?.coreTestElements ?? [], list.reply("outgoing")?.coreTestElements ?? [])
    }

    // MARK: Request

    func testRequestCreatesPendingRequestNotifiesTargetAndRecordsChange() throws {
        var state = CoreFixture.state()
        let outcome = try state.requestFriend("alice", "bob", now: now)

        XCTAssertEqual(outcome.events.count, 1)
        XCTAssertEqual(outcome.events.first?.to, "bob")
        XCTAssertEqual(outcome.events.first?.message,
                       Message.event("friend.request", [("from", CoreFixture.user("alice"))]))
        XCTAssertEqual(outcome.changes, [.addFriendRequest(from: "alice", to: "bob", at: now)])
        XCTAssertEqual(outcome.reply("status"), "requested")
        XCTAssertFalse(state.areFriends("alice", "bob"))
        XCTAssertEqual(pending(state, "bob").incoming, [CoreFixture.user("alice")])
        XCTAssertEqual(pending(state, "alice").outgoing, [CoreFixture.user("bob")])
        XCTAssertEqual(pending(state, "alice").incoming, [])
    }

    // MARK: Accept

    func testAcceptMakesFriendsBothWaysAndSendsFriendAddedToBoth() throws {
        var state = CoreFixture.state()
        _ = try state.requestFriend("alice", "bob", now: now)
        let outcome = try state.acceptFriend("bob", "alice", now: now + 5)

        XCTAssertTrue(state.areFriends("alice", "bob"))
        XCTAssertTrue(state.areFriends("bob", "alice"))
        XCTAssertEqual(state.friends(of: "alice"), ["bob"])
        XCTAssertEqual(state.friends(of: "bob"), ["alice"])

        let added = outcome.sent("friend.added")
        XCTAssertEqual(added.count, 2)
        XCTAssertEqual(added.first { $0.to == "bob" }?.message["user"], CoreFixture.user("alice"))
        XCTAssertEqual(added.first { $0.to == "alice" }?.message["user"], CoreFixture.user("bob"))
        XCTAssertEqual(outcome.events.count, 2)

        XCTAssertTrue(outcome.changes.contains(.removeFriendRequest(from: "alice", to: "bob")))
        XCTAssertTrue(outcome.changes.contains(.addFriendship("bob", "alice", at: now + 5)))
        XCTAssertEqual(outcome.reply("status"), "friends")
        XCTAssertEqual(outcome.reply("user"), CoreFixture.user("alice"))
        XCTAssertEqual(pending(state, "bob").incoming, [])
        XCTAssertEqual(pending(state, "alice").outgoing, [])
    }

    func testMutualRequestBefriendsAtOnce() throws {
        var state = CoreFixture.state()
        _ = try state.requestFriend("alice", "bob", now: now)
        let outcome = try state.requestFriend("bob", "alice", now: now + 1)

        XCTAssertTrue(state.areFriends("alice", "bob"))
        XCTAssertEqual(outcome.recipients(of: "friend.request"), [])
        XCTAssertEqual(Set(outcome.recipients(of: "friend.added")), ["alice", "bob"])
        XCTAssertEqual(outcome.reply("status"), "friends")
        XCTAssertTrue(outcome.changes.contains(.addFriendship("bob", "alice", at: now + 1)))
        XCTAssertTrue(outcome.changes.contains(.removeFriendRequest(from: "alice", to: "bob")))
        XCTAssertFalse(outcome.changes.contains { if case .addFriendRequest = $0 { return true } else { return false } })
        XCTAssertEqual(pending(state, "alice").outgoing, [])
        XCTAssertEqual(pending(state, "bob").incoming, [])
    }

    // MARK: Decline

    func testDeclineSendsFriendDeclinedToRequesterAndDropsRequest() throws {
        var state = CoreFixture.state()
        _ = try state.requestFriend("alice", "bob", now: now)
        let outcome = try state.declineFriend("bob", "alice")

        XCTAssertEqual(outcome.events.count, 1)
        XCTAssertEqual(outcome.events.first?.to, "alice")
        XCTAssertEqual(outcome.events.first?.message, Message.event("friend.declined", [("username", "bob")]))
        XCTAssertEqual(outcome.changes, [.removeFriendRequest(from: "alice", to: "bob")])
        XCTAssertFalse(state.areFriends("alice", "bob"))
        XCTAssertEqual(pending(state, "bob").incoming, [])
        XCTAssertEqual(pending(state, "alice").outgoing, [])
        // The request is gone, so accepting it now fails and asking again is allowed.
        assertRelayError(try state.acceptFriend("bob", "alice", now: now), .notFound)
        XCTAssertNoThrow(try state.requestFriend("alice", "bob", now: now))
    }

    func testDeclineWithoutRequestIsNotFound() {
        var state = CoreFixture.state()
        assertRelayError(try state.declineFriend("bob", "alice"), .notFound)
    }

    // MARK: Remove

    func testRemoveEndsFriendshipAndSendsFriendRemovedToOtherSide() throws {
        var state = CoreFixture.state(friends: [("alice", "bob")])
        let outcome = try state.removeFriend("alice", "bob")

        XCTAssertFalse(state.areFriends("alice", "bob"))
        XCTAssertFalse(state.areFriends("bob", "alice"))
        XCTAssertEqual(state.friends(of: "alice"), [])
        XCTAssertEqual(state.friends(of: "bob"), [])
        XCTAssertEqual(outcome.events.count, 1)
        XCTAssertEqual(outcome.events.first?.to, "bob")
        XCTAssertEqual(outcome.events.first?.message, Message.event("friend.removed", [("username", "alice")]))
        XCTAssertEqual(outcome.changes, [.removeFriendship("alice", "bob")])
    }

    func testRemovingOwnerEndsTheirObservationOfOwnersSession() throws {
        var state = CoreFixture.state(friends: [("alice", "bob"), ("alice", "carol")])
        let start = try state.startSession("alice", invite: ["bob", "carol"], note: nil, now: now)
        let id = try XCTUnwrap(start.reply("session")?["sessionId"]?.stringValue)
        _ = try state.acceptSession("bob", id, presence: noPresence)
        XCTAssertEqual(state.audience(of: "alice"), ["bob"])

        // bob unfriends alice: bob stops observing alice's session.
        let outcome = try state.removeFriend("bob", "alice")

        let ended = outcome.sent("session.ended")
        XCTAssertEqual(ended.map(\.to), ["bob"])
        XCTAssertEqual(ended.first?.message, Message.event("session.ended", [("sessionId", .string(id)), ("reason", "unfriended")]))
        XCTAssertEqual(outcome.recipients(of: "friend.removed"), ["alice"])
        XCTAssertEqual(state.audience(of: "alice"), [])
        XCTAssertTrue(outcome.audienceChanged.contains("alice"))
        XCTAssertNil(state.sessions[id]?.state(of: "bob"))
        XCTAssertEqual(state.sessions[id]?.invitees, ["carol"], "the session itself goes on for the others")
        let saved = outcome.changes.compactMap { change -> FollowSession? in
            if case .saveSession(let session) = change { return session } else { return nil }
        }
        XCTAssertEqual(saved.map(\.invitees), [["carol"]])
        XCTAssertEqual(state.listSessions("bob").reply("following"), [])
        assertRelayError(try state.acceptSession("bob", id, presence: noPresence), .forbidden)
    }

    func testRemovingObserverEndsTheirObservationAndPendingInvite() throws {
        var state = CoreFixture.state(friends: [("alice", "bob")])
        let start = try state.startSession("alice", invite: nil, note: nil, now: now)
        _ = try XCTUnwrap(start.reply("session")?["sessionId"]?.stringValue)

        // bob only invited, not yet accepted; alice unfriends him.
        let outcome = try state.removeFriend("alice", "bob")

        XCTAssertEqual(outcome.recipients(of: "session.ended"), ["bob"])
        XCTAssertEqual(outcome.sent("session.ended").first?.message["reason"], "unfriended")
        XCTAssertEqual(state.listSessions("bob").reply("invites"), [])
        XCTAssertFalse(state.backlog(for: "bob").contains { $0["type"] == "session.invite" })
    }

    func testRemovingFriendEndsTheirAlarmRecipiency() throws {
        var state = CoreFixture.state(friends: [("alice", "bob"), ("alice", "carol")])
        let raise = try state.raiseAlarm("alice", Request.AlarmRaise(), presence: noPresence, now: now)
        let id = try XCTUnwrap(raise.reply("alarm")?["alarmId"]?.stringValue)
        XCTAssertEqual(state.audience(of: "alice"), ["bob", "carol"])

        let outcome = try state.removeFriend("bob", "alice")

        let cancelled = outcome.sent("alarm.cancelled")
        XCTAssertEqual(cancelled.map(\.to), ["bob"])
        XCTAssertEqual(cancelled.first?.message, Message.event("alarm.cancelled", [("alarmId", .string(id)), ("reason", "unfriended")]))
        XCTAssertEqual(state.alarms[id]?.recipients, ["carol"])
        XCTAssertEqual(state.audience(of: "alice"), ["carol"])
        XCTAssertTrue(outcome.audienceChanged.contains("alice"))
        XCTAssertFalse(state.backlog(for: "bob").contains { $0["type"] == "alarm" })
        assertRelayError(try state.acknowledgeAlarm("bob", id), .forbidden)
    }

    func testRemovingFriendDropsThemFromAlarmContacts() throws {
        var state = CoreFixture.state(friends: [("alice", "bob"), ("alice", "carol")])
        _ = try state.alarmContacts("alice", set: ["bob", "carol"])
        let outcome = try state.removeFriend("alice", "bob")
        XCTAssertTrue(outcome.changes.contains(.setAlarmContacts(owner: "alice", ["carol"])))
        XCTAssertEqual(try state.alarmContacts("alice", set: nil).reply("usernames"), ["carol"])
    }

    func testRemoveWithdrawsPendingRequest() throws {
        var state = CoreFixture.state()
        _ = try state.requestFriend("alice", "bob", now: now)
        let outcome = try state.removeFriend("alice", "bob")

        XCTAssertEqual(outcome.reply("status"), "withdrawn")
        XCTAssertEqual(outcome.changes, [.removeFriendRequest(from: "alice", to: "bob")])
        XCTAssertEqual(outcome.recipients(of: "friend.removed"), [])
        XCTAssertEqual(pending(state, "bob").incoming, [])
        XCTAssertEqual(pending(state, "alice").outgoing, [])
        XCTAssertEqual(state.backlog(for: "bob"), [])
        assertRelayError(try state.acceptFriend("bob", "alice", now: now), .notFound)
    }

    func testRemoveStrangerWithoutRequestIsNotFound() {
        var state = CoreFixture.state()
        assertRelayError(try state.removeFriend("alice", "bob"), .notFound)
    }

    // MARK: Errors

    func testRequestingYourselfIsInvalid() {
        var state = CoreFixture.state()
        assertRelayError(try state.requestFriend("alice", "alice", now: now), .invalid)
        assertRelayError(try state.acceptFriend("alice", "alice", now: now), .invalid)
        assertRelayError(try state.removeFriend("alice", "alice"), .invalid)
    }

    func testRequestingUnknownUserIsNotFound() {
        var state = CoreFixture.state()
        assertRelayError(try state.requestFriend("alice", "zed", now: now), .notFound)
        assertRelayError(try state.acceptFriend("alice", "zed", now: now), .notFound)
        assertRelayError(try state.removeFriend("alice", "zed"), .notFound)
    }

    func testRequestingExistingFriendIsConflict() {
        var state = CoreFixture.state(friends: [("alice", "bob")])
        assertRelayError(try state.requestFriend("alice", "bob", now: now), .conflict)
        assertRelayError(try state.requestFriend("bob", "alice", now: now), .conflict)
    }

    func testRequestingTwiceIsConflict() throws {
        var state = CoreFixture.state()
        _ = try state.requestFriend("alice", "bob", now: now)
        assertRelayError(try state.requestFriend("alice", "bob", now: now), .conflict)
        XCTAssertEqual(pending(state, "bob").incoming, [CoreFixture.user("alice")])
    }

    func testAcceptWithoutRequestIsNotFound() throws {
        var state = CoreFixture.state()
        assertRelayError(try state.acceptFriend("bob", "alice", now: now), .notFound)
        // Nor can the requester accept their own outgoing request.
        _ = try state.requestFriend("alice", "bob", now: now)
        assertRelayError(try state.acceptFriend("alice", "bob", now: now), .notFound)
        XCTAssertFalse(state.areFriends("alice", "bob"))
    }
}
