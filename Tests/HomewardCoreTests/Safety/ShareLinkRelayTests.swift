import HomewardCore
import HomewardCoreTestSupport
import HomewardProtocol
import XCTest

/// Share links through the `Relay` actor on a manual clock and a real SQLite file: viewers on the
/// fan-out, and link expiry after a restart (the stored link is loaded and ends at its time; that the
/// real timer is armed for it is `nextDeadline`'s job, tested in `ShareRulesTests`, and the Python suite's).
final class ShareLinkRelayTests: XCTestCase {
    private func watch(_ token: String, in harness: SafetyHarness) async throws -> RecordingSink {
        let viewer = RecordingSink("viewer")
        let reply = try await harness.serve(.watch(token: token), as: nil, sink: viewer).get()
        guard case .watching = reply.auth else { throw RelayError.notFound("not watching: \(reply.auth)") }
        return viewer
    }

    func testAStoredLinkExpiresOnTimeAfterARestartAndItsViewerIsToldThenClosed() async throws {
        let harness = try await SafetyHarness(users: ["alice", "bob"], friends: [("alice", "bob")])
        let (alice, auth) = try await harness.connect("alice")
        let started = try await harness.ok(.sessionStart(SessionOptions(invite: ["bob"])), as: auth, sink: alice)
        let sessionId = try XCTUnwrap(started.field("session")?["sessionId"]?.stringValue)
        let created = try await harness.ok(.shareCreate(sessionId: sessionId, ttl: 60), as: auth, sink: alice)
        let token = try XCTUnwrap(created.field("share")?["token"]?.stringValue)

        let before = try await watch(token, in: harness)
        harness.relay.publish(Position(lat: 1, lon: 2, ts: harness.clock.now), from: "alice")
        XCTAssertEqual(before.events("pos").count, 1, "the viewer is on the owner's fan-out")

        try await harness.restart()
        await harness.advance(by: 30_000)
        let viewer = try await watch(token, in: harness)
        XCTAssertTrue(viewer.events("session.ended").isEmpty)
        await harness.advance(by: 30_000)
        XCTAssertEqual(viewer.events("session.ended").map { $0["reason"] }, ["expired"])
        XCTAssertEqual(viewer.closes, [.normal])
        let again = await harness.serve(.watch(token: token), as: nil, sink: RecordingSink("late"))
        XCTAssertEqual(again.failure, .notFound("no such share link (unknown, expired or revoked)"))
    }

    func testFailedWatchesFromOneAddressAreRateLimitedEvenForAValidToken() async throws {
        let harness = try await SafetyHarness(users: ["alice"], friends: [])
        let (alice, auth) = try await harness.connect("alice")
        let started = try await harness.ok(.sessionStart(SessionOptions(invite: [])), as: auth, sink: alice)
        let sessionId = try XCTUnwrap(started.field("session")?["sessionId"]?.stringValue)
        let created = try await harness.ok(.shareCreate(sessionId: sessionId, ttl: nil), as: auth, sink: alice)
        let token = try XCTUnwrap(created.field("share")?["token"]?.stringValue)
        for n in 0..<RelayLimits().watchFailuresPerAddress {
            let guess = await harness.serve(.watch(token: "guess-\(n)"), as: nil, sink: RecordingSink("guess"))
            XCTAssertEqual(guess.failure.map { "\($0)".hasPrefix("notFound") }, true)
        }
        let valid = await harness.serve(.watch(token: token), as: nil, sink: RecordingSink("valid"))
        guard case .rateLimited? = valid.failure else { return XCTFail("expected rate_limited, got \(valid)") }
    }
}

private extension Result {
    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
