import HomewardClient
import HomewardProtocol
import HomewardTestSupport
import XCTest

/// The client library against a real relay on a loopback port.
final class RelayClientTests: XCTestCase {
    func testRegisterTwiceIsARejectionCarryingTheConflictCode() async throws {
        let relay = try await LoopbackRelay.start()
        let client = try relay.makeClient()
        try await client.connect()
        let name = uniqueName("ann")
        let signIn = try await client.register(username: name, password: "correct horse", name: "Ann")
        XCTAssertEqual(signIn.user, User(username: name, name: "Ann"))
        XCTAssertFalse(signIn.token.isEmpty)

        let other = try relay.makeClient()
        try await other.connect()
        do {
            _ = try await other.register(username: name, password: "correct horse")
            XCTFail("registering a taken name succeeded")
        } catch {
            XCTAssertEqual(error.code, .conflict)
        }
        do {
            _ = try await other.friendList()
            XCTFail("friend.list before signing in succeeded")
        } catch {
            XCTAssertEqual(error.code, .unauthenticated)
        }
        // The token from register signs in a second connection.
        let user = try await other.hello(token: signIn.token)
        XCTAssertEqual(user.username, name)

        await client.close()
        await other.close()
        await relay.stop()
    }

    func testFriendsSessionAndPositionsArriveAsTypedEventsInOrder() async throws {
        let relay = try await LoopbackRelay.start()
        let walker = try relay.makeClient()
        let watcher = try relay.makeClient()
        try await walker.connect()
        try await watcher.connect()
        let walkerName = uniqueName("walk")
        let watcherName = uniqueName("watch")
        _ = try await walker.register(username: walkerName, password: "correct horse")
        _ = try await watcher.register(username: watcherName, password: "correct horse")
        let watcherEvents = watcher.events()
        let walkerEvents = walker.events()

        let outcome = try await walker.requestFriend(watcherName)
        XCTAssertEqual(outcome, .requested)
        let requester = try await watcherEvents.first("friend.request") { event -> User? in
            if case .event(.friendRequest(let from)) = event.kind { return from }
            return nil
        }
        XCTAssertEqual(requester.username, walkerName)
        try await watcher.acceptFriend(walkerName)
        let added = try await walkerEvents.first("friend.added") { event -> User? in
            if case .event(.friendAdded(let user)) = event.kind { return user }
            return nil
        }
        XCTAssertEqual(added.username, watcherName)

        let session = try await walker.startSession(SessionOptions(invite: [watcherName], note: "home"))
        XCTAssertEqual(session.owner.username, walkerName)
        XCTAssertEqual(session.note, "home")
        let invite = try await watcherEvents.first("session.invite") { event -> FollowMeSession? in
            if case .event(.sessionInvite(let session)) = event.kind { return session }
            return nil
        }
        XCTAssertEqual(invite.id, session.id)
        let accepted = try await watcher.acceptSession(session.id)
        XCTAssertEqual(accepted.session.observers, [watcherName])
        XCTAssertNil(accepted.lastPosition)

        let count = 20
        for step in 0..<count {
            let delivery = await walker.send(Position(lat: 57.7 + Double(step) * 1e-4, lon: 11.97, acc: 5, alt: Double(step), ts: 1_763_830_000_000 + Int64(step)))
            XCTAssertEqual(delivery, .sent)
        }
        try await walker.ping()
        let received = try await withTimeout(15, "\(count) positions") {
            var steps: [Double] = []
            for await event in watcherEvents {
                if case .event(.position(let from, let position)) = event.kind {
                    XCTAssertEqual(from, walkerName)
                    steps.append(position.alt ?? -1)
                    if steps.count == count { break }
                }
            }
            return steps
        }
        XCTAssertEqual(received, (0..<count).map(Double.init))

        // An invalid position is refused with an event, since it was sent without an id.
        await walker.send(Position(lat: 91, lon: 0, ts: 1))
        let failure = try await walkerEvents.first("requestFailed") { event -> ProtocolError? in
            if case .requestFailed(let error) = event.kind { return error }
            return nil
        }
        XCTAssertEqual(failure.code, .badRequest)

        let alarm = try await walker.raiseAlarm(AlarmRequest(text: "help"))
        XCTAssertEqual(alarm.recipients, [AlarmRecipient(username: watcherName, online: true)])
        let received2 = try await watcherEvents.first("alarm") { event -> PanicAlarm? in
            if case .event(.alarm(let alarm, _)) = event.kind { return alarm }
            return nil
        }
        XCTAssertEqual(received2.id, alarm.alarm.id)
        XCTAssertEqual(received2.text, "help")
        try await watcher.acknowledgeAlarm(alarm.alarm.id)
        let ackedBy = try await walkerEvents.first("alarm.acked") { event -> String? in
            if case .event(.alarmAcked(_, let by)) = event.kind { return by }
            return nil
        }
        XCTAssertEqual(ackedBy, watcherName)
        try await walker.cancelAlarm(alarm.alarm.id, reason: "safe")
        try await walker.endSession(session.id)
        let ended = try await watcherEvents.first("session.ended") { event -> String? in
            if case .event(.sessionEnded(let id, let reason)) = event.kind, id == session.id { return reason }
            return nil
        }
        XCTAssertEqual(ended, "ended")

        await walker.close()
        await watcher.close()
        await relay.stop()
    }

