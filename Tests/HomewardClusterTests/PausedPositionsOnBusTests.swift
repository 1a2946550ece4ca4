import HomewardCore
import HomewardCoreTestSupport
import HomewardProtocol
import XCTest

/// The walker is connected to another relay, which sends their last positions (in its presence heartbeat and
/// its `hw.last` answers) with the restriction each was sent under: this relay shows a friend what the
/// walker's relay would, never a position a pause hid from them, also after the pause ended.
final class PausedPositionsOnBusTests: XCTestCase {
    func testAPositionSentElsewhereDuringAPauseIsNotShownHereAfterIt() async throws {
        let bus = RecordingBus()
        let harness = try await SafetyHarness(users: ["alice", "bob", "carol"], friends: [("alice", "bob"), ("alice", "carol")], bus: bus)
        let (alice, aliceAuth) = try await harness.connect("alice")
        let (bob, bobAuth) = try await harness.connect("bob")
        let (carol, carolAuth) = try await harness.connect("carol")
        _ = try await harness.ok(.shareAlways(with: ["bob", "carol"]), as: aliceAuth, sink: alice)
        harness.relay.disconnect("alice", sink: alice)

        func at(_ lat: Double) -> Position { Position(lat: lat, lon: 11.9, ts: harness.clock.now) }
        var last = LastPosition(at(1))
        last.record(at(2), restriction: .allBut(["bob"]))  // sent while paused from bob, who has resumed since
        harness.relay.remotePresence(.snapshot(PresenceSnapshot(node: "there", epoch: "e", seq: 1, online: ["alice"], positions: ["alice": last])))
        await harness.relay.drain()
        let fromSnapshot = try await harness.ok(.friendLocation(username: "alice"), as: bobAuth, sink: bob)
        XCTAssertEqual(fromSnapshot.field("position")?["lat"], 1)
        let forCarol = try await harness.ok(.friendLocation(username: "alice"), as: carolAuth, sink: carol)
        XCTAssertEqual(forCarol.field("position")?["lat"], 2)

        last.record(at(3), restriction: .only([]))  // paused from everyone, then resumed
        bus.lastPositionAnswer.withLock { $0 = LastPositionAnswer(last: last) }
        let fromAnswer = try await harness.ok(.friendLocation(username: "alice"), as: bobAuth, sink: bob)
        XCTAssertEqual(fromAnswer.field("position")?["lat"], 1, "the walker's relay's answer, shown by the same rule")
    }
}
