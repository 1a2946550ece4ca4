import HomewardCore
import HomewardCoreTestSupport
import HomewardProtocol
import XCTest

/// Pauses on a shared bus, with the relay driven directly and a recording bus: the walker's relay decides
/// whom each position may reach elsewhere and whom it shows the last position to; another relay follows
/// that, whatever its own cache still says of the walker's pauses.
final class PausesOnBusTests: XCTestCase {
    private func harness() async throws -> (SafetyHarness, RecordingBus) {
        let bus = RecordingBus()
        let harness = try await SafetyHarness(users: ["alice", "bob", "carol"], friends: [("alice", "bob"), ("alice", "carol")], bus: bus)
        return (harness, bus)
    }

    private func position(_ lat: Double, _ harness: SafetyHarness) -> Position {
        Position(lat: lat, lon: 11.9, ts: harness.clock.now)
    }

    func testAPausedWalkersPositionsArePublishedWithWhomTheyMayReach() async throws {
        let (harness, bus) = try await harness()
        let (alice, aliceAuth) = try await harness.connect("alice")
        _ = try await harness.ok(.shareAlways(with: ["bob", "carol"]), as: aliceAuth, sink: alice)
        harness.relay.publish(position(1, harness), from: "alice")
        _ = try await harness.ok(.locationPause(from: "bob", until: nil), as: aliceAuth, sink: alice)
        harness.relay.publish(position(2, harness), from: "alice")
        _ = try await harness.ok(.locationPause(from: nil, until: nil), as: aliceAuth, sink: alice)
        harness.relay.publish(position(3, harness), from: "alice")
        XCTAssertEqual(bus.positions.count, 2, "paused for everyone without an alarm: not published at all")
        _ = try await harness.ok(.alarmRaise(Request.AlarmRaise(to: ["carol"])), as: aliceAuth, sink: alice)
        harness.relay.publish(position(4, harness), from: "alice")
        _ = try await harness.ok(.locationResume(from: nil), as: aliceAuth, sink: alice)
        _ = try await harness.ok(.locationResume(from: "bob"), as: aliceAuth, sink: alice)
        harness.relay.publish(position(5, harness), from: "alice")
        XCTAssertEqual(bus.restrictions, [nil, .allBut(["bob"]), .only(["carol"]), nil])
    }

    /// The pause ended on the walker's relay, whose next position is unrestricted; this relay has not
    /// reloaded yet and still has the pause: the friend gets the position anyway, and was never unsubscribed.
    func testAPositionFromAnotherRelayFollowsItsRestrictionNotThisRelaysPauses() async throws {
        let (harness, bus) = try await harness()
        let (alice, aliceAuth) = try await harness.connect("alice")
        let (bob, _) = try await harness.connect("bob")
        let (carol, _) = try await harness.connect("carol")
        _ = try await harness.ok(.shareAlways(with: ["bob", "carol"]), as: aliceAuth, sink: alice)
        _ = try await harness.ok(.locationPause(from: "bob", until: nil), as: aliceAuth, sink: alice)
        _ = try await harness.ok(.locationPause(from: "carol", until: nil), as: aliceAuth, sink: alice)
        XCTAssertTrue(bus.calls.contains(.interest(adding: ["alice"], removing: [])), "\(bus.calls)")
        XCTAssertFalse(bus.calls.contains { if case .interest(_, let removing) = $0 { removing.contains("alice") } else { false } },
                       "a pause does not unsubscribe: \(bus.calls)")
        harness.relay.disconnect("alice", sink: alice)
        await harness.relay.drain()

        func fromAlice(_ lat: Double) -> EncodedMessage {
            EncodedMessage(Event.position(from: "alice", position(lat, harness)).json, positionFrom: "alice")
        }
        harness.relay.remotePosition(fromAlice(1), of: "alice", restriction: nil)
        harness.relay.remotePosition(fromAlice(2), of: "alice", restriction: .allBut(["bob"]))
        harness.relay.remotePosition(fromAlice(3), of: "alice", restriction: .only(["bob"]))
        XCTAssertEqual(bob.events("pos").map { $0["lat"] }, [1, 3])
        XCTAssertEqual(carol.events("pos").map { $0["lat"] }, [1, 2])
    }

