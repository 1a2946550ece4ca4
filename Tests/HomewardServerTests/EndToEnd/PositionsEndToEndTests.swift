import HomewardCoreTestSupport
import HomewardProtocol
import XCTest

/// Positions reach the observers of the sender's session, each exactly once, and nobody else.
final class PositionsEndToEndTests: EndToEndTestCase {
    func testPositionsReachObserversExactlyOnceAndNobodyElse() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        let bob = try await relay.user("bob")        // accepts: observer
        let carol = try await relay.user("carol")    // accepts: observer, two devices
        let dave = try await relay.user("dave")      // friend, invited, never accepts
        let erin = try await relay.user("erin")      // friend, not invited
        let mallory = try await relay.user("mallory")  // not a friend
        for friend in [bob, carol, dave, erin] { try await befriend(alice, friend) }
        let carolPhone = try await relay.device(of: carol, label: "carol-phone")

        let start = try await alice.client.ok("session.start", ["invite": [.string(bob.username), .string(carol.username), .string(dave.username)]])
        let id = try XCTUnwrap(start["session"]?["sessionId"]?.stringValue)
        for observer in [bob, carol] {
            try await observer.client.ok("session.accept", ["sessionId": .string(id)])
            try await alice.client.event("session.accepted", where: { $0["by"] == .string(observer.username) })
        }

        // Without an id: no reply on success.
        try await alice.client.send(#"{"type":"pos","lat":57.7089,"lon":11.9746,"acc":8,"alt":12.5,"spd":1.4,"hdg":90,"batt":77,"ts":1763830000000}"#)
        let expected: JSONValue = [
            "type": "pos", "from": .string(alice.username), "lat": 57.7089, "lon": 11.9746, "acc": 8, "alt": 12.5,
            "spd": 1.4, "hdg": 90, "batt": 77, "ts": 1_763_830_000_000,
        ]
        for observer in [bob.client, carol.client, carolPhone] {
            let pos = try await observer.event("pos")
            XCTAssertJSONContains(pos, expected, observer.label)
        }
        // With an id: an ok reply, and the position is relayed too.
        try await alice.client.ok("pos", ["lat": -33.5, "lon": -70.25])
        for observer in [bob.client, carol.client, carolPhone] {
            let pos = try await observer.event("pos")
            XCTAssertEqual(pos["from"], .string(alice.username))
            XCTAssertEqual(pos["lat"], -33.5)
            XCTAssertEqual(pos["lon"], -70.25)
            XCTAssertNotNil(pos["ts"]?.numberValue, "ts defaults to the arrival time")
        }

        // Exactly once: nothing more for the observers, nothing at all for the rest.
        for observer in [bob.client, carol.client, carolPhone] {
            let extra = try await observer.eventsAfterRoundTrip("pos")
            XCTAssertEqual(extra, [], "\(observer.label) got a position twice")
        }
        for other in [alice, dave, erin, mallory] {
            let leaked = try await other.client.eventsAfterRoundTrip("pos")
            XCTAssertEqual(leaked, [], "\(other.username) is not an observer but got \(leaked)")
        }
        // The sender got no reply for the id-less position.
        let stray = try await alice.client.messagesAfterRoundTrip { $0["re"] == nil && ($0["type"] == "ok" || $0["type"] == "error") }
        XCTAssertEqual(stray, [])
    }

