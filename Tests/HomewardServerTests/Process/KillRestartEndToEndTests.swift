import Foundation
import HomewardCoreTestSupport
import HomewardPostgresTestSupport
import HomewardProtocol
import XCTest

/// The real `homeward-relay` process, killed with SIGKILL and started again on the same data
/// directory: what was acknowledged with `ok` must still be there, and what the safety
/// extensions scheduled must still happen.
final class KillRestartEndToEndTests: XCTestCase {

    private func startRelay(_ arguments: [String] = []) async throws -> RelayProcess {
        let relay = try await RelayProcess.start(arguments)
        addTeardownBlock { relay.stop() }
        return relay
    }

    private func hello(_ token: String, on relay: RelayProcess, label: String) async throws -> TestClient {
        let client = try await relay.connect(label: label)
        try await client.ok("hello", ["token": .string(token)])
        return client
    }

    private func befriend(_ a: (username: String, token: String, client: TestClient),
                          _ b: (username: String, token: String, client: TestClient)) async throws {
        try await a.client.ok("friend.request", ["username": .string(b.username)])
        try await b.client.ok("friend.accept", ["username": .string(a.username)])
        try await a.client.event("friend.added")
    }

    func testAlarmRaisedBeforeSIGKILLReachesAFriendWhoSignsInAfterTheRestart() async throws {
        let relay = try await startRelay()
        let alice = try await relay.register("alice")
        let bob = try await relay.register("bob")
        try await befriend(alice, bob)
        await bob.client.close()
        let raised = try await alice.client.ok("alarm.raise", ["text": "stored before ok", "lat": 57.7, "lon": 11.97])
        let alarmId = try XCTUnwrap(raised["alarm"]?["alarmId"]?.stringValue)

        try await relay.killAndRestart()

        let bobAgain = try await hello(bob.token, on: relay, label: "bob-after-kill")
        let alarm = try await bobAgain.event("alarm")
        XCTAssertEqual(alarm["alarm"]?["alarmId"]?.stringValue, alarmId)
        XCTAssertEqual(alarm["alarm"]?["text"], "stored before ok")
        XCTAssertEqual(alarm["alarm"]?["position"]?["lat"], 57.7)
        // The friendship and alice's token survived too.
        let aliceAgain = try await hello(alice.token, on: relay, label: "alice-after-kill")
        let friends = try await aliceAgain.ok("friend.list")
        XCTAssertEqual(friends["friends"]?.arrayValue?.compactMap { $0["username"]?.stringValue }, [bob.username])
        await bobAgain.close()
        await aliceAgain.close()
    }

    func testMissedCheckInWhileTheRelayWasDeadFiresOnceRightAfterTheRestart() async throws {
        let relay = try await startRelay()
        let alice = try await relay.register("alice")
        let bob = try await relay.register("bob")
        try await befriend(alice, bob)
        let deadline = Int64(Date().timeIntervalSince1970 * 1000) + 1500
        let start = try await alice.client.ok("session.start", ["checkInBy": .int(deadline)])
        let sessionId = try XCTUnwrap(start["session"]?["sessionId"]?.stringValue)
        try await bob.client.ok("session.accept", ["sessionId": .string(sessionId)])

        // The deadline must pass while nothing runs: that is the case under test.
        try await relay.killAndRestart(after: deadline)

        let bobAgain = try await hello(bob.token, on: relay, label: "bob-after-kill")
        let alarm = try await bobAgain.event("alarm")
        XCTAssertEqual(alarm["alarm"]?["auto"], true)
        XCTAssertEqual(alarm["alarm"]?["from"]?["username"]?.stringValue, alice.username)
        // Exactly once: after a second SIGKILL and restart, bob holds that one alarm and no other.
        let alarmId = try XCTUnwrap(alarm["alarm"]?["alarmId"]?.stringValue)
        try await relay.killAndRestart()
        let bobThird = try await hello(bob.token, on: relay, label: "bob-after-second-kill")
        let alarms = try await bobThird.eventsAfterRoundTrip("alarm")
        XCTAssertEqual(alarms.compactMap { $0["alarm"]?["alarmId"]?.stringValue }, [alarmId])
        await bobAgain.close()
        await bobThird.close()
    }