    /// `hw.last` answered here: only for askers no pause of the walker hides them from; an observer this
    /// relay has not heard of yet (their accept went through another relay) is not hidden.
    func testTheLastPositionIsShownOnlyToAskersNoPauseHidesItFrom() async throws {
        let (harness, _) = try await harness()
        XCTAssertNil(harness.relay.localLastPosition(of: "alice", for: ["bob"]), "not connected here")
        let (alice, aliceAuth) = try await harness.connect("alice")
        _ = try await harness.ok(.shareAlways(with: ["bob", "carol"]), as: aliceAuth, sink: alice)
        let here = position(57.7, harness)
        harness.relay.publish(here, from: "alice")
        _ = try await harness.ok(.locationPause(from: "bob", until: nil), as: aliceAuth, sink: alice)
        XCTAssertEqual(harness.relay.localLastPosition(of: "alice", for: ["bob"]), LastPositionAnswer(position: nil, hiddenFrom: ["bob"]))
        XCTAssertEqual(harness.relay.localLastPosition(of: "alice", for: ["carol", "dave"]), LastPositionAnswer(position: here))

        _ = try await harness.ok(.locationPause(from: nil, until: nil), as: aliceAuth, sink: alice)
        _ = try await harness.ok(.alarmRaise(Request.AlarmRaise(to: ["bob"])), as: aliceAuth, sink: alice)
        XCTAssertEqual(harness.relay.localLastPosition(of: "alice", for: ["bob", "carol"]),
                       LastPositionAnswer(position: here, hiddenFrom: ["carol"]), "bob gets the alarm: never hidden")
    }

    /// The walker is on another relay, which says a pause hides them from bob, while this relay's cache
    /// (and the position its snapshot brought) does not know the pause yet: bob is shown no position.
    func testAPauseOnlyTheWalkersRelayKnowsHidesTheirLastPositionHere() async throws {
        let (harness, bus) = try await harness()
        let (alice, aliceAuth) = try await harness.connect("alice")
        let (bob, bobAuth) = try await harness.connect("bob")
        _ = try await harness.ok(.shareAlways(with: ["bob"]), as: aliceAuth, sink: alice)
        let started = try await harness.ok(.sessionStart(SessionOptions(invite: ["bob"])), as: aliceAuth, sink: alice)
        let id = try XCTUnwrap(started.field("session")?["sessionId"]?.stringValue)
        harness.relay.disconnect("alice", sink: alice)
        harness.relay.remotePresence(.snapshot(PresenceSnapshot(node: "there", epoch: "e", seq: 1, online: ["alice"],
                                                                positions: ["alice": LastPosition(position(57.7, harness))])))
        await harness.relay.drain()
        let located = try await harness.ok(.friendLocation(username: "alice"), as: bobAuth, sink: bob)
        XCTAssertEqual(located.field("position")?["lat"], 57.7, "no pause: the position")

        bus.lastPositionAnswer.withLock { $0 = LastPositionAnswer(position: nil, hiddenFrom: ["bob"]) }
        let accepted = try await harness.ok(.sessionAccept(sessionId: id), as: bobAuth, sink: bob)
        XCTAssertEqual(accepted.field("position"), .null)
        let refused = await harness.serve(.friendLocation(username: "alice"), as: bobAuth, sink: bob)
        guard case .failure(.forbidden) = refused else { return XCTFail("expected forbidden, got \(refused)") }
        XCTAssertEqual(bus.lastPositionAskers.withLock { $0 }, [["bob"], ["bob"], ["bob"]], "each request names its asker")
    }
}
