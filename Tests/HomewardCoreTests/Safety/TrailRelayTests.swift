import HomewardCore
import HomewardCoreTestSupport
import HomewardProtocol
import XCTest

/// The walk's trail through the `Relay` actor: recorded from the session's start by the fan-out, shown in
/// the accept and watch replies and `friend.trail` without the points a pause hid, dropped when the session
/// ends, and started again (empty, `since` the restart) after a restart.
final class TrailRelayTests: XCTestCase {
    private func position(_ lat: Double, _ harness: SafetyHarness) -> Position {
        Position(lat: lat, lon: 11.9, ts: harness.clock.now)
    }

    private func lats(_ trail: JSONValue?) -> [Double]? {
        TrailInfo(json: trail).map { $0.points.map(\.lat) }
    }

    func testTheAcceptAndWatchRepliesCarryTheTrailLessWhatAPauseHid() async throws {
        let harness = try await SafetyHarness(users: ["alice", "bob", "carol"], friends: [("alice", "bob"), ("alice", "carol")])
        let (alice, auth) = try await harness.connect("alice")
        let (bob, bobAuth) = try await harness.connect("bob")
        let (carol, carolAuth) = try await harness.connect("carol")
        let started = try await harness.ok(.sessionStart(SessionOptions(invite: ["bob", "carol"])), as: auth, sink: alice)
        let id = try XCTUnwrap(started.field("session")?["sessionId"]?.stringValue)
        let created = try await harness.ok(.shareCreate(sessionId: id, ttl: nil), as: auth, sink: alice)
        let token = try XCTUnwrap(created.field("share")?["token"]?.stringValue)
        harness.relay.publish(position(1, harness), from: "alice")
        _ = try await harness.ok(.locationPause(from: "bob", until: nil), as: auth, sink: alice)
        harness.relay.publish(position(2, harness), from: "alice")
        _ = try await harness.ok(.locationResume(from: "bob"), as: auth, sink: alice)
        harness.relay.publish(position(3, harness), from: "alice")

        let forBob = try await harness.ok(.sessionAccept(sessionId: id), as: bobAuth, sink: bob)
        XCTAssertEqual(lats(forBob.field("trail")), [1, 3], "never 2, sent while paused from bob")
        XCTAssertEqual(TrailInfo(json: forBob.field("trail"))?.sessionId, id)
        XCTAssertEqual(TrailInfo(json: forBob.field("trail"))?.since, started.field("session")?.int64("startedAt"))
        let forCarol = try await harness.ok(.sessionAccept(sessionId: id), as: carolAuth, sink: carol)
        XCTAssertEqual(lats(forCarol.field("trail")), [1, 2, 3])
        let watched = try await harness.serve(.watch(token: token), as: nil, sink: RecordingSink("viewer")).get()
        XCTAssertEqual(lats(watched.field("trail")), [1, 2, 3])
        let asked = try await harness.ok(.friendTrail(username: "alice"), as: bobAuth, sink: bob)
        XCTAssertEqual(lats(asked.field("trail")), [1, 3])
    }

    func testTheTrailIsDroppedWhenTheSessionEnds() async throws {
        let harness = try await SafetyHarness(users: ["alice", "bob"], friends: [("alice", "bob")])
        let (alice, auth) = try await harness.connect("alice")
        let (bob, bobAuth) = try await harness.connect("bob")
        let first = try await harness.ok(.sessionStart(SessionOptions(invite: ["bob"])), as: auth, sink: alice)
        let id = try XCTUnwrap(first.field("session")?["sessionId"]?.stringValue)
        _ = try await harness.ok(.sessionAccept(sessionId: id), as: bobAuth, sink: bob)
        harness.relay.publish(position(1, harness), from: "alice")
        let before = try await harness.ok(.friendTrail(username: "alice"), as: bobAuth, sink: bob)
        XCTAssertEqual(lats(before.field("trail")), [1])
        _ = try await harness.ok(.sessionEnd(sessionId: id), as: auth, sink: alice)
        XCTAssertNil(harness.relay.presence.trailRecord(of: "alice"), "gone from memory with the session")
        harness.relay.publish(position(2, harness), from: "alice")  // no session: recorded nowhere

        let second = try await harness.ok(.sessionStart(SessionOptions(invite: ["bob"])), as: auth, sink: alice)
        let id2 = try XCTUnwrap(second.field("session")?["sessionId"]?.stringValue)
        let accepted = try await harness.ok(.sessionAccept(sessionId: id2), as: bobAuth, sink: bob)
        XCTAssertEqual(TrailInfo(json: accepted.field("trail")), TrailInfo(sessionId: id2, since: harness.clock.now, points: []))
    }

