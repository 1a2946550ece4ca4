import HomewardCore
import HomewardProtocol
import XCTest

final class SessionRulesTests: XCTestCase {
    private let now = CoreFixture.now
    private let noPresence = CoreTestPresence()

    /// alice is friends with bob and carol; dave is nobody's friend.
    private func makeState() -> RelayState {
        CoreFixture.state(friends: [("alice", "bob"), ("alice", "carol")])
    }

    private func start(_ state: inout RelayState, _ owner: String = "alice", invite: [String]? = nil,
                       file: StaticString = #filePath, line: UInt = #line) throws -> String {
        let outcome = try state.startSession(owner, invite: invite, note: nil, now: now)
        return try XCTUnwrap(outcome.reply("session")?["sessionId"]?.stringValue, file: file, line: line)
    }

    // MARK: Start

    func testStartDefaultsToAllFriends() throws {
        var state = makeState()
        let outcome = try state.startSession("alice", invite: nil, note: "walking home", now: now)

        let session = try XCTUnwrap(state.ownSession(of: "alice"))
        XCTAssertEqual(session.owner, "alice")
        XCTAssertEqual(session.note, "walking home")
        XCTAssertEqual(session.startedAt, now)
        XCTAssertEqual(session.invitees, ["bob", "carol"])
        XCTAssertEqual(session.state(of: "bob"), .invited)
        XCTAssertEqual(session.state(of: "carol"), .invited)
        XCTAssertNil(session.state(of: "dave"))
        XCTAssertEqual(session.observers, [])

        XCTAssertEqual(outcome.recipients(of: "session.invite"), ["bob", "carol"])
        XCTAssertEqual(outcome.events.count, 2)
        let json = session.info(owner: state.profile("alice")).json
        XCTAssertEqual(outcome.sent("session.invite").first?.message, Message.event("session.invite", [("session", json)]))
        XCTAssertEqual(outcome.reply("session"), json)
        XCTAssertEqual(json["owner"], CoreFixture.user("alice"))
        XCTAssertEqual(json["invited"], ["bob", "carol"])
        XCTAssertEqual(json["observers"], [])
        XCTAssertEqual(json["note"], "walking home")
        XCTAssertEqual(json["startedAt"], .int(now))
        XCTAssertEqual(outcome.changes, [.saveSession(session)])
    }

    func testStartWithExplicitInviteInvitesOnlyThem() throws {
        var state = makeState()
        let outcome = try state.startSession("alice", invite: ["carol"], note: nil, now: now)
        XCTAssertEqual(state.ownSession(of: "alice")?.invitees, ["carol"])
        XCTAssertEqual(outcome.recipients(of: "session.invite"), ["carol"])
    }

    func testStartInvitingNonFriendIsForbidden() {
        var state = makeState()
        assertRelayError(try state.startSession("alice", invite: ["bob", "dave"], note: nil, now: now), .forbidden)
        XCTAssertNil(state.ownSession(of: "alice"), "a refused start creates no session")
        XCTAssertTrue(state.sessions.isEmpty)
    }

    func testStartInvitingUnknownUserIsNotFoundAndYourselfIsInvalid() {
        var state = makeState()
        assertRelayError(try state.startSession("alice", invite: ["zed"], note: nil, now: now), .notFound)
        assertRelayError(try state.startSession("alice", invite: ["alice"], note: nil, now: now), .invalid)
        XCTAssertTrue(state.sessions.isEmpty)
    }

    func testSecondActiveSessionIsConflict() throws {
        var state = makeState()
        let first = try start(&state)
        assertRelayError(try state.startSession("alice", invite: nil, note: nil, now: now + 1), .conflict)
        XCTAssertEqual(state.sessions.count, 1)
        XCTAssertEqual(state.ownSession(of: "alice")?.id, first)
    }

    // MARK: Accept

    func testAcceptMakesObserverAndNotifiesOwner() throws {
        var state = makeState()
        let id = try start(&state)
        let outcome = try state.acceptSession("bob", id, presence: noPresence)

        XCTAssertEqual(state.sessions[id]?.state(of: "bob"), .accepted)
        XCTAssertEqual(state.sessions[id]?.observers, ["bob"])
        XCTAssertEqual(outcome.events.count, 1)
        XCTAssertEqual(outcome.events.first?.to, "alice")
        XCTAssertEqual(outcome.events.first?.message,
                       Message.event("session.accepted", [("sessionId", .string(id)), ("by", "bob")]))
        XCTAssertEqual(outcome.replyKeys, ["session", "position"])
        XCTAssertEqual(outcome.reply("session")?["observers"], ["bob"])
        XCTAssertEqual(outcome.reply("position"), .null, "no last position known")
        XCTAssertEqual(outcome.changes, [.saveSession(state.sessions[id]!)])
    }

    func testAcceptReplyCarriesOwnersLastPosition() throws {
        var state = makeState()
        let id = try start(&state)
        let position = Position(lat: 57.7, lon: 11.97, acc: 8, ts: now - 10)
        let presence = CoreTestPresence(positions: ["alice": position])
        let outcome = try state.acceptSession("bob", id, presence: presence)
        XCTAssertEqual(outcome.reply("position"), position.json)
    }

