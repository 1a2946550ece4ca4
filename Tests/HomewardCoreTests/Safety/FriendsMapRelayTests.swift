import HomewardCore
import HomewardCoreTestSupport
import HomewardProtocol
import XCTest

/// The friends' map through the `Relay` actor on a manual clock and a real SQLite file: standing-share
/// positions through the presence table's fan-out, a timed pause that ends after a restart, and a
/// message queued for an offline friend delivered at sign-in after a restart with both times set.
final class FriendsMapRelayTests: XCTestCase {
    func testATimedPauseEndsOnTheClockAfterARestartAndPositionsFlowAgain() async throws {
        let harness = try await SafetyHarness(users: ["alice", "bob", "carol"], friends: [("alice", "bob"), ("alice", "carol")])
        let (alice, auth) = try await harness.connect("alice")
        _ = try await harness.ok(.shareAlways(with: ["bob"]), as: auth, sink: alice)
        let (bob, _) = try await harness.connect("bob")
        let (carol, _) = try await harness.connect("carol")
        XCTAssertEqual(harness.relay.publish(Position(lat: 1, lon: 2, ts: harness.clock.now), from: "alice"), 1)
        XCTAssertEqual(bob.events("pos").count, 1)
        XCTAssertTrue(carol.events("pos").isEmpty, "only the chosen friend")

        _ = try await harness.ok(.locationPause(from: nil, until: harness.clock.now + 60_000), as: auth, sink: alice)
        XCTAssertEqual(harness.relay.publish(Position(lat: 1, lon: 3, ts: harness.clock.now), from: "alice"), 0)

        try await harness.restart()
        let (alice2, _) = try await harness.connect("alice")
        let (bob2, _) = try await harness.connect("bob")
        await harness.advance(by: 59_999)
        XCTAssertEqual(harness.relay.publish(Position(lat: 1, lon: 4, ts: harness.clock.now), from: "alice"), 0, "still paused")
        await harness.advance(by: 1)
        XCTAssertEqual(alice2.events("location.resumed").count, 1, "the walker is told")
        XCTAssertEqual(harness.relay.publish(Position(lat: 1, lon: 5, ts: harness.clock.now), from: "alice"), 1)
        XCTAssertEqual(bob2.events("pos").map { $0["lon"] }, [.int(5)])
    }

    func testAMessageQueuedForAnOfflineFriendSurvivesARestartAndArrivesWithBothTimes() async throws {
        let harness = try await SafetyHarness(users: ["alice", "bob"], friends: [("alice", "bob")])
        let (alice, auth) = try await harness.connect("alice")
        let queuedAt = harness.clock.now
        let sent = try await harness.ok(.msgSend(to: "bob", text: "see you at 8"), as: auth, sink: alice)
        XCTAssertNil(sent.field("message")?["deliveredAt"], "bob is offline")

        try await harness.restart()
        let (alice2, _) = try await harness.connect("alice")
        await harness.advance(by: 5_000)
        let (bob, _) = try await harness.connect("bob")
        let message = try XCTUnwrap(bob.events("msg").first?["message"])
        XCTAssertEqual(message["text"], "see you at 8")
        XCTAssertEqual(message["queuedAt"], .int(queuedAt))
        XCTAssertEqual(message["deliveredAt"], .int(queuedAt + 5_000))
        XCTAssertEqual(alice2.events("msg.delivered").first?["deliveredAt"], .int(queuedAt + 5_000))
    }
}
