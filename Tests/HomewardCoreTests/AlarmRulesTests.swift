import HomewardCore
import HomewardProtocol
import XCTest

final class AlarmRulesTests: XCTestCase {
    private let now = CoreFixture.now
    private let noPresence = CoreTestPresence()

    /// alice is friends with bob, carol and dave; erin is a stranger.
    private func makeState() -> RelayState {
        CoreFixture.state(["alice", "bob", "carol", "dave", "erin"],
                          friends: [("alice", "bob"), ("alice", "carol"), ("alice", "dave")])
    }

    private func raise(_ state: inout RelayState, _ request: Request.AlarmRaise = Request.AlarmRaise(),
                       presence: CoreTestPresence = CoreTestPresence(), owner: String = "alice",
                       file: StaticString = #filePath, line: UInt = #line) throws -> (id: String, outcome: Outcome) {
        let outcome = try state.raiseAlarm(owner, request, presence: presence, now: now)
        let id = try XCTUnwrap(outcome.reply("alarm")?["alarmId"]?.stringValue, file: file, line: line)
        return (id, outcome)
    }

    // MARK: Recipients

    func testExplicitToChoosesRecipients() throws {
        var state = makeState()
        _ = try state.alarmContacts("alice", set: ["dave"])
        let (id, outcome) = try raise(&state, Request.AlarmRaise(to: ["bob", "carol"]))
        XCTAssertEqual(state.alarms[id]?.recipients, ["bob", "carol"])
        XCTAssertEqual(outcome.recipients(of: "alarm"), ["bob", "carol"])
        XCTAssertEqual(outcome.events.count, 2)
    }

    func testToNonFriendIsForbidden() {
        var state = makeState()
        assertRelayError(try state.raiseAlarm("alice", Request.AlarmRaise(to: ["bob", "erin"]), presence: noPresence, now: now), .forbidden)
        assertRelayError(try state.alarmRecipients("alice", to: ["erin"]), .forbidden)
        XCTAssertTrue(state.alarms.isEmpty, "a refused alarm is not stored")
    }

    func testToUnknownUserIsNotFoundAndYourselfIsInvalid() {
        let state = makeState()
        assertRelayError(try state.alarmRecipients("alice", to: ["zed"]), .notFound)
        assertRelayError(try state.alarmRecipients("alice", to: ["alice"]), .invalid)
    }

    func testContactsAreUsedWhenToIsAbsent() throws {
        var state = makeState()
        _ = try state.alarmContacts("alice", set: ["carol"])
        let (id, outcome) = try raise(&state)
        XCTAssertEqual(state.alarms[id]?.recipients, ["carol"])
        XCTAssertEqual(outcome.recipients(of: "alarm"), ["carol"])
    }

    func testAllFriendsWhenNoContacts() throws {
        var state = makeState()
        let (id, outcome) = try raise(&state)
        XCTAssertEqual(state.alarms[id]?.recipients, ["bob", "carol", "dave"])
        XCTAssertEqual(outcome.recipients(of: "alarm"), ["bob", "carol", "dave"])
    }

    func testEmptyContactsFallBackToAllFriends() throws {
        var state = makeState()
        _ = try state.alarmContacts("alice", set: [])
        XCTAssertEqual(try state.alarmRecipients("alice", to: nil), ["bob", "carol", "dave"])
        let (id, _) = try raise(&state)
        XCTAssertEqual(state.alarms[id]?.recipients, ["bob", "carol", "dave"])
    }

    func testContactsMustBeFriends() {
        var state = makeState()
        assertRelayError(try state.alarmContacts("alice", set: ["erin"]), .forbidden)
        assertRelayError(try state.alarmContacts("alice", set: ["alice"]), .invalid)
        XCTAssertEqual(try state.alarmContacts("alice", set: nil).reply("usernames"), [])
    }

    // MARK: Raise

    func testRaiseStoresAlarmAndRepliesWithRecipientsOnline() throws {
        var state = makeState()
        let presence = CoreTestPresence(online: ["bob"])
        let (id, outcome) = try raise(&state, Request.AlarmRaise(to: ["bob", "carol"]), presence: presence)

        let alarm = try XCTUnwrap(state.alarms[id])
        XCTAssertEqual(alarm.owner, "alice")
        XCTAssertEqual(alarm.text, Alarm.defaultText)
        XCTAssertEqual(alarm.createdAt, now)
        XCTAssertEqual(alarm.acked, [])
        XCTAssertEqual(alarm.deliveredAt, ["bob": now], "only online recipients are delivered at once")
        XCTAssertEqual(outcome.changes, [.saveAlarm(alarm)])

        let json = alarm.info(owner: state.profile("alice")).json
        XCTAssertEqual(json["from"], CoreFixture.user("alice"))
        XCTAssertEqual(json["text"], .string(Alarm.defaultText))
        XCTAssertEqual(json["createdAt"], .int(now))
        XCTAssertEqual(json["acked"], [])
        XCTAssertEqual(json["position"], .null)
        XCTAssertEqual(outcome.reply("alarm"), json)
        XCTAssertEqual(outcome.reply("recipients"), [
            ["username": "bob", "online": true],
            ["username": "carol", "online": false],
        ])
        for event in outcome.events {
            XCTAssertEqual(event.message, Message.event("alarm", [("alarm", json)]))
        }
    }