    func testAcceptTwiceIsConflict() throws {
        var state = makeState()
        let id = try start(&state)
        _ = try state.acceptSession("bob", id, presence: noPresence)
        assertRelayError(try state.acceptSession("bob", id, presence: noPresence), .conflict)
        XCTAssertEqual(state.sessions[id]?.observers, ["bob"])
    }

    func testAcceptByNonInviteeIsForbidden() throws {
        var state = makeState()
        let id = try start(&state, invite: ["bob"])
        assertRelayError(try state.acceptSession("carol", id, presence: noPresence), .forbidden)  // a friend, not invited
        assertRelayError(try state.acceptSession("dave", id, presence: noPresence), .forbidden)   // a stranger
        assertRelayError(try state.acceptSession("alice", id, presence: noPresence), .forbidden)  // the owner
        XCTAssertEqual(state.sessions[id]?.observers, [])
    }

    func testAcceptUnknownSessionIsNotFound() {
        var state = makeState()
        assertRelayError(try state.acceptSession("bob", "s_nope", presence: noPresence), .notFound)
    }

    // MARK: Decline and leave

    func testDeclineNotifiesOwnerAndDoesNotObserve() throws {
        var state = makeState()
        let id = try start(&state)
        let outcome = try state.declineSession("bob", id)

        XCTAssertEqual(state.sessions[id]?.state(of: "bob"), .declined)
        XCTAssertEqual(state.sessions[id]?.observers, [])
        XCTAssertEqual(outcome.events.count, 1)
        XCTAssertEqual(outcome.events.first?.to, "alice")
        XCTAssertEqual(outcome.events.first?.message,
                       Message.event("session.declined", [("sessionId", .string(id)), ("by", "bob")]))
        XCTAssertEqual(outcome.changes, [.saveSession(state.sessions[id]!)])
        // Having declined, bob cannot accept the old invitation nor decline twice.
        assertRelayError(try state.acceptSession("bob", id, presence: noPresence), .forbidden)
        assertRelayError(try state.declineSession("bob", id), .conflict)
    }

    func testLeaveStopsObservingAndNotifiesOwner() throws {
        var state = makeState()
        let id = try start(&state)
        _ = try state.acceptSession("bob", id, presence: noPresence)
        let outcome = try state.leaveSession("bob", id)

        XCTAssertEqual(state.sessions[id]?.state(of: "bob"), .left)
        XCTAssertEqual(state.sessions[id]?.observers, [])
        XCTAssertEqual(outcome.events.count, 1)
        XCTAssertEqual(outcome.events.first?.to, "alice")
        XCTAssertEqual(outcome.events.first?.message,
                       Message.event("session.left", [("sessionId", .string(id)), ("by", "bob")]))
        XCTAssertEqual(outcome.changes, [.saveSession(state.sessions[id]!)])
    }

    func testLeaveWithoutFollowingIsForbidden() throws {
        var state = makeState()
        let id = try start(&state, invite: ["bob"])
        assertRelayError(try state.leaveSession("bob", id), .forbidden)   // only invited
        assertRelayError(try state.leaveSession("carol", id), .forbidden) // not invited
        XCTAssertEqual(state.sessions[id]?.state(of: "bob"), .invited)
    }

    // MARK: End

    func testEndByNonOwnerIsForbidden() throws {
        var state = makeState()
        let id = try start(&state)
        _ = try state.acceptSession("bob", id, presence: noPresence)
        assertRelayError(try state.endSession("bob", id, now: now), .forbidden)
        assertRelayError(try state.endSession("dave", id, now: now), .forbidden)
        XCTAssertNotNil(state.sessions[id])
    }

    func testEndSendsSessionEndedToAllInviteesAndRemovesSession() throws {
        var state = CoreFixture.state(friends: [("alice", "bob"), ("alice", "carol"), ("alice", "dave")])
        let id = try start(&state)
        _ = try state.acceptSession("bob", id, presence: noPresence)
        _ = try state.declineSession("dave", id)
        let outcome = try state.endSession("alice", id, now: now + 60)

        XCTAssertEqual(Set(outcome.recipients(of: "session.ended")), ["bob", "carol", "dave"])
        XCTAssertEqual(outcome.events.count, 3)
        for event in outcome.events {
            XCTAssertEqual(event.message, Message.event("session.ended", [("sessionId", .string(id)), ("reason", "ended")]))
        }
        XCTAssertEqual(outcome.changes, [.endSession(id: id, reason: "ended", at: now + 60)])
        XCTAssertNil(state.sessions[id])
        XCTAssertNil(state.ownSession(of: "alice"))
        XCTAssertEqual(state.listSessions("bob").reply("following"), [])
        XCTAssertEqual(state.listSessions("carol").reply("invites"), [])
        assertRelayError(try state.acceptSession("carol", id, presence: noPresence), .notFound)
        assertRelayError(try state.endSession("alice", id, now: now), .notFound)
        // The owner may start a new one.
        XCTAssertNoThrow(try state.startSession("alice", invite: nil, note: nil, now: now + 61))
    }

