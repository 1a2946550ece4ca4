import Foundation
import HomewardCoreTestSupport
import HomewardProtocol
import HomewardServer
import XCTest

/// Three relays on one PostgreSQL and one nats-server, clients spread over them: everything behaves as on
/// one relay, wherever each client is connected.
final class ClusterEndToEndTests: ClusterTestCase {
    private func position(_ i: Int) -> JSONValue {
        ["type": "pos", "lat": .number(57.0 + Double(i) / 1000), "lon": 11.5, "ts": .int(1_763_830_000_000 + Int64(i))]
    }

    func testPositionsOfAWalkerOnOneNodeReachObserversOnTheOthersInOrder() async throws {
        let cluster = try await startCluster()
        let a = try await startNode("node-a", of: cluster)
        let b = try await startNode("node-b", of: cluster)
        let c = try await startNode("node-c", of: cluster)
        let alice = try await a.user("alice")
        let bob = try await b.user("bob")
        let carol = try await c.user("carol")
        let dave = try await b.user("dave")  // a friend on node b who does not follow
        for friend in [bob, carol, dave] { try await befriend(alice, friend) }
        _ = try await follow(alice, by: [bob, carol])

        let count = 200
        for i in 0..<count { try await alice.client.send(position(i)) }
        for observer in [bob, carol] {
            for i in 0..<count {
                let pos = try await observer.client.event("pos")
                XCTAssertEqual(pos["from"], .string(alice.username))
                XCTAssertEqual(pos["lat"], .number(57.0 + Double(i) / 1000), "\(observer.username): position \(i) in order")
            }
        }
        for observer in [bob, carol] {
            let extra = try await observer.client.eventsAfterRoundTrip("pos")
            XCTAssertEqual(extra, [], "\(observer.username) got a position twice")
        }
        let leaked = try await dave.client.eventsAfterRoundTrip("pos")
        XCTAssertEqual(leaked, [], "dave does not follow alice")
    }

    /// A friend request, an invite and an alarm made on one relay reach their recipients on the others;
    /// an alarm recipient who was offline gets it when they come back, on yet another relay.
    func testFriendRequestsInvitesAndAlarmsCrossRelays() async throws {
        let cluster = try await startCluster()
        let a = try await startNode("node-a", of: cluster)
        let b = try await startNode("node-b", of: cluster)
        let c = try await startNode("node-c", of: cluster)
        let alice = try await a.user("alice", name: "Alice")
        let bob = try await b.user("bob")
        let carol = try await c.user("carol")

        try await alice.client.ok("friend.request", ["username": .string(bob.username)])
        try await bob.client.event("friend.request", where: { $0["from"]?["username"] == .string(alice.username) })
        try await bob.client.ok("friend.accept", ["username": .string(alice.username)])
        try await alice.client.event("friend.added", where: { $0["user"]?["username"] == .string(bob.username) })
        try await befriend(carol, alice)

        let start = try await alice.client.ok("session.start", ["invite": [.string(bob.username)]])
        let id = try XCTUnwrap(start["session"]?["sessionId"]?.stringValue)
        let invite = try await bob.client.event("session.invite")
        XCTAssertEqual(invite["session"]?["sessionId"], .string(id))
        XCTAssertEqual(invite["session"]?["owner"]?["username"], .string(alice.username))

        await carol.client.close()
        let raised = try await alice.client.ok("alarm.raise", ["text": "help"])
        let alarmID = try XCTUnwrap(raised["alarm"]?["alarmId"]?.stringValue)
        let alarm = try await bob.client.event("alarm")
        XCTAssertEqual(alarm["alarm"]?["alarmId"], .string(alarmID))
        // A recipient receives the owner's positions from the moment it hears of the alarm.
        try await alice.client.send(position(1))
        let followed = try await bob.client.event("pos", timeout: 2)
        XCTAssertEqual(followed["from"], .string(alice.username))
        try await bob.client.ok("alarm.ack", ["alarmId": .string(alarmID)])
        try await alice.client.event("alarm.acked", where: { $0["by"] == .string(bob.username) })

        // carol comes back on node a (she was on node c): the alarm is waiting for her.
        let back = try await a.reconnect(carol)
        let pending = try await back.client.event("alarm")
        XCTAssertEqual(pending["alarm"]?["alarmId"], .string(alarmID))
        XCTAssertEqual(pending["alarm"]?["text"], "help")
    }

