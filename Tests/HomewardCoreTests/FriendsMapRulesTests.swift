import HomewardCore
import HomewardProtocol
import XCTest

/// The friends' map (issue 15) as values: who is in an owner's audience with standing shares and
/// pauses, pause ends on a manual clock, meeting points and messages queued for offline friends.
final class FriendsMapRulesTests: XCTestCase {
    private let now = CoreFixture.now

    /// alice is friends with bob, carol and dave; bob and carol are friends.
    private func friends() -> RelayState {
        CoreFixture.state(["alice", "bob", "carol", "dave", "erin"],
                          friends: [("alice", "bob"), ("alice", "carol"), ("alice", "dave"), ("bob", "carol")])
    }

    private func sharing(_ reply: [(String, JSONValue)]) throws -> LocationSharingReply {
        try XCTUnwrap(LocationSharingReply(json: .object(reply)))
    }

    // MARK: Standing share

    func testOnlyChosenFriendsReceiveAndTheyAreTold() throws {
        var state = friends()
        let outcome = try state.shareAlways("alice", with: ["bob", "carol"])
        XCTAssertEqual(state.audience(of: "alice"), ["bob", "carol"])
        XCTAssertTrue(state.owners.contains("alice"), "a standing share makes alice an owner whose audience the presence table keeps")
        XCTAssertEqual(outcome.recipients(of: "friend.sharing"), ["bob", "carol"])
        XCTAssertEqual(outcome.changes, [.setStandingShare(owner: "alice", ["bob", "carol"])])
        XCTAssertEqual(try sharing(outcome.reply).with, ["bob", "carol"])

        let replaced = try state.shareAlways("alice", with: ["carol", "dave"])
        XCTAssertEqual(state.audience(of: "alice"), ["carol", "dave"])
        XCTAssertEqual(replaced.sent("friend.sharing").map { "\($0.to):\($0.message["sharing"] == .bool(true))" }, ["dave:true", "bob:false"])
        XCTAssertEqual(try sharing(state.shareAlways("alice", with: nil).reply).with, ["carol", "dave"], "without with: read back")

        _ = try state.shareAlways("alice", with: [])
        XCTAssertEqual(state.audience(of: "alice"), [], "an empty list stops")
        XCTAssertFalse(state.owners.contains("alice"))
    }

    func testStandingShareRefusesNonFriendsYourselfAndUnknownUsersAndChangesNothing() throws {
        var state = friends()
        _ = try state.shareAlways("alice", with: ["bob"])
        assertRelayError(try state.shareAlways("alice", with: ["bob", "erin"]), .forbidden)
        assertRelayError(try state.shareAlways("alice", with: ["alice"]), .invalid)
        assertRelayError(try state.shareAlways("alice", with: ["nobody"]), .notFound)
        XCTAssertEqual(state.audience(of: "alice"), ["bob"])
    }

    func testFriendLocationOnlyWhenSharedWithYouAndNotPaused() throws {
        var state = friends()
        let here = Position(lat: 57.7, lon: 11.97, ts: now - 4000)
        let presence = CoreTestPresence(positions: ["alice": here])
        assertRelayError(try state.friendLocation("bob", "alice", presence: presence, now: now), .forbidden)
        _ = try state.shareAlways("alice", with: ["bob"])
        let reply = try XCTUnwrap(FriendLocationReply(json: .object(state.friendLocation("bob", "alice", presence: presence, now: now).reply)))
        XCTAssertEqual(reply.position, here)
        XCTAssertEqual(reply.age, 4000)
        assertRelayError(try state.friendLocation("carol", "alice", presence: presence, now: now), .forbidden)
        assertRelayError(try state.friendLocation("erin", "alice", presence: presence, now: now), .forbidden)
        assertRelayError(try state.friendLocation("bob", "nobody", presence: presence, now: now), .notFound)
        _ = try state.pauseLocation("alice", from: "bob", until: nil)
        assertRelayError(try state.friendLocation("bob", "alice", presence: presence, now: now), .forbidden)
    }