    func testCustomTextIsKept() throws {
        var state = makeState()
        let (id, _) = try raise(&state, Request.AlarmRaise(text: "car broke down", to: ["bob"]))
        XCTAssertEqual(state.alarms[id]?.text, "car broke down")
    }

    func testPositionComesFromRequestLatLon() throws {
        var state = makeState()
        let presence = CoreTestPresence(positions: ["alice": Position(lat: 1, lon: 2, ts: now - 1000)])
        let (id, outcome) = try raise(&state, Request.AlarmRaise(lat: 57.7, lon: 11.9, acc: 12), presence: presence)
        let expected = Position(lat: 57.7, lon: 11.9, acc: 12, ts: now)
        XCTAssertEqual(state.alarms[id]?.position, expected)
        XCTAssertEqual(outcome.reply("alarm")?["position"], expected.json)
    }

    func testPositionFallsBackToPresenceLastPosition() throws {
        var state = makeState()
        let last = Position(lat: 1.5, lon: 2.5, acc: 3, spd: 1, ts: now - 1000)
        let presence = CoreTestPresence(positions: ["alice": last])
        let (id, outcome) = try raise(&state, presence: presence)
        XCTAssertEqual(state.alarms[id]?.position, last)
        XCTAssertEqual(outcome.reply("alarm")?["position"], last.json)
    }

    func testNoPositionWhenNeitherRequestNorPresenceHasOne() throws {
        var state = makeState()
        let (id, _) = try raise(&state)
        XCTAssertNil(state.alarms[id]?.position)
    }

    // MARK: Acknowledge

    func testAckByNonRecipientIsForbidden() throws {
        var state = makeState()
        let (id, _) = try raise(&state, Request.AlarmRaise(to: ["bob"]))
        assertRelayError(try state.acknowledgeAlarm("carol", id), .forbidden)  // a friend, not a recipient
        assertRelayError(try state.acknowledgeAlarm("erin", id), .forbidden)   // a stranger
        assertRelayError(try state.acknowledgeAlarm("alice", id), .forbidden)  // the owner
        XCTAssertEqual(state.alarms[id]?.acked, [])
    }

    func testAckedEventGoesToOwnerAndOtherRecipientsNotTheAcker() throws {
        var state = makeState()
        let (id, _) = try raise(&state)
        let outcome = try state.acknowledgeAlarm("bob", id)

        XCTAssertEqual(Set(outcome.recipients(of: "alarm.acked")), ["alice", "carol", "dave"])
        XCTAssertEqual(outcome.events.count, 3)
        XCTAssertFalse(outcome.events.contains { $0.to == "bob" })
        for event in outcome.events {
            XCTAssertEqual(event.message, Message.event("alarm.acked", [("alarmId", .string(id)), ("by", "bob")]))
        }
        XCTAssertEqual(state.alarms[id]?.acked, ["bob"])
        XCTAssertEqual(outcome.changes, [.saveAlarm(state.alarms[id]!)])
    }

    func testAckTwiceSendsNoDuplicateEvents() throws {
        var state = makeState()
        let (id, _) = try raise(&state)
        _ = try state.acknowledgeAlarm("bob", id)
        let again = try state.acknowledgeAlarm("bob", id)
        XCTAssertTrue(again.events.isEmpty)
        XCTAssertTrue(again.changes.isEmpty)
        XCTAssertEqual(state.alarms[id]?.acked, ["bob"])
    }

    // MARK: Cancel

    func testCancelByNonOwnerIsForbidden() throws {
        var state = makeState()
        let (id, _) = try raise(&state)
        assertRelayError(try state.cancelAlarm("bob", id, reason: nil, now: now), .forbidden)
        assertRelayError(try state.cancelAlarm("erin", id, reason: nil, now: now), .forbidden)
        XCTAssertNotNil(state.alarms[id])
    }

