import HomewardCore
import HomewardProtocol
import XCTest

/// A block or an unfriending ends the meeting points and messages between the two: the other is taken off
/// pending meeting points (one left with nobody ends), unread messages between them are dropped, and every
/// meeting and message action checks the friendship, all through `StoreChange`s.
final class EndedFriendshipRulesTests: XCTestCase {
    private let now = CoreFixture.now

    /// alice is friends with bob and carol; bob and carol are friends. alice proposed m_1 to bob and carol
    /// and m_2 to bob alone; bob proposed m_3 to alice; alice and bob each sent the other a message that
    /// bob (offline) has not had and alice has had but not read.
    private func meetingsAndMessages() throws -> (RelayState, messages: [String]) {
        var state = CoreFixture.state(["alice", "bob", "carol"], friends: [("alice", "bob"), ("alice", "carol"), ("bob", "carol")])
        let offline = CoreTestPresence(online: ["alice", "carol"])
        _ = try state.proposeMeeting("alice", MeetingProposal(to: ["bob", "carol"], lat: 1, lon: 2, name: "both", time: now), presence: offline, now: now)
        _ = try state.proposeMeeting("alice", MeetingProposal(to: ["bob"], lat: 1, lon: 2, name: "bob only", time: now), presence: offline, now: now)
        _ = try state.proposeMeeting("bob", MeetingProposal(to: ["alice"], lat: 1, lon: 2, name: "bob's", time: now), presence: offline, now: now)
        let toBob = try state.sendMessage("alice", to: "bob", text: "queued", presence: offline, now: now)
        let toAlice = try state.sendMessage("bob", to: "alice", text: "unread", presence: offline, now: now)
        let ids = try [toBob, toAlice].map { try XCTUnwrap(MessageReply(json: .object($0.reply))?.message.id) }
        return (state, ids)
    }

    private func meetings(_ state: RelayState, _ username: String) -> [MeetingInfo] {
        MeetingListReply(json: .object(state.listMeetings(username).reply))?.meetings ?? []
    }

    private func listed(_ state: RelayState, _ username: String) -> [String] { meetings(state, username).map(\.id) }

    private func invited(_ state: RelayState, to id: String, by owner: String) -> [String]? {
        meetings(state, owner).first { $0.id == id }?.invited.map(\.username)
    }

    func testBlockingEndsMeetingPointsAndMessagesBetweenTheTwo() throws {
        var (state, ids) = try meetingsAndMessages()
        let blocked = try state.block("alice", "bob", now: now)

        XCTAssertEqual(listed(state, "bob"), [], "bob sees none of alice's meeting points, nor his own to her")
        XCTAssertEqual(listed(state, "alice"), ["m_1"])
        XCTAssertEqual(listed(state, "carol"), ["m_1"], "carol is still invited")
        XCTAssertEqual(invited(state, to: "m_1", by: "alice"), ["carol"])
        XCTAssertTrue(blocked.changes.contains(.removeMeeting(id: "m_2")), "nobody left: it ends")
        XCTAssertTrue(blocked.changes.contains(.removeMeeting(id: "m_3")))
        XCTAssertTrue(blocked.changes.contains { if case .saveMeeting(let m) = $0 { m.id == "m_1" } else { false } })
        XCTAssertTrue(blocked.changes.contains(.removeMessage(id: ids[0])))
        XCTAssertTrue(blocked.changes.contains(.removeMessage(id: ids[1])))
        XCTAssertEqual(blocked.sent("meet.cancelled").map { "\($0.to):\($0.message["meetingId"]?.stringValue ?? "")" }.sorted(),
                       ["alice:m_2", "alice:m_3", "bob:m_1", "bob:m_2", "bob:m_3"])

        assertRelayError(try state.respondToMeeting("bob", "m_1", .accepted), .forbidden)
        assertRelayError(try state.respondToMeeting("bob", "m_2", .accepted), .notFound)
        assertRelayError(try state.readMessage("alice", ids[1], now: now), .notFound)
        XCTAssertTrue(state.deliverQueued(to: "bob", now: now + 1).events.isEmpty, "nothing queued for bob reaches him")
        assertRelayError(try state.sendMessage("bob", to: "alice", text: "x", presence: CoreTestPresence(), now: now), .forbidden)
    }

    func testUnfriendingEndsThemToo() throws {
        var (state, ids) = try meetingsAndMessages()
        _ = try state.removeFriend("bob", "alice")
        XCTAssertEqual(listed(state, "bob"), [])
        XCTAssertEqual(listed(state, "alice"), ["m_1"])
        XCTAssertEqual(invited(state, to: "m_1", by: "alice"), ["carol"])
        XCTAssertTrue(state.deliverQueued(to: "bob", now: now + 1).events.isEmpty)
        assertRelayError(try state.readMessage("alice", ids[1], now: now), .notFound)
    }

    /// What is left of a friendship stored without these ends (the rules check the friendship on every action).
    func testLeftoversBetweenNonFriendsAreNeitherDeliveredNorAnsweredAndABlockClearsThem() throws {
        var stored = StoredState()
        stored.users = ["alice", "bob", "carol"].map { UserProfile(username: $0, name: $0) }
        stored.friendships = [("alice", "carol"), ("bob", "carol")]
        stored.meetings = [MeetingPoint(id: "m_1", owner: "alice", name: "x", lat: 1, lon: 2, time: now, createdAt: now,
                                        invitees: [MeetingInvitee(username: "bob", queuedAt: now), MeetingInvitee(username: "carol", queuedAt: now)])]
        stored.messages = [MessageInfo(id: "msg_1", from: "alice", to: "bob", text: "x", queuedAt: now)]
        var state = RelayState(stored)
        XCTAssertEqual(state.deliverQueued(to: "bob", now: now).events.count, 0)
        assertRelayError(try state.respondToMeeting("bob", "m_1", .accepted), .forbidden)
        assertRelayError(try state.readMessage("bob", "msg_1", now: now), .notFound)
        XCTAssertEqual(try state.respondToMeeting("carol", "m_1", .accepted).recipients(of: "meet.response"), ["alice", "bob"],
                       "bob is still on the list; no block between carol and him")

        let blocked = try state.block("bob", "alice", now: now)
        XCTAssertTrue(blocked.changes.contains(.removeMessage(id: "msg_1")))
        XCTAssertEqual(invited(state, to: "m_1", by: "alice"), ["carol"])
    }

    /// Two invitees of a third user's meeting point: one blocked the other, so the other's answer does not reach them.
    func testAnAnswerReachesNoInviteeWhoBlockedTheOneAnswering() throws {
        var state = CoreFixture.state(["alice", "bob", "carol"], friends: [("alice", "bob"), ("alice", "carol")])
        _ = try state.proposeMeeting("alice", MeetingProposal(to: ["bob", "carol"], lat: 1, lon: 2, name: "x", time: now),
                                     presence: CoreTestPresence(), now: now)
        _ = try state.block("carol", "bob", now: now)
        XCTAssertEqual(try state.respondToMeeting("bob", "m_1", .accepted).recipients(of: "meet.response"), ["alice"])
        XCTAssertEqual(try state.respondToMeeting("carol", "m_1", .accepted).recipients(of: "meet.response"), ["alice"])
    }
}
