import HomewardCore
import HomewardCoreTestSupport
import HomewardProtocol
import XCTest

/// A position the walker sends while a follower's `session.accept` is being stored must reach the new
/// follower: in the accept's reply or by fan-out. The rule reads the last position before the store
/// and the audience changes after it, so the reply must read it again once the audience has changed.
final class SessionAcceptRaceTests: XCTestCase {
    func testAPositionSentWhileTheAcceptIsStoredReachesTheNewFollower() async throws {
        let (harness, store) = try await SafetyHarness.instrumented(users: ["alice", "bob"], friends: [("alice", "bob")])
        let (alice, aliceAuth) = try await harness.connect("alice")
        let (bob, bobAuth) = try await harness.connect("bob")
        let started = try await harness.ok(.sessionStart(SessionOptions(invite: ["bob"])), as: aliceAuth, sink: alice)
        let sessionId = try XCTUnwrap(started.field("session")?["sessionId"]?.stringValue)

        store.holdWrites()
        let relay = harness.relay
        async let reply = withCheckedContinuation { (continuation: CheckedContinuation<Result<RelayReply, RelayError>, Never>) in
            relay.serve(.sessionAccept(sessionId: sessionId), auth: bobAuth, peer: "test", sink: bob) {
                continuation.resume(returning: $0)
            }
        }
        await store.writeIsHeld()  // the rule has run; its change is being stored
        _ = relay.publish(Position(lat: 51.5, lon: -0.12, ts: harness.clock.now), from: "alice")
        store.releaseWrites()
        let accepted = try await reply.get()
        await harness.relay.drain()

        let inReply = accepted.field("position")?["lat"]?.numberValue
        let byFanOut = bob.events("pos").compactMap { $0["lat"]?.numberValue }
        XCTAssertTrue(inReply == 51.5 || byFanOut.contains(51.5),
                      "the position reached bob neither in the reply (\(String(describing: inReply))) nor by fan-out (\(byFanOut))")
    }
}