    func testReconnectsAfterARelayRestartSignsInAgainAndKeepsSending() async throws {
        let relay = try await LoopbackRelay.start()
        let walker = try relay.makeClient()
        let watcher = try relay.makeClient()
        try await walker.connect()
        try await watcher.connect()
        let walkerName = uniqueName("walk")
        let watcherName = uniqueName("watch")
        _ = try await walker.register(username: walkerName, password: "correct horse")
        _ = try await watcher.register(username: watcherName, password: "correct horse")
        _ = try await walker.requestFriend(watcherName)
        try await watcher.acceptFriend(walkerName)
        let session = try await walker.startSession(SessionOptions(invite: [watcherName]))
        _ = try await watcher.acceptSession(session.id)
        let walkerEvents = walker.events()
        let watcherEvents = watcher.events()

        try await relay.restart()

        // Both notice, come back and sign in with their tokens without being asked to.
        for (name, events) in [("walker", walkerEvents), ("watcher", watcherEvents)] {
            try await events.first("\(name) reconnected", within: 20) { event -> Bool? in
                if case .connection(.reconnected) = event.kind { return true }
                return nil
            }
        }
        let walkerReconnects = await walker.reconnectCount
        XCTAssertEqual(walkerReconnects, 1)

        // The session survived the restart, so positions flow again.
        await walker.send(Position(lat: 1, lon: 2, alt: 42, ts: 1_763_830_000_000))
        let report = try await watcherEvents.first("position after restart") { event -> (from: String, position: Position)? in
            if case .event(.position(let from, let position)) = event.kind { return (from, position) }
            return nil
        }
        XCTAssertEqual(report.position.alt, 42)
        XCTAssertEqual(report.from, walkerName)

        await walker.close()
        await watcher.close()
        await relay.stop()
    }

    func testAPositionSentWhileOfflineGoesOutAfterTheReconnect() async throws {
        let relay = try await LoopbackRelay.start()
        let slowReconnect = ReconnectPolicy(initialDelay: .milliseconds(300), maximumDelay: .seconds(1), jitter: 0)
        let walker = try RelayClient(configuration: relay.clientConfiguration(reconnect: slowReconnect))
        let watcher = try relay.makeClient()
        try await walker.connect()
        try await watcher.connect()
        let walkerName = uniqueName("walk")
        let watcherName = uniqueName("watch")
        _ = try await walker.register(username: walkerName, password: "correct horse")
        _ = try await watcher.register(username: watcherName, password: "correct horse")
        _ = try await walker.requestFriend(watcherName)
        try await watcher.acceptFriend(walkerName)
        let session = try await walker.startSession(SessionOptions(invite: [watcherName]))
        _ = try await watcher.acceptSession(session.id)
        let walkerEvents = walker.events()
        let watcherEvents = watcher.events()

        await relay.pause()
        try await walkerEvents.first("walker disconnected") { event -> Bool? in
            if case .connection(.disconnected) = event.kind { return true }
            return nil
        }
        // Offline: the client keeps only the newest position.
        let first = await walker.send(Position(lat: 1, lon: 2, alt: 1, ts: 1_763_830_000_000))
        let second = await walker.send(Position(lat: 1, lon: 2, alt: 2, ts: 1_763_830_000_001))
        XCTAssertEqual(first, .deferred)
        XCTAssertEqual(second, .deferred)
        try await relay.resume()

        let report = try await watcherEvents.first("deferred position", within: 20) { event -> (from: String, position: Position)? in
            if case .event(.position(let from, let position)) = event.kind { return (from, position) }
            return nil
        }
        XCTAssertEqual(report.position.alt, 2)

        await walker.close()
        await watcher.close()
        await relay.stop()
    }

    func testTrustIsRequiredUnlessInsecureIsAsked() async throws {
        let relay = try await LoopbackRelay.start()
        let endpoint = try RelayEndpoint(url: relay.url)

        let untrusting = try RelayClient(configuration: RelayClientConfiguration(endpoint: endpoint, trust: .system))
        do {
            try await untrusting.connect()
            XCTFail("connected to a relay whose certificate is not trusted")
        } catch {
            guard case .connectFailed(let reason) = error else { return XCTFail("unexpected \(error)") }
            XCTAssertTrue(reason.contains("TLS") || reason.contains("certificate"), reason)
        }

        let insecure = try RelayClient(configuration: RelayClientConfiguration(endpoint: endpoint, trust: .insecure))
        try await insecure.connect()
        try await insecure.ping()
        await insecure.close()

        XCTAssertThrowsError(try RelayClient(configuration: RelayClientConfiguration(endpoint: endpoint, trust: .caFile("/nonexistent/ca.pem")))) { error in
            guard case RelayClientError.tlsSetup(let reason)? = error as? RelayClientError else { return XCTFail("unexpected \(error)") }
            XCTAssertTrue(reason.contains("/nonexistent/ca.pem"), reason)
        }
        await relay.stop()
    }

    func testAWrongPathIsAClearConnectFailure() async throws {
        let relay = try await LoopbackRelay.start()
        var configuration = try relay.clientConfiguration()
        configuration.endpoint.path = "/nope"
        let client = try RelayClient(configuration: configuration)
        do {
            try await client.connect()
            XCTFail("upgraded on a wrong path")
        } catch {
            guard case .connectFailed(let reason) = error else { return XCTFail("unexpected \(error)") }
            XCTAssertTrue(reason.contains("upgrade"), reason)
        }
        await relay.stop()
    }
}