    func testNoSessionMeansNoAudience() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        let bob = try await relay.user("bob")
        try await befriend(alice, bob)
        try await alice.client.ok("pos", ["lat": 1, "lon": 2])
        let leaked = try await bob.client.eventsAfterRoundTrip("pos")
        XCTAssertEqual(leaked, [])
    }

    func testObserverStopsReceivingAfterLeavingAndAfterTheEnd() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        let bob = try await relay.user("bob")
        let carol = try await relay.user("carol")
        try await befriend(alice, bob)
        try await befriend(alice, carol)
        let start = try await alice.client.ok("session.start")
        let id = try XCTUnwrap(start["session"]?["sessionId"]?.stringValue)
        for observer in [bob, carol] {
            try await observer.client.ok("session.accept", ["sessionId": .string(id)])
            try await alice.client.event("session.accepted", where: { $0["by"] == .string(observer.username) })
        }
        try await bob.client.ok("session.leave", ["sessionId": .string(id)])
        try await alice.client.event("session.left")
        try await alice.client.ok("pos", ["lat": 10, "lon": 20])
        let carolPos = try await carol.client.event("pos")
        XCTAssertEqual(carolPos["lat"], 10)
        let bobPos = try await bob.client.eventsAfterRoundTrip("pos")
        XCTAssertEqual(bobPos, [], "bob left")

        try await alice.client.ok("session.end", ["sessionId": .string(id)])
        try await carol.client.event("session.ended")
        try await alice.client.ok("pos", ["lat": 11, "lon": 21])
        let afterEnd = try await carol.client.eventsAfterRoundTrip("pos")
        XCTAssertEqual(afterEnd, [], "the session ended")
    }

    func testObserversOwnPositionsDoNotReachTheOwner() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        let bob = try await relay.user("bob")
        try await befriend(alice, bob)
        let start = try await alice.client.ok("session.start")
        let id = try XCTUnwrap(start["session"]?["sessionId"]?.stringValue)
        try await bob.client.ok("session.accept", ["sessionId": .string(id)])
        try await alice.client.event("session.accepted")
        try await bob.client.ok("pos", ["lat": 5, "lon": 6])
        let leaked = try await alice.client.eventsAfterRoundTrip("pos")
        XCTAssertEqual(leaked, [], "following is one-way")
    }

    func testManyPositionsArriveInOrder() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        let bob = try await relay.user("bob")
        try await befriend(alice, bob)
        let start = try await alice.client.ok("session.start")
        let id = try XCTUnwrap(start["session"]?["sessionId"]?.stringValue)
        try await bob.client.ok("session.accept", ["sessionId": .string(id)])
        try await alice.client.event("session.accepted")
        try await sendWalk(from: alice)
        try await expectWalkInOrder(at: bob)
        let extra = try await bob.client.eventsAfterRoundTrip("pos")
        XCTAssertEqual(extra, [])
    }

    /// The relay hands connections to its event loops in turn, so with two loops some observers share the
    /// walker's loop (written to directly) and some do not (reached through a per-loop batch). Both kinds
    /// get the walk in order, up to its newest position.
    func testObserversOnBothEventLoopsGetPositionsInOrder() async throws {
        let relay = try await startRelay { $0.eventLoopThreads = 2 }
        let alice = try await relay.user("alice")
        var observers: [TestUser] = []
        for name in ["bob", "carol", "dave"] {
            let observer = try await relay.user(name)
            try await befriend(alice, observer)
            observers.append(observer)
        }
        let start = try await alice.client.ok("session.start")
        let id = try XCTUnwrap(start["session"]?["sessionId"]?.stringValue)
        for observer in observers {
            try await observer.client.ok("session.accept", ["sessionId": .string(id)])
            try await alice.client.event("session.accepted")
        }
        try await sendWalk(from: alice)
        for observer in observers { try await expectWalkInOrder(at: observer) }
    }

    private static let walkLength = 50

    /// Positions stamped `ts` 1000, 1001, ... as fast as the walker can send them (within the rate
    /// limit of 100/s with bursts of 200), then a ping so that all of them have reached the relay.
    private func sendWalk(from walker: TestUser) async throws {
        for index in 0..<Self.walkLength {
            try await walker.client.send(#"{"type":"pos","lat":1,"lon":2,"ts":\#(1_000 + index)}"#)
        }
        try await walker.client.ok("ping")
    }

    /// The newest position of `sendWalk` always arrives; older ones may be dropped for a slow observer,
    /// but never reordered.
    private func expectWalkInOrder(at observer: TestUser, file: StaticString = #filePath, line: UInt = #line) async throws {
        var last: Double = 0
        while last < Double(1_000 + Self.walkLength - 1) {
            let pos = try await observer.client.event("pos")
            let ts = try XCTUnwrap(pos["ts"]?.numberValue, file: file, line: line)
            XCTAssertGreaterThan(ts, last, "positions out of order for \(observer.username)", file: file, line: line)
            last = ts
        }
    }
}