    func testCancelSendsAlarmCancelledToRecipients() throws {
        var state = makeState()
        let (id, _) = try raise(&state, Request.AlarmRaise(to: ["bob", "carol"]))
        let outcome = try state.cancelAlarm("alice", id, reason: nil, now: now + 5)

        XCTAssertEqual(outcome.recipients(of: "alarm.cancelled"), ["bob", "carol"])
        XCTAssertEqual(outcome.events.count, 2)
        for event in outcome.events {
            XCTAssertEqual(event.message, Message.event("alarm.cancelled", [("alarmId", .string(id)), ("reason", "cancelled")]))
        }
        XCTAssertEqual(outcome.changes, [.endAlarm(id: id, reason: "cancelled", at: now + 5)])
        XCTAssertNil(state.alarms[id])
        assertRelayError(try state.acknowledgeAlarm("bob", id), .notFound)
        assertRelayError(try state.cancelAlarm("alice", id, reason: nil, now: now), .notFound)
    }

    func testCancelCarriesGivenReason() throws {
        var state = makeState()
        let (id, _) = try raise(&state, Request.AlarmRaise(to: ["bob"]))
        let outcome = try state.cancelAlarm("alice", id, reason: "false alarm", now: now)
        XCTAssertEqual(outcome.sent("alarm.cancelled").first?.message["reason"], "false alarm")
        XCTAssertEqual(outcome.changes, [.endAlarm(id: id, reason: "false alarm", at: now)])
    }

    func testUnknownAlarmIDIsNotFound() {
        var state = makeState()
        assertRelayError(try state.acknowledgeAlarm("bob", "a_nope"), .notFound)
        assertRelayError(try state.cancelAlarm("alice", "a_nope", reason: nil, now: now), .notFound)
    }

    // MARK: Backlog

    func testBacklogHasPendingRequestsInvitesAndActiveAlarms() throws {
        var state = makeState()
        _ = try state.requestFriend("erin", "bob", now: now)
        let session = try state.startSession("alice", invite: ["bob"], note: nil, now: now)
        let sessionJSON = try XCTUnwrap(session.reply("session"))
        let (_, alarm) = try raise(&state, Request.AlarmRaise(to: ["bob"]))
        let alarmJSON = try XCTUnwrap(alarm.reply("alarm"))

        XCTAssertEqual(state.backlog(for: "bob"), [
            Message.event("friend.request", [("from", CoreFixture.user("erin"))]),
            Message.event("session.invite", [("session", sessionJSON)]),
            Message.event("alarm", [("alarm", alarmJSON)]),
        ])
        XCTAssertEqual(state.backlog(for: "erin"), [], "the requester has nothing pending")
    }

    func testBacklogOmitsCancelledAlarmsAndAnsweredInvitesAndRequests() throws {
        var state = makeState()
        _ = try state.requestFriend("erin", "bob", now: now)
        _ = try state.declineFriend("bob", "erin")
        let session = try state.startSession("alice", invite: ["bob", "carol"], note: nil, now: now)
        let sessionID = try XCTUnwrap(session.reply("session")?["sessionId"]?.stringValue)
        _ = try state.acceptSession("bob", sessionID, presence: noPresence)
        _ = try state.declineSession("carol", sessionID)
        let (cancelled, _) = try raise(&state, Request.AlarmRaise(to: ["bob", "carol"]))
        _ = try state.cancelAlarm("alice", cancelled, reason: nil, now: now)
        let (active, _) = try raise(&state, Request.AlarmRaise(to: ["bob"]))

        let bobs = state.backlog(for: "bob")
        XCTAssertEqual(bobs.map { $0["type"] }, ["alarm"])
        XCTAssertEqual(bobs.first?["alarm"]?["alarmId"], .string(active))
        XCTAssertEqual(state.backlog(for: "carol"), [])
    }

    func testBacklogAlarmsAreOldestFirst() throws {
        var state = CoreFixture.state(friends: [("alice", "bob"), ("carol", "bob")])
        let first = try state.raiseAlarm("carol", Request.AlarmRaise(), presence: noPresence, now: now)
        let second = try state.raiseAlarm("alice", Request.AlarmRaise(), presence: noPresence, now: now + 1)
        XCTAssertEqual(state.backlog(for: "bob").map { $0["alarm"]?["alarmId"] },
                       [first.reply("alarm")?["alarmId"], second.reply("alarm")?["alarmId"]])
    }

    func testMarkAlarmsDeliveredRecordsFirstDeliveryOnce() throws {
        var state = makeState()
        let (id, _) = try raise(&state, Request.AlarmRaise(to: ["bob"]))
        XCTAssertNil(state.alarms[id]?.deliveredAt["bob"])
        let changes = state.markAlarmsDelivered(to: "bob", now: now + 100)
        XCTAssertEqual(state.alarms[id]?.deliveredAt["bob"], now + 100)
        XCTAssertEqual(changes, [.saveAlarm(state.alarms[id]!)])
        XCTAssertEqual(state.markAlarmsDelivered(to: "bob", now: now + 200), [])
        XCTAssertEqual(state.alarms[id]?.deliveredAt["bob"], now + 100)
    }
}