    // MARK: List

    func testListShowsOwnFollowingAndInvites() throws {
        // bob is invited by alice and follows carol; bob has his own session for dave.
        var state = CoreFixture.state(friends: [("alice", "bob"), ("carol", "bob"), ("bob", "dave")])
        let alices = try start(&state, "alice")
        let carols = try start(&state, "carol")
        let bobs = try start(&state, "bob", invite: ["dave"])
        _ = try state.acceptSession("bob", carols, presence: noPresence)

        let list = state.listSessions("bob")
        XCTAssertEqual(list.replyKeys, ["own", "following", "invites"])
        XCTAssertEqual(list.reply("own")?["sessionId"], .string(bobs))
        XCTAssertEqual(list.reply("own"), state.sessions[bobs]?.info(owner: state.profile("bob")).json)
        XCTAssertEqual(list.reply("following")?.coreTestElements?.map { $0["sessionId"] }, [.string(carols)])
        XCTAssertEqual(list.reply("following")?.coreTestElements?.first?["owner"], CoreFixture.user("carol"))
        XCTAssertEqual(list.reply("invites")?.coreTestElements?.map { $0["sessionId"] }, [.string(alices)])
        XCTAssertEqual(list.reply("invites")?.coreTestElements?.first?["owner"], CoreFixture.user("alice"))
        XCTAssertTrue(list.events.isEmpty)
        XCTAssertTrue(list.changes.isEmpty)
    }

    func testListWithoutSessionsIsEmpty() throws {
        var state = makeState()
        let id = try start(&state, invite: ["bob"])
        _ = try state.declineSession("bob", id)
        for user in ["bob", "dave"] {
            let list = state.listSessions(user)
            XCTAssertEqual(list.reply("own"), .null, user)
            XCTAssertEqual(list.reply("following"), [], user)
            XCTAssertEqual(list.reply("invites"), [], "declined invitations are not listed (\(user))")
        }
    }

    // MARK: Invite

    func testReinviteAfterDeclineIsFreshInvitation() throws {
        var state = makeState()
        let id = try start(&state, invite: ["bob"])
        _ = try state.declineSession("bob", id)

        let outcome = try state.inviteToSession("alice", id, invite: ["bob"])
        XCTAssertEqual(outcome.recipients(of: "session.invite"), ["bob"])
        XCTAssertEqual(state.sessions[id]?.state(of: "bob"), .invited)
        XCTAssertEqual(state.sessions[id]?.invitees, ["bob"])
        XCTAssertEqual(outcome.changes, [.saveSession(state.sessions[id]!)])
        XCTAssertEqual(state.listSessions("bob").reply("invites")?.coreTestElements?.count, 1)
        XCTAssertNoThrow(try state.acceptSession("bob", id, presence: noPresence))
        XCTAssertEqual(state.sessions[id]?.observers, ["bob"])
    }

    func testReinviteAfterLeaveIsFreshInvitation() throws {
        var state = makeState()
        let id = try start(&state, invite: ["bob"])
        _ = try state.acceptSession("bob", id, presence: noPresence)
        _ = try state.leaveSession("bob", id)
        let outcome = try state.inviteToSession("alice", id, invite: ["bob"])
        XCTAssertEqual(outcome.recipients(of: "session.invite"), ["bob"])
        XCTAssertEqual(state.sessions[id]?.state(of: "bob"), .invited)
    }

    func testInviteAddsInviteesWithoutDisturbingOthers() throws {
        var state = makeState()
        let id = try start(&state, invite: ["bob"])
        _ = try state.acceptSession("bob", id, presence: noPresence)

        let outcome = try state.inviteToSession("alice", id, invite: ["bob", "carol"])
        XCTAssertEqual(outcome.recipients(of: "session.invite"), ["carol"], "an observer is not invited again")
        XCTAssertEqual(state.sessions[id]?.state(of: "bob"), .accepted)
        XCTAssertEqual(state.sessions[id]?.state(of: "carol"), .invited)
        XCTAssertEqual(state.sessions[id]?.invitees, ["bob", "carol"])

        let again = try state.inviteToSession("alice", id, invite: ["carol"])
        XCTAssertEqual(again.events.count, 0, "a pending invitee is not invited twice")
        XCTAssertEqual(again.changes, [])
    }

    func testInviteByNonOwnerOrOfNonFriendIsForbidden() throws {
        var state = makeState()
        let id = try start(&state, invite: ["bob"])
        assertRelayError(try state.inviteToSession("bob", id, invite: ["carol"]), .forbidden)
        assertRelayError(try state.inviteToSession("alice", id, invite: ["dave"]), .forbidden)
        assertRelayError(try state.inviteToSession("alice", "s_nope", invite: ["carol"]), .notFound)
        XCTAssertEqual(state.sessions[id]?.invitees, ["bob"])
    }
}
