import HomewardCore
import HomewardCoreTestSupport
import HomewardProtocol
import XCTest

/// The safety extensions driven through the relay engine with a manual clock.
final class SafetyExtensionTests: XCTestCase {
    /// alice walks; bob observes; carol is alice's alarm contact but not invited.
    private func walk(options: SessionOptions = SessionOptions(invite: ["bob"]), safety: SafetySettings = SafetySettings())
        async throws -> (SafetyHarness, owner: (RecordingSink, Authentication), observer: (RecordingSink, Authentication), String)
    {
        let harness = try await SafetyHarness(users: ["alice", "bob", "carol"], friends: [("alice", "bob"), ("alice", "carol")],
                                        safety: safety)
        let alice = try await harness.connect("alice")
        let bob = try await harness.connect("bob")
        _ = try await harness.ok(.alarmContacts(usernames: ["carol"]), as: alice.1, sink: alice.0)
        let started = try await harness.ok(.sessionStart(options), as: alice.1, sink: alice.0)
        let id = started.field("session")!["sessionId"]!.stringValue!
        _ = try await harness.ok(.sessionAccept(sessionId: id), as: bob.1, sink: bob.0)
        return (harness, alice, bob, id)
    }

    // MARK: Check-in deadline

    func testMissedCheckInRaisesOneAutoAlarmToObserversAndContacts() async throws {
        let clock = ManualClock()
        let (harness, _, bob, _) = try await walk(options: SessionOptions(invite: ["bob"], checkInBy: clock.now + 60_000))
        let carol = try await harness.connect("carol")
        await harness.advance(by: 59_999)
        XCTAssertTrue(bob.0.events("alarm").isEmpty, "no alarm before the deadline")
        await harness.advance(by: 1)
        let alarms = bob.0.events("alarm")
        XCTAssertEqual(alarms.count, 1)
        XCTAssertEqual(alarms.first?["alarm"]?["auto"], true)
        XCTAssertEqual(alarms.first?["alarm"]?["text"]?.stringValue?.contains("missed their check-in"), true)
        XCTAssertEqual(carol.0.events("alarm").count, 1, "the owner's alarm contact is told too")
        await harness.advance(by: 60_000 * 5)
        XCTAssertEqual(bob.0.events("alarm").filter { $0["repeat"] == nil }.count, 1, "exactly one alarm per missed deadline")
    }

    func testCheckInJustBeforeTheDeadlineMovesIt() async throws {
        let clock = ManualClock()
        let (harness, alice, bob, id) = try await walk(options: SessionOptions(invite: ["bob"], checkInBy: clock.now + 60_000))
        await harness.advance(by: 59_999)
        let checkedIn = try await harness.ok(.sessionCheckin(sessionId: id, checkInBy: harness.clock.now + 120_000),
                                             as: alice.1, sink: alice.0)
        XCTAssertEqual(checkedIn.field("session")?["checkInBy"], .int(harness.clock.now + 120_000))
        await harness.advance(by: 1)
        XCTAssertTrue(bob.0.events("alarm").isEmpty, "the old deadline no longer counts")
        await harness.advance(by: 120_000)
        XCTAssertEqual(bob.0.events("alarm").count, 1, "the new deadline does")
    }

    func testEndingTheSessionBeforeTheDeadlineRaisesNothing() async throws {
        let clock = ManualClock()
        let (harness, alice, bob, id) = try await walk(options: SessionOptions(invite: ["bob"], checkInBy: clock.now + 60_000))
        _ = try await harness.ok(.sessionEnd(sessionId: id), as: alice.1, sink: alice.0)
        await harness.advance(by: 120_000)
        XCTAssertTrue(bob.0.events("alarm").isEmpty)
    }

    func testOnlyTheOwnerMayCheckIn() async throws {
        let (harness, _, bob, id) = try await walk()
        let result = await harness.serve(.sessionCheckin(sessionId: id, checkInBy: nil), as: bob.1, sink: bob.0)
        XCTAssertEqual(result.error, .forbidden("only the owner can check in"))
        let missing = await harness.serve(.sessionCheckin(sessionId: "s_nope", checkInBy: nil), as: bob.1, sink: bob.0)
        XCTAssertEqual(missing.error?.isNotFound, true)
    }