    /// A client that acts on another client's `ok` at once, on another relay, before that relay has heard
    /// the change notice: the relay finds its cache behind PostgreSQL and reloads before serving it.
    func testARequestRightAfterAnotherRelaysOkSeesItsChange() async throws {
        let cluster = try await startCluster()
        let a = try await startNode("node-a", of: cluster)
        let b = try await startNode("node-b", of: cluster)
        let alice = try await a.user("alice")
        for round in 0..<10 {
            let bob = try await b.user("bob")
            try await alice.client.ok("friend.request", ["username": .string(bob.username)])
            let list = try await bob.client.ok("friend.list")
            XCTAssertEqual(list["incoming"]?.arrayValue?.first?["username"], .string(alice.username), "round \(round): \(list)")
            let accepted = try await bob.client.request("friend.accept", ["username": .string(alice.username)])
            XCTAssertEqual(accepted["type"], "ok", "round \(round): \(accepted)")
            let start = try await alice.client.ok("session.start", ["invite": [.string(bob.username)]])
            let id = try XCTUnwrap(start["session"]?["sessionId"]?.stringValue)
            let joined = try await bob.client.request("session.accept", ["sessionId": .string(id)])
            XCTAssertEqual(joined["type"], "ok", "round \(round): \(joined)")
            try await alice.client.ok("session.end", ["sessionId": .string(id)])
        }
    }

    /// Friends see each other come and go within 2 s, on whichever relays they are.
    func testPresenceIsRightOnEveryRelayWithinTwoSeconds() async throws {
        let cluster = try await startCluster()
        let a = try await startNode("node-a", of: cluster)
        let b = try await startNode("node-b", of: cluster)
        let alice = try await a.user("alice")
        let bob = try await b.user("bob")
        try await befriend(alice, bob)
        try await eventually(within: 2, "bob's relay to see alice online") {
            let list = try await bob.client.ok("friend.list")
            return list["friends"]?.arrayValue?.first?["online"] == true
        }
        _ = try await bob.client.eventsAfterRoundTrip("presence")

        await alice.client.close()
        let offline = try await bob.client.event("presence", timeout: 2, where: { $0["username"] == .string(alice.username) })
        XCTAssertEqual(offline["online"], false)
        let list = try await bob.client.ok("friend.list")
        XCTAssertEqual(list["friends"]?.arrayValue?.first?["online"], false)
        XCTAssertNotNil(list["friends"]?.arrayValue?.first?["lastSeen"]?.numberValue)

        _ = try await b.reconnect(alice)
        let online = try await bob.client.event("presence", timeout: 2, where: { $0["username"] == .string(alice.username) })
        XCTAssertEqual(online["online"], true)
    }

