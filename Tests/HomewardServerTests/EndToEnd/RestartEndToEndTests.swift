import HomewardCoreTestSupport
import HomewardProtocol
import XCTest

/// What survives a graceful shutdown and a start on the same data directory.
final class RestartEndToEndTests: EndToEndTestCase {
    func testShutdownClosesConnectionsWith1001() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        let anonymous = try await relay.connect()
        await relay.shutdown()
        let aliceCode = try await alice.client.closeCode()
        XCTAssertEqual(aliceCode, 1001)
        let anonymousCode = try await anonymous.closeCode()
        XCTAssertEqual(anonymousCode, 1001)
    }

    func testStateSurvivesRestart() async throws {
        try await assertStateSurvivesRestart(try await startRelay())
    }

    func testRevokedTokenStaysRevokedAfterRestart() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        try await alice.client.ok("logout")
        try await relay.restart()
        let client = try await relay.connect()
        let code = try await client.failure("hello", ["token": .string(alice.token)])
        XCTAssertEqual(code, "unauthenticated")
    }

    func testEndedSessionAndRemovedFriendStayGoneAfterRestart() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        let bob = try await relay.user("bob")
        let carol = try await relay.user("carol")
        try await befriend(alice, bob)
        try await befriend(alice, carol)
        let start = try await alice.client.ok("session.start")
        let id = try XCTUnwrap(start["session"]?["sessionId"]?.stringValue)
        try await alice.client.ok("session.end", ["sessionId": .string(id)])
        try await alice.client.ok("friend.remove", ["username": .string(carol.username)])
        try await relay.restart()
        let alice2 = try await relay.reconnect(alice)
        let sessions = try await alice2.client.ok("session.list")
        XCTAssertEqual(sessions["own"], .null)
        let list = try await alice2.client.ok("friend.list")
        XCTAssertEqual(list["friends"]?.arrayValue?.map { $0["username"] }, [.string(bob.username)])
        let bob2 = try await relay.reconnect(bob)
        let invites = try await bob2.client.eventsAfterRoundTrip("session.invite")
        XCTAssertEqual(invites, [])
    }
}