    func testAfterARestartTheTrailStartsAgainFromTheRestart() async throws {
        let harness = try await SafetyHarness(users: ["alice", "bob"], friends: [("alice", "bob")])
        let (alice, auth) = try await harness.connect("alice")
        let (bob, bobAuth) = try await harness.connect("bob")
        let started = try await harness.ok(.sessionStart(SessionOptions(invite: ["bob"])), as: auth, sink: alice)
        let id = try XCTUnwrap(started.field("session")?["sessionId"]?.stringValue)
        _ = try await harness.ok(.sessionAccept(sessionId: id), as: bobAuth, sink: bob)
        harness.relay.publish(position(1, harness), from: "alice")

        harness.clock.advance(by: 60_000)
        try await harness.restart()
        let (alice2, _) = try await harness.connect("alice")
        let (bob2, bobAuth2) = try await harness.connect("bob")
        harness.relay.publish(position(2, harness), from: "alice")
        let reply = try await harness.ok(.friendTrail(username: "alice"), as: bobAuth2, sink: bob2)
        let trail = TrailInfo(json: reply.field("trail"))
        XCTAssertEqual(trail?.points.map(\.lat), [2], "nothing from before the restart")
        XCTAssertEqual(trail?.since, harness.clock.now, "since the restart, a minute after the start")
        _ = alice2
    }

    func testFriendTrailIsRefusedToWhomDoesNotReceiveTheWalker() async throws {
        let harness = try await SafetyHarness(users: ["alice", "bob", "erin"], friends: [("alice", "bob")])
        let (alice, auth) = try await harness.connect("alice")
        let (bob, bobAuth) = try await harness.connect("bob")
        let (erin, erinAuth) = try await harness.connect("erin")
        let started = try await harness.ok(.sessionStart(SessionOptions(invite: ["bob"])), as: auth, sink: alice)
        let id = try XCTUnwrap(started.field("session")?["sessionId"]?.stringValue)
        for (request, who, sink, code) in [
            (Request.friendTrail(username: "alice"), bobAuth, bob, CoreTestErrorKind.forbidden),  // invited, not following
            (.friendTrail(username: "alice"), erinAuth, erin, .forbidden),                        // not a friend
            (.friendTrail(username: "nobody"), bobAuth, bob, .notFound),
            (.friendTrail(username: "bob"), bobAuth, bob, .invalid),                               // yourself
        ] {
            let result = await harness.serve(request, as: who, sink: sink)
            guard case .failure(let error) = result else { return XCTFail("\(request) as \(who.username) succeeded") }
            XCTAssertEqual(error.kind, code, "\(request) as \(who.username)")
        }
        _ = try await harness.ok(.sessionAccept(sessionId: id), as: bobAuth, sink: bob)
        _ = try await harness.ok(.locationPause(from: "bob", until: nil), as: auth, sink: alice)
        let paused = await harness.serve(.friendTrail(username: "alice"), as: bobAuth, sink: bob)
        guard case .failure(let error) = paused else { return XCTFail("paused from bob, yet a trail") }
        XCTAssertEqual(error.kind, .forbidden)
    }
}