    /// A token revoked on one relay no longer signs in on any other within a second, and the connections
    /// signed in with it, on any relay, are closed.
    func testLogoutAndRevocationTakeEffectOnEveryRelayWithinOneSecond() async throws {
        let cluster = try await startCluster()
        let a = try await startNode("node-a", of: cluster)
        let b = try await startNode("node-b", of: cluster)
        let alice = try await a.user("alice")
        // A token issued on node a signs in on node b at once.
        let device = try await b.device(of: alice)

        try await alice.client.ok("logout")
        // The device signed in with the same token is closed; the connection that logged out stays.
        let closed = try await device.closeCode(timeout: 1)
        XCTAssertEqual(closed, 1008)
        XCTAssertTrue(alice.client.isActive)
        try await eventually(within: 1, "node b to refuse the logged-out token") {
            let client = try await b.connect(label: "alice-again")
            defer { Task { await client.close() } }
            return try await client.failure("hello", ["token": .string(alice.token)]) == "unauthenticated"
        }

        let login = try await b.connect(label: "alice-login")
        let second = try await login.ok("login", ["username": .string(alice.username), "password": .string(alice.password)])
        let token = try XCTUnwrap(second["token"]?.stringValue)
        let manager = try await a.connect(label: "alice-manager")
        try await manager.ok("login", ["username": .string(alice.username), "password": .string(alice.password)])
        let sessions = try await manager.ok("auth.sessions")
        let other = try XCTUnwrap(sessions["sessions"]?.arrayValue?.first { $0["current"] == false }?["id"])
        try await manager.ok("auth.revoke", ["tokenId": other])
        let revokedClose = try await login.closeCode(timeout: 1)
        XCTAssertEqual(revokedClose, 1008, "the connection signed in with the revoked token, on node b")
        try await eventually(within: 1, "node b to refuse the revoked token") {
            let client = try await b.connect(label: "alice-revoked")
            defer { Task { await client.close() } }
            return try await client.failure("hello", ["token": .string(token)]) == "unauthenticated"
        }
    }

    /// Alarm repeats are fired by one relay only: each recipient, on either relay, hears each repeat once.
    func testTimersFireOnceWithTwoRelays() async throws {
        let cluster = try await startCluster()
        let fast: (inout RelayConfiguration) -> Void = { config in
            config.safety.alarmRepeatInterval = 400
            config.safety.alarmRepeatMax = 3
        }
        let a = try await startNode("node-a", of: cluster, fast)
        let b = try await startNode("node-b", of: cluster, fast)
        let alice = try await a.user("alice")
        let bob = try await b.user("bob")
        let carol = try await a.user("carol")
        try await befriend(alice, bob)
        try await befriend(alice, carol)
        try await waitUntilTimerShardsSplit([a, b])

        try await alice.client.ok("alarm.raise", ["text": "help"])
        for recipient in [bob, carol] {
            let first = try await recipient.client.event("alarm")
            XCTAssertNil(first["repeat"])
            for expected in 1...3 {
                let repeated = try await recipient.client.event("alarm")
                XCTAssertEqual(repeated["repeat"], JSONValue.int(Int64(expected)), "\(recipient.username): repeat \(expected) once, in order")
            }
        }
        // Two more intervals: a second relay firing too would have sent something by now. About time
        // passing: after the last repeat nothing is due, so there is no event to await.
        try await Task.sleep(for: .milliseconds(800))
        for recipient in [bob, carol] {
            let extra = try await recipient.client.eventsAfterRoundTrip("alarm")
            XCTAssertEqual(extra, [], "\(recipient.username) heard a repeat twice")
        }
    }

    /// A share link made on node a, watched on node b: the viewer gets the walker's positions, and when
    /// the link is revoked on node a the viewer gets `session.ended` and close 1000 within a second.
    func testAShareLinkViewerOnAnotherRelay() async throws {
        let cluster = try await startCluster()
        let a = try await startNode("node-a", of: cluster) { $0.features = ["share"] }
        let b = try await startNode("node-b", of: cluster) { $0.features = ["share"] }
        let alice = try await a.user("alice")
        let bob = try await b.user("bob")
        try await befriend(alice, bob)
        let id = try await follow(alice, by: [bob])
        let share = try await alice.client.ok("share.create", ["sessionId": .string(id)])
        let token = try XCTUnwrap(share["share"]?["token"]?.stringValue)
        let viewer = try await b.connect(label: "viewer")
        try await viewer.ok("watch", ["token": .string(token)])

        try await alice.client.send(position(1))
        let seen = try await viewer.event("pos")
        XCTAssertEqual(seen["from"], .string(alice.username))

        try await alice.client.ok("share.revoke", ["shareId": share["share"]?["shareId"] ?? .null])
        let ended = try await viewer.event("session.ended", timeout: 1)
        XCTAssertEqual(ended["reason"], "revoked")
        let code = try await viewer.closeCode(timeout: 1)
        XCTAssertEqual(code, 1000)
    }
}