    func testRemovingOrBlockingAFriendEndsTheShareAtOnce() throws {
        var state = friends()
        _ = try state.shareAlways("alice", with: ["bob", "carol"])
        _ = try state.shareAlways("bob", with: ["alice"])
        _ = try state.pauseLocation("bob", from: "alice", until: nil)
        let removed = try state.removeFriend("bob", "alice")
        XCTAssertEqual(state.audience(of: "alice"), ["carol"])
        XCTAssertEqual(state.audience(of: "bob"), [])
        XCTAssertTrue(removed.audienceChanged.isSuperset(of: ["alice", "bob"]))
        XCTAssertTrue(removed.changes.contains(.setStandingShare(owner: "alice", ["carol"])))
        XCTAssertTrue(removed.changes.contains(.removePause(owner: "bob", from: "alice")))
        let blocked = try state.block("carol", "alice", now: now)
        XCTAssertEqual(state.audience(of: "alice"), [])
        XCTAssertTrue(blocked.changes.contains(.setStandingShare(owner: "alice", [])))
    }

    // MARK: Pauses

    func testAPauseFromEveryoneLeavesOnlyAlarmRecipients() throws {
        var state = friends()
        _ = try state.shareAlways("alice", with: ["bob"])
        _ = try state.startSession("alice", SessionOptions(invite: ["carol"]), now: now)
        _ = try state.acceptSession("carol", "s_1", presence: CoreTestPresence())
        _ = try state.createShare("alice", "s_1", ttl: nil, token: "tok", now: now)
        XCTAssertEqual(state.audience(of: "alice").count, 3, "bob, carol and the viewers")

        let paused = try state.pauseLocation("alice", from: nil, until: nil)
        XCTAssertEqual(state.audience(of: "alice"), [], "observers, viewers and standing friends all stop")
        XCTAssertEqual(paused.changes, [.savePause(LocationPause(owner: "alice", from: nil, until: nil))])
        XCTAssertNil(try sharing(paused.reply).alarmRecipients)

        let raised = try state.raiseAlarm("alice", Request.AlarmRaise(to: ["dave"]), presence: CoreTestPresence(), now: now)
        XCTAssertEqual(state.audience(of: "alice"), ["dave"], "an alarm carries positions to its recipients whatever the pause")
        XCTAssertEqual(AlarmRaiseReply(json: .object(raised.reply))?.pauseOverridden, true, "the walker is told")
        XCTAssertEqual(try sharing(state.pauseLocation("alice", from: nil, until: nil).reply).alarmRecipients, ["dave"])
    }

    func testAPauseFromOneFriendHidesOnlyFromThem() throws {
        var state = friends()
        _ = try state.shareAlways("alice", with: ["bob", "carol"])
        _ = try state.pauseLocation("alice", from: "bob", until: nil)
        XCTAssertEqual(state.audience(of: "alice"), ["carol"])
        assertRelayError(try state.pauseLocation("alice", from: "erin", until: nil), .forbidden)
        assertRelayError(try state.pauseLocation("alice", from: "alice", until: nil), .invalid)
        assertRelayError(try state.pauseLocation("alice", from: "nobody", until: nil), .notFound)
        let resumed = try state.resumeLocation("alice", from: "bob")
        XCTAssertEqual(state.audience(of: "alice"), ["bob", "carol"])
        XCTAssertEqual(resumed.changes, [.removePause(owner: "alice", from: "bob")])
        XCTAssertEqual(try state.resumeLocation("alice", from: "bob").changes, [], "resuming without a pause changes nothing")
    }

    func testAPausedOwnersLastPositionIsNotInTheAcceptReply() throws {
        var state = friends()
        _ = try state.startSession("alice", SessionOptions(invite: ["bob"]), now: now)
        _ = try state.pauseLocation("alice", from: nil, until: nil)
        let presence = CoreTestPresence(positions: ["alice": Position(lat: 1, lon: 2, ts: now)])
        let reply = try XCTUnwrap(SessionAcceptReply(json: .object(state.acceptSession("bob", "s_1", presence: presence).reply)))
        XCTAssertNil(reply.position)
    }

    func testLostContactCarriesNoPositionWhilePaused() throws {
        var state = friends()
        _ = try state.startSession("alice", SessionOptions(invite: ["bob"]), now: now)
        _ = try state.acceptSession("bob", "s_1", presence: CoreTestPresence())
        _ = try state.pauseLocation("alice", from: "carol", until: nil)
        state.ownerWentOffline("alice", at: now)
        let presence = CoreTestPresence(positions: ["alice": Position(lat: 1, lon: 2, ts: now)])
        let lost = state.fireDue(now: now + state.safety.lostContactGrace, presence: presence)
        XCTAssertEqual(lost.recipients(of: "session.lost"), ["bob"])
        XCTAssertEqual(lost.sent("session.lost").first?.message["lastPosition"], .null)
    }