    func testRepeatScheduleOfAnUnacknowledgedAlarmSurvivesSIGKILL() async throws {
        let relay = try await startRelay(["--alarm-repeat-interval", "1", "--alarm-repeat-max", "10"])
        let alice = try await relay.register("alice")
        let bob = try await relay.register("bob")
        try await befriend(alice, bob)
        let raised = try await alice.client.ok("alarm.raise", ["text": "answer me"])
        let alarmId = try XCTUnwrap(raised["alarm"]?["alarmId"]?.stringValue)

        try await relay.killAndRestart()

        let bobAgain = try await hello(bob.token, on: relay, label: "bob-after-kill")
        let repeated = try await bobAgain.event("alarm", timeout: 15) { $0["repeat"] != nil }
        XCTAssertEqual(repeated["alarm"]?["alarmId"]?.stringValue, alarmId)
        XCTAssertGreaterThanOrEqual(repeated["repeat"]?.numberValue ?? 0, 1)
        try await bobAgain.ok("alarm.ack", ["alarmId": .string(alarmId)])
        await bobAgain.close()
    }

    func testObserversLearnOfLostContactAfterSIGKILLWhenTheWalkerDoesNotReturn() async throws {
        let relay = try await startRelay(["--lost-contact-grace", "1"])
        let alice = try await relay.register("alice")
        let bob = try await relay.register("bob")
        try await befriend(alice, bob)
        let start = try await alice.client.ok("session.start", [:])
        let sessionId = try XCTUnwrap(start["session"]?["sessionId"]?.stringValue)
        try await bob.client.ok("session.accept", ["sessionId": .string(sessionId)])
        try await alice.client.send(["type": "pos", "lat": 57.7, "lon": 11.97])
        try await bob.client.event("pos")

        try await relay.killAndRestart()

        let bobAgain = try await hello(bob.token, on: relay, label: "bob-after-kill")
        let lost = try await bobAgain.event("session.lost", timeout: 15)
        XCTAssertEqual(lost["sessionId"]?.stringValue, sessionId)
        let aliceAgain = try await hello(alice.token, on: relay, label: "alice-after-kill")
        let resumed = try await bobAgain.event("session.resumed")
        XCTAssertEqual(resumed["sessionId"]?.stringValue, sessionId)
        await aliceAgain.close()
        await bobAgain.close()
    }

    func testExpiryAndDestinationSurviveSIGKILL() async throws {
        let relay = try await startRelay()
        let alice = try await relay.register("alice")
        let bob = try await relay.register("bob")
        let carol = try await relay.register("carol")
        try await befriend(alice, bob)
        try await befriend(bob, carol)
        // alice walks to a destination; carol's session expires after 1 s.
        let walk = try await alice.client.ok("session.start", ["destination": ["lat": 57.7, "lon": 11.97, "radius": 50]])
        let walkId = try XCTUnwrap(walk["session"]?["sessionId"]?.stringValue)
        let short = try await carol.client.ok("session.start", ["ttl": 1])
        let shortId = try XCTUnwrap(short["session"]?["sessionId"]?.stringValue)

        let expiresAt = try XCTUnwrap(short["session"]?["expiresAt"]?.numberValue)
        try await relay.killAndRestart(after: Int64(expiresAt))

        let carolAgain = try await hello(carol.token, on: relay, label: "carol-after-kill")
        let carolSessions = try await carolAgain.ok("session.list")
        XCTAssertEqual(carolSessions["own"], .null, "session \(shortId) should have expired while the relay was down")

        let bobAgain = try await hello(bob.token, on: relay, label: "bob-after-kill")
        let invites = try await bobAgain.ok("session.list")
        let invitedTo = invites["invites"]?.arrayValue?.compactMap { $0["sessionId"]?.stringValue } ?? []
        XCTAssertEqual(invitedTo, [walkId])
        let aliceAgain = try await hello(alice.token, on: relay, label: "alice-after-kill")
        try await aliceAgain.send(["type": "pos", "lat": 57.70001, "lon": 11.97001])
        let ended = try await bobAgain.event("session.ended")
        XCTAssertEqual(ended["sessionId"]?.stringValue, walkId)
        XCTAssertEqual(ended["reason"], "arrived")
        await aliceAgain.close()
        await bobAgain.close()
        await carolAgain.close()
    }
}

