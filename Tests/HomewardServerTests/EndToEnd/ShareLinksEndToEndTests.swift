import Foundation
import HomewardProtocol
import XCTest

/// Share links (protocol 1.1) through the whole relay: sign-in features, viewers on the position
/// fan-out, read-only viewers, and the ends of a link.
final class ShareLinksEndToEndTests: EndToEndTestCase {
    /// alice walks with bob observing; returns the session id.
    private func walk(_ alice: TestUser, observedBy bob: TestUser) async throws -> String {
        let started = try await alice.client.ok("session.start", ["invite": [.string(bob.username)]])
        let id = try XCTUnwrap(started["session"]?["sessionId"]?.stringValue)
        try await bob.client.event("session.invite")
        try await bob.client.ok("session.accept", ["sessionId": .string(id)])
        return id
    }

    private func token(of share: JSONValue) throws -> String { try XCTUnwrap(share["share"]?["token"]?.stringValue) }

    func testSignInRepliesListTheFeaturesTheConfigurationGives() async throws {
        let relay = try await startRelay { $0.features = ["share", "later"] }
        let alice = try await relay.user("alice")
        let again = try await relay.connect()
        let hello = try await again.ok("hello", ["token": .string(alice.token)])
        XCTAssertEqual(hello["features"], ["share", "later"])
    }

    func testAViewerGetsTheOwnersPositionsOnlyAndEveryRequestIsForbidden() async throws {
        let (relay, alice, bob, _, _) = try await cast()
        let id = try await walk(alice, observedBy: bob)
        let share = try await alice.client.ok("share.create", ["sessionId": .string(id)])
        let viewer = try await relay.connect(label: "viewer")
        let watched = try await viewer.ok("watch", ["token": .string(try token(of: share))])
        XCTAssertEqual(watched["session"]?["sessionId"], .string(id))

        try await alice.client.send(["type": "pos", "lat": 57.7, "lon": 11.9])
        let position = try await viewer.event("pos")
        XCTAssertEqual(position["from"], .string(alice.username))
        try await bob.client.event("pos")

        for type in ["session.list", "ping", "pos", "friend.list"] {
            let code = try await viewer.failure(type, ["lat": 1, "lon": 2])
            XCTAssertEqual(code, "forbidden", type)
        }
        try await alice.client.send(["type": "pos", "lat": 57.8, "lon": 11.9])
        let later = try await viewer.event("pos")
        XCTAssertEqual(later["lat"], 57.8, "still watching after the refusals")
    }

    func testRevokeEndsEveryViewerWithRevokedThenClose1000() async throws {
        let (relay, alice, bob, _, _) = try await cast()
        let id = try await walk(alice, observedBy: bob)
        let share = try await alice.client.ok("share.create", ["sessionId": .string(id)])
        let viewers = [try await relay.connect(label: "v1"), try await relay.connect(label: "v2")]
        for viewer in viewers { try await viewer.ok("watch", ["token": .string(try token(of: share))]) }
        let shareId = try XCTUnwrap(share["share"]?["shareId"])
        try await alice.client.ok("share.revoke", ["shareId": shareId])
        for viewer in viewers {
            let ended = try await viewer.event("session.ended", timeout: 1)
            XCTAssertEqual(ended["reason"], "revoked")
            let code = try await viewer.closeCode(timeout: 1)
            XCTAssertEqual(code, 1000)
        }
        let bobEnded = try await bob.client.eventsAfterRoundTrip("session.ended")
        XCTAssertEqual(bobEnded, [], "the session goes on")
    }

    func testAnUnknownTokenIsNotFoundThenClose1008AndALinkHasAViewerLimit() async throws {
        let relay = try await startRelay { $0.relayLimits.viewersPerShare = 1 }
        let alice = try await relay.user("alice")
        let started = try await alice.client.ok("session.start", ["invite": []])
        let share = try await alice.client.ok("share.create", ["sessionId": started["session"]?["sessionId"] ?? .null])

        let guesser = try await relay.connect(label: "guesser")
        let guessed = try await guesser.failure("watch", ["token": "not-a-token"])
        XCTAssertEqual(guessed, "not_found")
        let guessClose = try await guesser.closeCode()
        XCTAssertEqual(guessClose, 1008)

        let first = try await relay.connect(label: "first")
        try await first.ok("watch", ["token": .string(try token(of: share))])
        let second = try await relay.connect(label: "second")
        let refused = try await second.failure("watch", ["token": .string(try token(of: share))])
        XCTAssertEqual(refused, "rate_limited")
        let secondClose = try await second.closeCode()
        XCTAssertEqual(secondClose, 1008)
        await first.close()
    }
}