    /// The pause's end is a deadline like any other: nothing before it, resumed at it, on a manual clock.
    func testAPauseEndsOnTimeAndTheWalkerIsTold() throws {
        var state = friends()
        _ = try state.shareAlways("alice", with: ["bob"])
        let until = now + 60_000
        _ = try state.pauseLocation("alice", from: nil, until: until)
        XCTAssertEqual(state.nextDeadline(), until)
        let early = state.fireDue(now: until - 1, presence: CoreTestPresence())
        XCTAssertTrue(early.events.isEmpty && early.changes.isEmpty)
        XCTAssertEqual(state.audience(of: "alice"), [])

        let due = state.fireDue(now: until, presence: CoreTestPresence())
        XCTAssertEqual(state.audience(of: "alice"), ["bob"])
        XCTAssertEqual(due.changes, [.removePause(owner: "alice", from: nil)])
        XCTAssertEqual(due.recipients(of: "location.resumed"), ["alice"])
        XCTAssertTrue(due.audienceChanged.contains("alice"))
        XCTAssertNil(state.nextDeadline())
    }

    func testAStoredPauseSurvivesARestartAndStillEnds() throws {
        var state = friends()
        _ = try state.shareAlways("alice", with: ["bob"])
        _ = try state.pauseLocation("alice", from: "bob", until: now + 1000)
        var stored = StoredState()
        stored.users = ["alice", "bob"].map { UserProfile(username: $0, name: $0) }
        stored.friendships = [("alice", "bob")]
        stored.standingShares = ["alice": ["bob"]]
        stored.pauses = [LocationPause(owner: "alice", from: "bob", until: now + 1000)]
        var restarted = RelayState(stored)
        XCTAssertEqual(restarted.audience(of: "alice"), [])
        XCTAssertEqual(restarted.nextDeadline(), now + 1000)
        _ = restarted.fireDue(now: now + 5000, presence: CoreTestPresence())
        XCTAssertEqual(restarted.audience(of: "alice"), ["bob"], "a pause that ended while the relay was down ends at start")
    }

    // MARK: Meeting points

    func testAMeetingPointReachesOnlineFriendsNowAndOfflineOnesAtSignIn() throws {
        var state = friends()
        let presence = CoreTestPresence(online: ["bob"])
        let proposal = MeetingProposal(to: ["bob", "carol"], lat: 57.7, lon: 11.97, name: "the fountain", time: now + 3_600_000)
        let proposed = try state.proposeMeeting("alice", proposal, presence: presence, now: now)
        XCTAssertEqual(proposed.recipients(of: "meet"), ["bob"])
        let meeting = try XCTUnwrap(MeetingReply(json: .object(proposed.reply))?.meeting)
        XCTAssertEqual(meeting.invited.map(\.deliveredAt), [now, nil])
        XCTAssertEqual(meeting.invited.map(\.queuedAt), [now, now])

        let later = now + 90_000
        let delivered = state.deliverQueued(to: "carol", now: later)
        XCTAssertEqual(delivered.eventTypes, ["meet", "meet.delivered"])
        let event = try XCTUnwrap(Event(json: delivered.events[0].message))
        guard case .meet(let seen) = event else { return XCTFail("\(event)") }
        XCTAssertEqual(seen.invited.last, MeetingInvitee(username: "carol", queuedAt: now, deliveredAt: later))
        XCTAssertEqual(delivered.recipients(of: "meet.delivered"), ["alice"])
        XCTAssertTrue(state.deliverQueued(to: "carol", now: later + 1).events.isEmpty, "delivered once")
    }