extension EndToEndTestCase {
    /// Accounts, friends, a pending request, alarm contacts, a session and alarms, then a restart of
    /// `relay`: everything is there again and can still change. Run on SQLite here and on PostgreSQL in
    /// `PostgresRelayEndToEndTests`.
    func assertStateSurvivesRestart(_ relay: TestRelay) async throws {
        let alice = try await relay.user("alice", name: "Alice")
        let bob = try await relay.user("bob", name: "Bob")
        let carol = try await relay.user("carol", name: "Carol")
        let dave = try await relay.user("dave", name: "Dave")
        try await befriend(alice, bob)
        try await befriend(alice, carol)
        // A pending request, alarm contacts, a session with an observer and an invitee, an active alarm
        // (bob has acknowledged it, carol is offline when it is raised), and a cancelled alarm.
        try await dave.client.ok("friend.request", ["username": .string(alice.username)])
        try await alice.client.ok("alarm.contacts", ["usernames": [.string(bob.username), .string(carol.username)]])
        let start = try await alice.client.ok("session.start", ["note": "home"])
        let sessionID = try XCTUnwrap(start["session"]?["sessionId"]?.stringValue)
        try await bob.client.ok("session.accept", ["sessionId": .string(sessionID)])
        try await alice.client.event("session.accepted")
        await carol.client.close()
        try await alice.client.event("presence", where: { $0["username"] == .string(carol.username) && $0["online"] == false })
        let cancelled = try await alice.client.ok("alarm.raise", ["text": "never mind"])
        let cancelledID = try XCTUnwrap(cancelled["alarm"]?["alarmId"]?.stringValue)
        try await alice.client.ok("alarm.cancel", ["alarmId": .string(cancelledID)])
        let raised = try await alice.client.ok("alarm.raise", ["text": "still need help", "lat": 1.5, "lon": 2.5])
        let alarmID = try XCTUnwrap(raised["alarm"]?["alarmId"]?.stringValue)
        try await bob.client.event("alarm", where: { $0["alarm"]?["alarmId"] == .string(alarmID) })
        try await bob.client.ok("alarm.ack", ["alarmId": .string(alarmID)])
        try await alice.client.event("alarm.acked")

        try await relay.restart()

        // Tokens survive: hello works; so do passwords.
        let alice2 = try await relay.reconnect(alice)
        let bob2 = try await relay.reconnect(bob)
        let carolClient = try await relay.connect(label: "carol-after-restart")
        try await carolClient.ok("login", ["username": .string(carol.username), "password": .string(carol.password)])
        let probe = try await relay.connect(label: "alice-probe")
        let hello = try await probe.ok("hello", ["token": .string(alice.token)])
        XCTAssertEqual(hello["user"], ["username": .string(alice.username), "name": "Alice"])

        // Friends and the pending request.
        let list = try await alice2.client.ok("friend.list")
        XCTAssertEqual(Set(list["friends"]?.arrayValue?.compactMap { $0["username"]?.stringValue } ?? []),
                       [bob.username, carol.username])
        XCTAssertEqual(list["incoming"], [["username": .string(dave.username), "name": "Dave"]])
        let friendRequest = try await alice2.client.event("friend.request")
        XCTAssertEqual(friendRequest["from"]?["username"], .string(dave.username), "the pending request is in the backlog")

        // Alarm contacts.
        let contacts = try await alice2.client.ok("alarm.contacts")
        XCTAssertEqual(contacts["usernames"], [.string(bob.username), .string(carol.username)])

        // The session, its observer and its open invitation.
        let own = try await alice2.client.ok("session.list")
        XCTAssertEqual(own["own"]?["sessionId"], .string(sessionID))
        XCTAssertEqual(own["own"]?["note"], "home")
        XCTAssertEqual(own["own"]?["observers"], [.string(bob.username)])
        XCTAssertEqual(own["own"]?["invited"]?.stringSet, [bob.username, carol.username])
        let bobSessions = try await bob2.client.ok("session.list")
        XCTAssertEqual(bobSessions["following"]?.arrayValue?.map { $0["sessionId"] }, [.string(sessionID)])
        let carolInvite = try await carolClient.event("session.invite")
        XCTAssertEqual(carolInvite["session"]?["sessionId"], .string(sessionID))
        let conflict = try await alice2.client.failure("session.start")
        XCTAssertEqual(conflict, "conflict", "the session is still active after the restart")

        // The active alarm reaches carol, who was offline when it was raised, with bob's acknowledgement;
        // the cancelled one does not.
        let alarm = try await carolClient.event("alarm")
        XCTAssertEqual(alarm["alarm"]?["alarmId"], .string(alarmID))
        XCTAssertEqual(alarm["alarm"]?["text"], "still need help")
        XCTAssertEqual(alarm["alarm"]?["acked"], [.string(bob.username)])
        XCTAssertEqual(alarm["alarm"]?["position"]?["lat"], 1.5)
        let otherAlarms = try await carolClient.eventsAfterRoundTrip("alarm")
        XCTAssertEqual(otherAlarms, [], "only the active alarm, once")
        let bobAlarm = try await bob2.client.event("alarm")
        XCTAssertEqual(bobAlarm["alarm"]?["alarmId"], .string(alarmID), "still active, so still in bob's backlog")
        let ackCancelled = try await bob2.client.failure("alarm.ack", ["alarmId": .string(cancelledID)])
        XCTAssertEqual(ackCancelled, "not_found")

        // The audience is restored: bob (observer and recipient) and carol (recipient) get positions once each.
        try await alice2.client.ok("pos", ["lat": 9, "lon": 9])
        try await bob2.client.event("pos")
        try await carolClient.event("pos")
        let bobExtra = try await bob2.client.eventsAfterRoundTrip("pos")
        XCTAssertEqual(bobExtra, [])

        // And state can still change after the restart.
        try await carolClient.ok("alarm.ack", ["alarmId": .string(alarmID)])
        let acked = try await alice2.client.event("alarm.acked")
        XCTAssertEqual(acked["by"], .string(carol.username))
        try await alice2.client.ok("alarm.cancel", ["alarmId": .string(alarmID)])
        try await alice2.client.ok("session.end", ["sessionId": .string(sessionID)])
        try await bob2.client.event("session.ended")
    }
}