    func testMissedDeadlineDuringDowntimeFiresRightAfterRestart() async throws {
        let clock = ManualClock()
        let (harness, _, _, _) = try await walk(options: SessionOptions(invite: ["bob"], checkInBy: clock.now + 60_000))
        harness.clock.advance(by: 10 * 60_000)  // the relay is down while the deadline passes
        try await harness.restart()
        let bob = try await harness.connect("bob")
        let alarms = bob.0.events("alarm")
        XCTAssertEqual(alarms.count, 1, "the alarm raised at start-up reaches bob when he signs in")
        XCTAssertEqual(alarms.first?["alarm"]?["auto"], true)
    }

    // MARK: Destination

    func testPositionInsideTheDestinationEndsTheSessionAsArrived() async throws {
        let destination = Destination(lat: 57.7000, lon: 11.9700, radius: 50)
        let (harness, alice, bob, id) = try await walk(options: SessionOptions(invite: ["bob"], destination: destination))
        harness.relay.publish(Position(lat: 57.7100, lon: 11.9700, ts: harness.clock.now), from: alice.1.username)
        await harness.relay.drain()
        XCTAssertTrue(bob.0.events("session.ended").isEmpty, "1.1 km away is not there yet")
        harness.relay.publish(Position(lat: 57.70020, lon: 11.9700, ts: harness.clock.now), from: alice.1.username)
        await harness.relay.drain()
        let ended = bob.0.events("session.ended")
        XCTAssertEqual(ended.count, 1)
        XCTAssertEqual(ended.first?["reason"], "arrived")
        XCTAssertEqual(ended.first?["sessionId"], .string(id))
        XCTAssertEqual(bob.0.events("pos").count, 2, "the arriving position itself is still relayed")
    }

    func testArrivalOnTheFirstPosition() async throws {
        let destination = Destination(lat: 57.7, lon: 11.97, radius: 10)
        let (harness, alice, bob, _) = try await walk(options: SessionOptions(invite: ["bob"], destination: destination))
        harness.relay.publish(Position(lat: 57.7, lon: 11.97, ts: harness.clock.now), from: alice.1.username)
        await harness.relay.drain()
        XCTAssertEqual(bob.0.events("session.ended").first?["reason"], "arrived")
        let list = try await harness.ok(.sessionList, as: alice.1, sink: alice.0)
        XCTAssertEqual(list.field("own"), .null)
    }

    // MARK: Lost contact

    func testObserversHearWhenTheOwnerIsGoneForTheGracePeriodAndWhenTheyReturn() async throws {
        let (harness, alice, bob, id) = try await walk()
        harness.relay.publish(Position(lat: 1, lon: 2, ts: harness.clock.now), from: "alice")
        await harness.disconnect(alice.1, alice.0)
        await harness.advance(by: 59_999)
        XCTAssertTrue(bob.0.events("session.lost").isEmpty)
        await harness.advance(by: 1)
        let lost = bob.0.events("session.lost")
        XCTAssertEqual(lost.count, 1)
        XCTAssertEqual(lost.first?["sessionId"], .string(id))
        XCTAssertEqual(lost.first?["lastPosition"]?["lat"], 1)
        XCTAssertNotNil(lost.first?["since"]?.numberValue)
        await harness.advance(by: 600_000)
        XCTAssertEqual(bob.0.events("session.lost").count, 1, "told once")
        _ = try await harness.connect("alice")
        XCTAssertEqual(bob.0.events("session.resumed").count, 1)
    }

    func testOwnerReconnectingWithinTheGracePeriodIsNotLost() async throws {
        let (harness, alice, bob, _) = try await walk()
        await harness.disconnect(alice.1, alice.0)
        await harness.advance(by: 30_000)
        _ = try await harness.connect("alice")
        await harness.advance(by: 120_000)
        XCTAssertTrue(bob.0.events("session.lost").isEmpty)
        XCTAssertTrue(bob.0.events("session.resumed").isEmpty)
    }

    func testLostContactAfterRestartCountsFromStartUp() async throws {
        let safety = SafetySettings()
        let (harness, _, _, _) = try await walk(safety: safety)
        try await harness.restart()
        let bob = try await harness.connect("bob")
        await harness.advance(by: 59_000)
        XCTAssertTrue(bob.0.events("session.lost").isEmpty)
        await harness.advance(by: 1_000)
        XCTAssertEqual(bob.0.events("session.lost").count, 1)
    }

    // MARK: Repeat until acknowledged

