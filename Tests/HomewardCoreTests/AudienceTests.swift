import HomewardCore
import HomewardProtocol
import XCTest

/// `audience(of:)`: who receives a user's positions.
final class AudienceTests: XCTestCase {
    private let now = CoreFixture.now
    private let noPresence = CoreTestPresence()

    /// alice is friends with everyone; nobody else is friends.
    private func makeState() -> RelayState {
        CoreFixture.state(["alice", "bob", "carol", "dave", "erin"],
                          friends: [("alice", "bob"), ("alice", "carol"), ("alice", "dave"), ("alice", "erin")])
    }

    private func startSession(_ state: inout RelayState, invite: [String]? = nil) throws -> String {
        let outcome = try state.startSession("alice", invite: invite, note: nil, now: now)
        return try XCTUnwrap(outcome.reply("session")?["sessionId"]?.stringValue)
    }

    private func raiseAlarm(_ state: inout RelayState, to: [String]) throws -> (id: String, outcome: Outcome) {
        let outcome = try state.raiseAlarm("alice", Request.AlarmRaise(to: to), presence: noPresence, now: now)
        return (try XCTUnwrap(outcome.reply("alarm")?["alarmId"]?.stringValue), outcome)
    }

    func testNobodyWithoutSessionOrAlarm() {
        let state = makeState()
        XCTAssertEqual(state.audience(of: "alice"), [])
    }

    func testAcceptedObserversAreInAudience() throws {
        var state = makeState()
        let id = try startSession(&state)
        _ = try state.acceptSession("bob", id, presence: noPresence)
        _ = try state.acceptSession("carol", id, presence: noPresence)
        XCTAssertEqual(state.audience(of: "alice"), ["bob", "carol"])
    }

    func testInvitedOnlyAreNotInAudience() throws {
        var state = makeState()
        _ = try startSession(&state)
        XCTAssertEqual(state.audience(of: "alice"), [])
    }

    func testDeclinedAreNotInAudience() throws {
        var state = makeState()
        let id = try startSession(&state)
        _ = try state.acceptSession("bob", id, presence: noPresence)
        _ = try state.declineSession("carol", id)
        XCTAssertEqual(state.audience(of: "alice"), ["bob"])
    }

    func testLeftAreNotInAudience() throws {
        var state = makeState()
        let id = try startSession(&state)
        _ = try state.acceptSession("bob", id, presence: noPresence)
        _ = try state.acceptSession("carol", id, presence: noPresence)
        _ = try state.leaveSession("carol", id)
        XCTAssertEqual(state.audience(of: "alice"), ["bob"])
    }

    func testActiveAlarmRecipientsAreInAudience() throws {
        var state = makeState()
        _ = try raiseAlarm(&state, to: ["dave", "erin"])
        XCTAssertEqual(state.audience(of: "alice"), ["dave", "erin"])
    }

    func testAcknowledgingRecipientStaysInAudience() throws {
        var state = makeState()
        let alarm = try raiseAlarm(&state, to: ["dave"])
        _ = try state.acknowledgeAlarm("dave", alarm.id)
        XCTAssertEqual(state.audience(of: "alice"), ["dave"])
    }

    func testAudienceIsUnionOfObserversAndAlarmRecipients() throws {
        var state = makeState()
        let id = try startSession(&state)
        _ = try state.acceptSession("bob", id, presence: noPresence)
        _ = try state.acceptSession("carol", id, presence: noPresence)
        _ = try raiseAlarm(&state, to: ["carol", "dave"])
        _ = try raiseAlarm(&state, to: ["erin"])
        XCTAssertEqual(state.audience(of: "alice"), ["bob", "carol", "dave", "erin"])
    }

    func testAudienceIsNotSymmetric() throws {
        var state = makeState()
        let id = try startSession(&state)
        _ = try state.acceptSession("bob", id, presence: noPresence)
        XCTAssertEqual(state.audience(of: "bob"), [], "observing alice does not make alice observe bob")
    }

    func testEndingSessionRemovesObservers() throws {
        var state = makeState()
        let id = try startSession(&state)
        _ = try state.acceptSession("bob", id, presence: noPresence)
        _ = try raiseAlarm(&state, to: ["dave"])
        let outcome = try state.endSession("alice", id, now: now)
        XCTAssertEqual(state.audience(of: "alice"), ["dave"])
        XCTAssertEqual(outcome.audienceChanged, ["alice"])
    }

    func testCancellingAlarmRemovesRecipients() throws {
        var state = makeState()
        let id = try startSession(&state)
        _ = try state.acceptSession("bob", id, presence: noPresence)
        let alarm = try raiseAlarm(&state, to: ["bob", "dave"])
        let outcome = try state.cancelAlarm("alice", alarm.id, reason: nil, now: now)
        XCTAssertEqual(state.audience(of: "alice"), ["bob"], "bob still observes the session")
        XCTAssertEqual(outcome.audienceChanged, ["alice"])
    }

    func testOutcomesThatChangeAudienceNameTheOwner() throws {
        var state = makeState()
        let id = try startSession(&state)
        XCTAssertEqual(try state.acceptSession("bob", id, presence: noPresence).audienceChanged, ["alice"])
        XCTAssertEqual(try state.leaveSession("bob", id).audienceChanged, ["alice"])
        _ = try state.inviteToSession("alice", id, invite: ["bob"])
        _ = try state.acceptSession("bob", id, presence: noPresence)
        let alarm = try raiseAlarm(&state, to: ["carol"])
        XCTAssertEqual(alarm.outcome.audienceChanged, ["alice"])
        XCTAssertEqual(try state.removeFriend("bob", "alice").audienceChanged, ["alice"])
        XCTAssertEqual(state.audience(of: "alice"), ["carol"])
        XCTAssertEqual(try state.cancelAlarm("alice", alarm.id, reason: nil, now: now).audienceChanged, ["alice"])
        XCTAssertEqual(try state.endSession("alice", id, now: now).audienceChanged, ["alice"])
        XCTAssertEqual(state.audience(of: "alice"), [])
    }

    func testOutcomesThatDoNotChangeAudienceNameNobody() throws {
        var state = makeState()
        let id = try startSession(&state, invite: ["bob"])
        XCTAssertEqual(try state.declineSession("bob", id).audienceChanged, [])
        XCTAssertEqual(try state.inviteToSession("alice", id, invite: ["carol"]).audienceChanged, [])
        XCTAssertEqual(try state.requestFriend("bob", "carol", now: now).audienceChanged, [])
    }
}
