import HomewardCore
import HomewardCoreTestSupport
import HomewardProtocol
import XCTest

/// A position sent while the walker was paused from someone, through the `Relay` actor: after the pause
/// ends it is still not shown to them, in `friend.location`, an accept reply or a `watch` reply, also
/// after a restart that loaded the pause of a walker who shares with nobody yet.
final class PausedPositionsRelayTests: XCTestCase {
    private func position(_ lat: Double, _ harness: SafetyHarness) -> Position {
        Position(lat: lat, lon: 11.9, ts: harness.clock.now)
    }

    func testFriendLocationAfterAPauseFromEveryoneOrFromOneFriendShowsNothingSentDuringIt() async throws {
        let harness = try await SafetyHarness(users: ["alice", "bob", "carol"], friends: [("alice", "bob"), ("alice", "carol")])
        let (alice, auth) = try await harness.connect("alice")
        let (bob, bobAuth) = try await harness.connect("bob")
        let (carol, carolAuth) = try await harness.connect("carol")
        _ = try await harness.ok(.shareAlways(with: ["bob", "carol"]), as: auth, sink: alice)
        harness.relay.publish(position(1, harness), from: "alice")

        _ = try await harness.ok(.locationPause(from: nil, until: nil), as: auth, sink: alice)
        harness.relay.publish(position(2, harness), from: "alice")
        _ = try await harness.ok(.locationResume(from: nil), as: auth, sink: alice)
        for (sink, who) in [(bob, bobAuth), (carol, carolAuth)] {
            let located = try await harness.ok(.friendLocation(username: "alice"), as: who, sink: sink)
            XCTAssertEqual(located.field("position")?["lat"], 1, "\(who.username): not the position sent while paused")
        }

        _ = try await harness.ok(.locationPause(from: "bob", until: nil), as: auth, sink: alice)
        harness.relay.publish(position(3, harness), from: "alice")
        _ = try await harness.ok(.locationResume(from: "bob"), as: auth, sink: alice)
        let forBob = try await harness.ok(.friendLocation(username: "alice"), as: bobAuth, sink: bob)
        XCTAssertEqual(forBob.field("position")?["lat"], 1, "the pause hid 3 from bob")
        let forCarol = try await harness.ok(.friendLocation(username: "alice"), as: carolAuth, sink: carol)
        XCTAssertEqual(forCarol.field("position")?["lat"], 3, "carol got 3")
        XCTAssertEqual(carol.events("pos").map { $0["lat"] }, [1, 3])
    }

    func testANewObserverAndANewViewerAreNotShownAPositionSentDuringAPause() async throws {
        let harness = try await SafetyHarness(users: ["alice", "bob"], friends: [("alice", "bob")])
        let (alice, auth) = try await harness.connect("alice")
        let (bob, bobAuth) = try await harness.connect("bob")
        let started = try await harness.ok(.sessionStart(SessionOptions(invite: ["bob"])), as: auth, sink: alice)
        let id = try XCTUnwrap(started.field("session")?["sessionId"]?.stringValue)
        let created = try await harness.ok(.shareCreate(sessionId: id, ttl: nil), as: auth, sink: alice)
        let token = try XCTUnwrap(created.field("share")?["token"]?.stringValue)
        harness.relay.publish(position(1, harness), from: "alice")
        _ = try await harness.ok(.locationPause(from: nil, until: nil), as: auth, sink: alice)
        harness.relay.publish(position(2, harness), from: "alice")
        _ = try await harness.ok(.locationResume(from: nil), as: auth, sink: alice)

        let accepted = try await harness.ok(.sessionAccept(sessionId: id), as: bobAuth, sink: bob)
        XCTAssertEqual(accepted.field("position")?["lat"], 1)
        let viewer = RecordingSink("viewer")
        let watched = try await harness.serve(.watch(token: token), as: nil, sink: viewer).get()
        XCTAssertEqual(watched.field("lastPosition")?["lat"], 1)
    }

    /// The pause of someone who shares with nobody is loaded at start like an owner's, so positions sent
    /// during it are recorded as hidden: after they resume and start a walk, the new observer does not get one.
    func testAPauseLoadedAtStartRestrictsPositionsOfAWalkerWhoSharesWithNobodyYet() async throws {
        let harness = try await SafetyHarness(users: ["alice", "bob"], friends: [("alice", "bob")])
        let (alice, auth) = try await harness.connect("alice")
        _ = try await harness.ok(.locationPause(from: "bob", until: nil), as: auth, sink: alice)
        try await harness.restart()
        let (alice2, auth2) = try await harness.connect("alice")
        let (bob, bobAuth) = try await harness.connect("bob")
        harness.relay.publish(position(2, harness), from: "alice")
        _ = try await harness.ok(.locationResume(from: "bob"), as: auth2, sink: alice2)
        let started = try await harness.ok(.sessionStart(SessionOptions(invite: ["bob"])), as: auth2, sink: alice2)
        let id = try XCTUnwrap(started.field("session")?["sessionId"]?.stringValue)
        let accepted = try await harness.ok(.sessionAccept(sessionId: id), as: bobAuth, sink: bob)
        XCTAssertEqual(accepted.field("position"), .null)
        _ = alice
    }
}