    func testMeetingAnswersCancelAndWhoMayDoWhat() throws {
        var state = friends()
        let proposal = MeetingProposal(to: ["bob", "carol"], lat: 1, lon: 2, name: "x", time: now)
        _ = try state.proposeMeeting("alice", proposal, presence: CoreTestPresence(), now: now)
        let accepted = try state.respondToMeeting("bob", "m_1", .accepted)
        XCTAssertEqual(accepted.recipients(of: "meet.response"), ["alice", "carol"])
        XCTAssertTrue(try state.respondToMeeting("bob", "m_1", .accepted).events.isEmpty, "the same answer twice sends nothing")
        XCTAssertEqual(try state.respondToMeeting("bob", "m_1", .declined).recipients(of: "meet.response"), ["alice", "carol"])
        assertRelayError(try state.respondToMeeting("dave", "m_1", .accepted), .forbidden)
        assertRelayError(try state.respondToMeeting("alice", "m_1", .accepted), .forbidden)
        assertRelayError(try state.respondToMeeting("bob", "m_404", .accepted), .notFound)
        assertRelayError(try state.cancelMeeting("bob", "m_1"), .forbidden)
        assertRelayError(try state.proposeMeeting("alice", MeetingProposal(to: ["erin"], lat: 1, lon: 2, name: "x", time: now),
                                                  presence: CoreTestPresence(), now: now), .forbidden)
        assertRelayError(try state.proposeMeeting("alice", MeetingProposal(to: ["alice"], lat: 1, lon: 2, name: "x", time: now),
                                                  presence: CoreTestPresence(), now: now), .invalid)
        let cancelled = try state.cancelMeeting("alice", "m_1")
        XCTAssertEqual(cancelled.recipients(of: "meet.cancelled"), ["bob", "carol"])
        XCTAssertEqual(cancelled.changes, [.removeMeeting(id: "m_1")])
        assertRelayError(try state.respondToMeeting("bob", "m_1", .accepted), .notFound)
    }

    func testAMeetingPointIsForgottenADayAfterItsTime() throws {
        var state = friends()
        _ = try state.proposeMeeting("alice", MeetingProposal(to: ["bob"], lat: 1, lon: 2, name: "x", time: now),
                                     presence: CoreTestPresence(), now: now)
        XCTAssertEqual(state.nextDeadline(), now + MeetingPoint.keptAfterTime)
        XCTAssertEqual(state.fireDue(now: now + MeetingPoint.keptAfterTime, presence: CoreTestPresence()).changes, [.removeMeeting(id: "m_1")])
    }

    // MARK: Messages

    func testAMessageIsDeliveredAtOnceOrQueuedThenReadAndForgotten() throws {
        var state = friends()
        let online = try state.sendMessage("alice", to: "bob", text: "hi", presence: CoreTestPresence(online: ["bob"]), now: now)
        XCTAssertEqual(online.recipients(of: "msg"), ["bob"])
        XCTAssertEqual(MessageReply(json: .object(online.reply))?.message.deliveredAt, now)

        let queued = try state.sendMessage("alice", to: "carol", text: "later", presence: CoreTestPresence(), now: now)
        XCTAssertTrue(queued.events.isEmpty)
        let id = try XCTUnwrap(MessageReply(json: .object(queued.reply))?.message.id)
        let delivered = state.deliverQueued(to: "carol", now: now + 500)
        XCTAssertEqual(delivered.eventTypes, ["msg", "msg.delivered"])
        XCTAssertEqual(delivered.recipients(of: "msg.delivered"), ["alice"])
        XCTAssertEqual(delivered.changes, [.saveMessage(MessageInfo(id: id, from: "alice", to: "carol", text: "later", queuedAt: now,
                                                                    deliveredAt: now + 500))])

        assertRelayError(try state.readMessage("alice", id, now: now), .forbidden)
        let read = try state.readMessage("carol", id, now: now + 900)
        XCTAssertEqual(read.recipients(of: "msg.read"), ["alice"])
        XCTAssertEqual(read.changes, [.removeMessage(id: id)])
        assertRelayError(try state.readMessage("carol", id, now: now), .notFound)
    }

    func testMessagesOnlyToFriendsAndAtMost30AMinute() throws {
        var state = friends()
        assertRelayError(try state.sendMessage("alice", to: "erin", text: "x", presence: CoreTestPresence(), now: now), .forbidden)
        assertRelayError(try state.sendMessage("alice", to: "alice", text: "x", presence: CoreTestPresence(), now: now), .invalid)
        assertRelayError(try state.sendMessage("alice", to: "nobody", text: "x", presence: CoreTestPresence(), now: now), .notFound)
        for n in 0..<FriendsMapLimits.messagesPerMinute {
            _ = try state.sendMessage("alice", to: "bob", text: "\(n)", presence: CoreTestPresence(), now: now + Int64(n))
        }
        assertRelayError(try state.sendMessage("alice", to: "bob", text: "one too many", presence: CoreTestPresence(), now: now + 100), .rateLimited)
        XCTAssertNoThrow(try state.sendMessage("bob", to: "alice", text: "others may", presence: CoreTestPresence(), now: now + 100))
        XCTAssertNoThrow(try state.sendMessage("alice", to: "bob", text: "a minute later", presence: CoreTestPresence(),
                                               now: now + FriendsMapLimits.messageWindow + 1))
    }
}