/// SIGTERM and SIGINT to the real process: every connection closed with 1001, storage finished, exit 0.
final class SignalShutdownEndToEndTests: XCTestCase {
    private func shutDown(with signal: Int32) async throws {
        let relay = try await RelayProcess.start()
        addTeardownBlock { relay.stop() }
        let signedIn = try await relay.connect(label: "alice")
        let username = TestRelay.uniqueUsername("alice")
        let registered = try await signedIn.ok("register", ["username": .string(username), "password": "correct horse battery"])
        let token = try XCTUnwrap(registered["token"]?.stringValue)
        let anonymous = try await relay.connect(label: "anonymous")

        let status = try await relay.stop(with: signal)
        XCTAssertEqual(status, 0)
        let signedInCode = try await signedIn.closeCode()
        XCTAssertEqual(signedInCode, 1001)
        let anonymousCode = try await anonymous.closeCode()
        XCTAssertEqual(anonymousCode, 1001)

        // What was stored before the signal is there after the next start.
        try await relay.launch()
        let again = try await relay.connect(label: "alice-again")
        let hello = try await again.ok("hello", ["token": .string(token)])
        XCTAssertEqual(hello["user"]?["username"]?.stringValue, username)
        await again.close()
    }

    func testSIGTERMClosesEveryConnectionWith1001AndExitsZero() async throws {
        try await shutDown(with: SIGTERM)
    }

    func testSIGINTClosesEveryConnectionWith1001AndExitsZero() async throws {
        try await shutDown(with: SIGINT)
    }
}

/// `kill -9` of a relay whose spool holds alarms (delivered while PostgreSQL was stopped): after the restart
/// they are stored once, and a friend who was offline gets each at sign-in.
final class SpoolKillRestartEndToEndTests: XCTestCase {
    func testAlarmsSpooledWhileTheStoreWasDownSurviveSIGKILLAndAreStoredOnce() async throws {
        guard let server = try await PostgresServer.startIfAvailable().server() else {
            throw XCTSkip("\(PostgresServer.skipVariable)=1: PostgreSQL tests skipped")
        }
        addTeardownBlock { server.remove() }
        let location = try server.createDatabase()
        let relay = try await RelayProcess.start([
            "--store", "postgres://\(location.username)@\(location.host):\(location.port)/\(location.database)?sslmode=disable",
            "--store-timeout", "1",
        ])
        addTeardownBlock { relay.stop() }
        let alice = try await relay.register("alice")
        let bob = try await relay.register("bob")
        try await alice.client.ok("friend.request", ["username": .string(bob.username)])
        try await bob.client.ok("friend.accept", ["username": .string(alice.username)])
        try await alice.client.event("friend.added")
        await bob.client.close()

        server.stop()
        var ids: [String] = []
        for text in ["first", "second"] {
            let raised = try await alice.client.ok("alarm.raise", ["text": .string(text)], timeout: 10)
            XCTAssertEqual(raised["stored"], false)
            ids.append(try XCTUnwrap(raised["alarm"]?["alarmId"]?.stringValue))
        }
        let spool = relay.dataDirectory + "/alarm-spool.jsonl"
        XCTAssertEqual(String(decoding: try Data(contentsOf: URL(fileURLWithPath: spool)), as: UTF8.self)
            .split(separator: "\n").count, 2, "both alarms are on disk before their replies")

        relay.kill()
        try await server.start()
        try await relay.launch()

        let bobAgain = try await relay.connect(label: "bob-after-kill")
        try await bobAgain.ok("hello", ["token": .string(bob.token)])
        let alarms = try await bobAgain.eventsAfterRoundTrip("alarm")
        XCTAssertEqual(alarms.compactMap { $0["alarm"]?["alarmId"]?.stringValue }.sorted(), ids.sorted(), "each alarm once")
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: spool)).count, 0, "the spool is empty once stored")
        await bobAgain.close()
    }
}