    func testUnacknowledgedAlarmRepeatsToOnlineRecipientsUpToTheMaximum() async throws {
        var safety = SafetySettings()
        safety.alarmRepeatMax = 3
        let (harness, alice, bob, _) = try await walk(safety: safety)
        _ = try await harness.ok(.alarmRaise(Request.AlarmRaise(to: ["bob"])), as: alice.1, sink: alice.0)
        bob.0.clear()
        for expected in 1...3 {
            await harness.advance(by: 30_000)
            XCTAssertEqual(bob.0.events("alarm").last?["repeat"], .int(Int64(expected)))
        }
        await harness.advance(by: 300_000)
        XCTAssertEqual(bob.0.events("alarm").count, 3, "no more than alarmRepeatMax repeats")
    }

    func testAcknowledgingOnTheLastRepeatStopsIt() async throws {
        var safety = SafetySettings()
        safety.alarmRepeatMax = 2
        let (harness, alice, bob, _) = try await walk(safety: safety)
        let raised = try await harness.ok(.alarmRaise(Request.AlarmRaise(to: ["bob"])), as: alice.1, sink: alice.0)
        let id = raised.field("alarm")!["alarmId"]!.stringValue!
        await harness.advance(by: 30_000)
        await harness.advance(by: 30_000)
        XCTAssertEqual(bob.0.events("alarm").last?["repeat"], 2)
        _ = try await harness.ok(.alarmAck(alarmId: id), as: bob.1, sink: bob.0)
        bob.0.clear()
        await harness.advance(by: 300_000)
        XCTAssertTrue(bob.0.events("alarm").isEmpty)
    }

    func testAcknowledgedOrCancelledAlarmsAreNotRepeated() async throws {
        let (harness, alice, bob, _) = try await walk()
        let first = try await harness.ok(.alarmRaise(Request.AlarmRaise(to: ["bob"])), as: alice.1, sink: alice.0)
        let second = try await harness.ok(.alarmRaise(Request.AlarmRaise(to: ["bob"])), as: alice.1, sink: alice.0)
        _ = try await harness.ok(.alarmAck(alarmId: first.field("alarm")!["alarmId"]!.stringValue!), as: bob.1, sink: bob.0)
        _ = try await harness.ok(.alarmCancel(alarmId: second.field("alarm")!["alarmId"]!.stringValue!, reason: nil),
                                 as: alice.1, sink: alice.0)
        bob.0.clear()
        await harness.advance(by: 300_000)
        XCTAssertTrue(bob.0.events("alarm").isEmpty)
    }

    func testRepeatScheduleSurvivesARestart() async throws {
        let (harness, alice, _, _) = try await walk()
        _ = try await harness.ok(.alarmRaise(Request.AlarmRaise(to: ["bob"])), as: alice.1, sink: alice.0)
        await harness.advance(by: 30_000)
        try await harness.restart()
        let bob = try await harness.connect("bob")
        bob.0.clear()
        await harness.advance(by: 30_000)
        XCTAssertEqual(bob.0.events("alarm").last?["repeat"], 2, "counting goes on where it stopped")
    }

    // MARK: Expiry

    func testSessionEndsAsExpiredAfterItsTTL() async throws {
        let (harness, alice, bob, id) = try await walk(options: SessionOptions(invite: ["bob"], ttl: 600))
        await harness.advance(by: 599_999)
        XCTAssertTrue(bob.0.events("session.ended").isEmpty)
        await harness.advance(by: 1)
        XCTAssertEqual(bob.0.events("session.ended").first?["reason"], "expired")
        XCTAssertEqual(bob.0.events("session.ended").first?["sessionId"], .string(id))
        let list = try await harness.ok(.sessionList, as: alice.1, sink: alice.0)
        XCTAssertEqual(list.field("own"), .null)
    }

    func testExpiryDuringDowntimeEndsTheSessionAtStartUp() async throws {
        let (harness, _, _, _) = try await walk(options: SessionOptions(invite: ["bob"], ttl: 60))
        harness.clock.advance(by: 120_000)
        try await harness.restart()
        let alice = try await harness.connect("alice")
        let list = try await harness.ok(.sessionList, as: alice.1, sink: alice.0)
        XCTAssertEqual(list.field("own"), .null)
    }
}

extension Result where Failure == RelayError {
    var error: RelayError? {
        if case .failure(let error) = self { return error }
        return nil
    }
}

extension RelayError {
    var isNotFound: Bool {
        if case .notFound = self { return true }
        return false
    }
}
