import Foundation
import HomewardCore
import HomewardCoreTestSupport
import HomewardNATS
import HomewardProtocol
import HomewardServer
import NIOCore
import XCTest

/// Relays that die and a nats-server that restarts: timers still fire exactly once, positions resume.
final class ClusterFaultTests: ClusterTestCase {
    /// Node a (a real process) fires the timers of a walker on it with a check-in deadline; node a is killed
    /// with SIGKILL; node b takes node a's timer shards and raises the missed check-in alarm, once.
    func testTimersOfAKilledRelayFireOnAnother() async throws {
        let cluster = try await startCluster()
        let a = try await RelayProcess.start(cluster.arguments(node: "node-a"))
        addTeardownBlock { a.stop() }
        // Node a is the only relay yet: once PostgreSQL shows every shard locked, node a holds them all; node
        // b, started next, gets half (node a releases them), and alice is named so that her shard is node a's.
        try await eventually(within: 10, "node a to take every timer shard") {
            try await timerShardLocksHeld(in: cluster) == TimerShards.count
        }
        let b = try await startNode("node-b", of: cluster)
        try await eventually(within: 10, "node b to take its share") {
            let bShare = try await b.running.relay.firedTimerShards.size
            let locked = try await timerShardLocksHeld(in: cluster)
            return bShare == TimerShards.count / 2 && locked == TimerShards.count
        }
        let bShards = try await b.running.relay.firedTimerShards
        var alice = TestRelay.uniqueUsername("alice")
        while bShards.owns(alice) { alice = TestRelay.uniqueUsername("alice") }

        let aliceClient = try await a.connect(label: "alice")
        let registered = try await aliceClient.ok("register", ["username": .string(alice), "password": "correct horse battery"])
        XCTAssertEqual(registered["node"], "node-a")
        let bob = try await b.user("bob")
        try await aliceClient.ok("friend.request", ["username": .string(bob.username)])
        try await bob.client.event("friend.request")
        try await bob.client.ok("friend.accept", ["username": .string(alice)])
        try await aliceClient.event("friend.added")

        let deadline = Int64(Date().timeIntervalSince1970 * 1000) + 3000
        let start = try await aliceClient.ok("session.start", ["invite": [.string(bob.username)], "checkInBy": .int(deadline)])
        let id = try XCTUnwrap(start["session"]?["sessionId"]?.stringValue)
        try await bob.client.event("session.invite")
        try await bob.client.ok("session.accept", ["sessionId": .string(id)])
        try await aliceClient.event("session.accepted")

        a.kill()
        try await waitUntilFiringTimers(b, within: 10)
        let alarm = try await bob.client.event("alarm", timeout: 15)
        XCTAssertEqual(alarm["alarm"]?["from"]?["username"], .string(alice))
        XCTAssertTrue(alarm["alarm"]?["text"]?.stringValue?.contains("missed their check-in") ?? false, "\(alarm)")
        XCTAssertGreaterThanOrEqual(Int64(Date().timeIntervalSince1970 * 1000), deadline, "not before the deadline")
        let more = try await bob.client.eventsAfterRoundTrip("alarm")
        XCTAssertEqual(more.filter { $0["repeat"] == nil }, [], "one alarm for one missed deadline")
    }

    /// nats-server restarts mid-walk: positions from node a reach the observer on node b again within
    /// 2 s of the server being back, and an alarm raised during the outage reaches its recipient.
    func testPositionsResumeWithinTwoSecondsOfANATSRestart() async throws {
        let cluster = try await startCluster()
        let a = try await startNode("node-a", of: cluster)
        let b = try await startNode("node-b", of: cluster)
        let alice = try await a.user("alice")
        let bob = try await b.user("bob")
        try await befriend(alice, bob)
        _ = try await follow(alice, by: [bob])
        try await alice.client.send(["type": "pos", "lat": 57.0, "lon": 11.0])
        try await bob.client.event("pos")

        cluster.nats.kill()
        // Requests still work without the bus (PostgreSQL has them); bob hears of the alarm once it is back.
        let raised = try await alice.client.ok("alarm.raise", ["text": "during the outage"])
        try await cluster.nats.restart()
        let took = try await eventually(within: 2, "positions to reach node b again") {
            try await alice.client.send(["type": "pos", "lat": 58.0, "lon": 11.0])
            let arrived = try? await bob.client.event("pos", timeout: 0.1, where: { $0["lat"] == 58.0 })
            return arrived != nil
        }
        XCTAssertLessThan(took, .seconds(2))
        // Node b refreshed from PostgreSQL after the reconnect and told bob what he missed, unasked.
        let alarm = try await bob.client.event("alarm", timeout: 5)
        XCTAssertEqual(alarm["alarm"]?["alarmId"], raised["alarm"]?["alarmId"])
        XCTAssertEqual(alarm["alarm"]?["text"], "during the outage")
        let twice = try await bob.client.eventsAfterRoundTrip("alarm")
        XCTAssertEqual(twice, [], "the alarm once, though its notice may be replayed after the reconnect")
    }

    /// A nats-server that cannot be reached at start-up stops the relay with a message naming the bus.
    func testAnUnreachableBusIsAStartupError() async throws {
        let cluster = try await startCluster()
        let port = cluster.nats.port
        cluster.nats.kill()
        do {
            let relay = try await startNode("node-a", of: cluster)
            XCTFail("started without its bus on port \(try relay.port)")
        } catch let error as RelayStartupError {
            XCTAssertTrue(error.description.contains("cannot connect to the bus nats://127.0.0.1:\(port)"), error.description)
        }
    }

    /// Messages on the relays' subjects that are not what a relay sends are ignored (and logged); the
    /// relays keep working together.
    func testMalformedBusMessagesAreIgnored() async throws {
        let cluster = try await startCluster()
        let a = try await startNode("node-a", of: cluster)
        let b = try await startNode("node-b", of: cluster)
        let intruder = try await NATSClient.connect(urls: [cluster.nats.url])
        for subject in ["hw.changes", "hw.presence"] {
            for text in ["", "not json", "[1,2]", #"{"node": 5}"#, #"{"node": "x", "events": [{"to": 1}]}"#, #"{"node": "x", "online": "a"}"#] {
                try await intruder.publish(subject: subject, payload: ByteBuffer(string: text))
            }
        }
        // Presence messages of a bad shape, and a snapshot nobody asked for (only an answer is one).
        for text in [#"{"kind": "delta", "node": "x", "epoch": "e", "seq": "1", "joined": [], "left": {}}"#,
                     #"{"kind": "snapshot", "node": "x", "epoch": "e", "seq": 1, "online": ["mallory"], "positions": {}}"#,
                     #"{"node": "x", "online": ["mallory"], "full": true}"#] {
            try await intruder.publish(subject: "hw.presence", payload: ByteBuffer(string: text))
        }
        try await intruder.flush()
        await intruder.close()

        let alice = try await a.user("alice")
        let bob = try await b.user("bob")
        try await befriend(alice, bob)
        let list = try await bob.client.ok("friend.list")
        XCTAssertEqual(list["friends"]?.arrayValue?.first?["username"], .string(alice.username))
        let malloryOnline = try b.running.relay.presence.isOnline("mallory")
        XCTAssertFalse(malloryOnline, "a snapshot is taken only as an answer")
    }

    /// Node a (a real process) is killed mid-walk; the walker reconnects to node b within the grace, so
    /// the observer gets no `session.lost`; when the walker then stays away past the grace, they do.
    /// Node b (in process, the timer owner, grace 2 s) and node a (a real process) with alice walking on
    /// node a and bob on node b following her; alice's last position is 57.0, 11.0.
    private func walkOnAKillableRelay() async throws
        -> (a: RelayProcess, b: TestRelay, walker: TestClient, alice: String, token: String, bob: TestUser, session: String)
    {
        let cluster = try await startCluster()
        let b = try await startNode("node-b", of: cluster) { $0.safety.lostContactGrace = 2000 }
        try await waitUntilFiringTimers(b)
        let a = try await RelayProcess.start(cluster.arguments(node: "node-a") + ["--lost-contact-grace", "2"])
        addTeardownBlock { a.stop() }
        let (walker, alice, token, bob, id) = try await aliceWalks(on: a, followedByBobOn: b)
        return (a, b, walker, alice, token, bob, id)
    }

    /// Alice registers on node a (a process) and walks, bob on node b follows her; her last position is 57.0, 11.0.
    private func aliceWalks(on a: RelayProcess, followedByBobOn b: TestRelay, named alice: String = TestRelay.uniqueUsername("alice"))
        async throws -> (walker: TestClient, alice: String, token: String, bob: TestUser, session: String)
    {
        let walker = try await a.connect(label: "alice")
        let registered = try await walker.ok("register", ["username": .string(alice), "password": "correct horse battery"])
        let token = try XCTUnwrap(registered["token"]?.stringValue)
        let bob = try await b.user("bob")
        try await walker.ok("friend.request", ["username": .string(bob.username)])
        try await bob.client.event("friend.request")
        try await bob.client.ok("friend.accept", ["username": .string(alice)])
        let start = try await walker.ok("session.start", ["invite": [.string(bob.username)]])
        let id = try XCTUnwrap(start["session"]?["sessionId"]?.stringValue)
        try await bob.client.event("session.invite")
        try await bob.client.ok("session.accept", ["sessionId": .string(id)])
        try await walker.event("session.accepted")
        try await walker.send(["type": "pos", "lat": 57.0, "lon": 11.0])
        try await bob.client.event("pos", where: { $0["lat"] == 57.0 })
        return (walker, alice, token, bob, id)
    }

    /// Node a is killed and alice does not come back: node b counts her offline once node a has been
    /// silent for 3 s, and bob gets `session.lost` after the grace, with her last position from node a's heartbeat.
    func testAWalkerOfAKilledRelayWhoStaysAwayIsLost() async throws {
        let (a, b, _, alice, _, bob, id) = try await walkOnAKillableRelay()
        try await eventually(within: 2, "node a's heartbeat to bring alice's position to node b") {
            try b.running.relay.presence.lastPosition(alice) != nil
        }
        a.kill()
        let lost = try await bob.client.event("session.lost", timeout: 15)
        XCTAssertEqual(lost["sessionId"], .string(id))
        XCTAssertEqual(lost["lastPosition"]?["lat"], 57.0)
    }

    /// Killed right after a position went out: node a's last heartbeat (up to a second old) has an older one, but
    /// node b delivered the newest to bob, and that is the one `session.lost` carries.
    func testAWalkerKilledRightAfterAPositionIsLostWithThatPosition() async throws {
        let (a, b, walker, alice, _, bob, id) = try await walkOnAKillableRelay()
        try await eventually(within: 2, "node a's heartbeat to bring alice's position to node b") {
            try b.running.relay.presence.lastPosition(alice) != nil
        }
        try await walker.send(["type": "pos", "lat": 57.5, "lon": 11.5])
        try await bob.client.event("pos", where: { $0["lat"] == 57.5 })
        a.kill()
        let lost = try await bob.client.event("session.lost", timeout: 15)
        XCTAssertEqual(lost["sessionId"], .string(id))
        XCTAssertEqual(lost["lastPosition"]?["lat"], 57.5, "the last position bob had: \(lost)")
        XCTAssertEqual(lost["lastPosition"]?["lon"], 11.5)
    }

    /// The relay that decides `session.lost` (it fires the timers) has no observer of the walker and knows her
    /// only from heartbeats; the observer's relay delivered a newer position, and bob gets that one.
    func testSessionLostDecidedOnARelayWithoutObserversCarriesThePositionTheObserverHad() async throws {
        let cluster = try await startCluster()
        let c = try await startNode("node-c", of: cluster) { $0.safety.lostContactGrace = 2000 }
        try await waitUntilFiringTimers(c)
        let b = try await startNode("node-b", of: cluster) { $0.safety.lostContactGrace = 2000 }
        let a = try await RelayProcess.start(cluster.arguments(node: "node-a") + ["--lost-contact-grace", "2"])
        addTeardownBlock { a.stop() }
        // The shards split three ways; alice is named so that node c fires her timers (it keeps them when node
        // a dies: only node a's are free then).
        let share = TimerShareDecision.fairShare(relays: 3)
        try await eventually(within: 10, "the three relays to split the timer shards") {
            let sizes = [try await c.running.relay.firedTimerShards.size, try await b.running.relay.firedTimerShards.size]
            let locked = try await timerShardLocksHeld(in: cluster)
            return sizes.allSatisfy { $0 <= share } && locked == TimerShards.count
        }
        let (walker, alice, _, bob, id) = try await aliceWalks(on: a, followedByBobOn: b,
                                                               named: try await uniqueUsername("alice", firedBy: c))
        try await eventually(within: 2, "node a's heartbeat to bring alice's position to node c") {
            try c.running.relay.presence.lastPosition(alice)?.lat == 57.0
        }
        try await walker.send(["type": "pos", "lat": 57.5, "lon": 11.5])
        try await bob.client.event("pos", where: { $0["lat"] == 57.5 })
        a.kill()
        let lost = try await bob.client.event("session.lost", timeout: 15)
        XCTAssertEqual(lost["sessionId"], .string(id))
        XCTAssertEqual(lost["lastPosition"]?["lat"], 57.5, "the last position bob had: \(lost)")
    }

    /// Alice paused for bob before her relay died: bob never had her later positions, and `session.lost`
    /// shows him none of them (as on one relay: none while she has a pause).
    func testAWalkerWhoPausedForTheObserverIsLostWithoutAPosition() async throws {
        let (a, _, walker, _, _, bob, id) = try await walkOnAKillableRelay()
        try await walker.ok("location.pause", ["from": .string(bob.username)])
        // Any request catches its relay up with the store first: node b has the pause after this.
        try await bob.client.ok("session.list")
        try await walker.send(["type": "pos", "lat": 59.0, "lon": 12.0])
        try await walker.ok("session.list")  // the position went out before this reply
        a.kill()
        let lost = try await bob.client.event("session.lost", timeout: 15)
        XCTAssertEqual(lost["sessionId"], .string(id))
        XCTAssertEqual(lost["lastPosition"], .null, "no position while alice has a pause: \(lost)")
        let hidden = try await bob.client.eventsAfterRoundTrip("pos")
        XCTAssertEqual(hidden.filter { $0["lat"] == 59.0 }, [], "the paused position never reached bob")
    }

    func testAWalkerOfAKilledRelayIsLostOnlyAfterStayingAwayPastTheGrace() async throws {
        let (a, b, _, _, token, bob, id) = try await walkOnAKillableRelay()
        a.kill()
        let back = try await b.connect(label: "alice-back")
        try await back.ok("hello", ["token": .string(token)])
        try await back.send(["type": "pos", "lat": 57.1, "lon": 11.0])
        try await bob.client.event("pos", where: { $0["lat"] == 57.1 })
        // Past node a's expiry (3 s) and the grace (2 s): alice is connected to node b, so nobody is lost.
        // The test is about time passing: no event marks a grace that ran out without a loss.
        try await Task.sleep(for: .seconds(6))
        let lost = try await bob.client.eventsAfterRoundTrip("session.lost")
        XCTAssertEqual(lost, [], "alice came back within the grace")

        await back.close()
        let event = try await bob.client.event("session.lost", timeout: 10)
        XCTAssertEqual(event["sessionId"], .string(id))
        XCTAssertEqual(event["lastPosition"]?["lat"], 57.1)
    }

    /// PostgreSQL stops under two relays: positions keep crossing them, a request that needs storage gets
    /// `internal` within seconds, one that needs none is answered, and once PostgreSQL is back requests
    /// work again and a relay fires the timers, without restarting anything.
    func testPostgresRestartedUnderTwoRelays() async throws {
        let server = try await postgres()
        addTeardownBlock { if !server.isRunning { try? await server.start() } }
        let cluster = Cluster(location: try server.createDatabase(), nats: try await startNATS())
        let quick: (inout RelayConfiguration) -> Void = { $0.postgresTimeouts = .init(connect: .seconds(2), query: .seconds(2)) }
        let a = try await startNode("node-a", of: cluster, quick)
        let b = try await startNode("node-b", of: cluster, quick)
        let alice = try await a.user("alice")
        let bob = try await b.user("bob")
        try await befriend(alice, bob)
        let id = try await follow(alice, by: [bob])

        server.stop()
        try await alice.client.send(["type": "pos", "lat": 58.0, "lon": 11.0])
        let pos = try await bob.client.event("pos", timeout: 2)
        XCTAssertEqual(pos["lat"], 58.0, "positions need no storage")
        let clock = ContinuousClock()
        let started = clock.now
        let code = try await alice.client.failure("session.checkin", ["sessionId": .string(id), "checkInBy": .null], timeout: 15)
        XCTAssertEqual(code, "internal")
        XCTAssertLessThan(clock.now - started, .seconds(8), "a clear error within seconds, not a hang")
        let list = try await bob.client.ok("friend.list", timeout: 5)
        XCTAssertEqual(list["friends"]?.arrayValue?.count, 1, "served from the cache")

        try await server.start()
        try await eventually(within: 15, "requests to work again") {
            let reply = try await alice.client.request("session.checkin", ["sessionId": .string(id), "checkInBy": .null], timeout: 10)
            return reply["type"] == "ok"
        }
        try await eventually(within: 10, "a relay to fire the timers again") {
            let shards = [try await a.running.relay.firedTimerShards, try await b.running.relay.firedTimerShards]
            return shards[0].union(shards[1]) == .all && shards[0].size + shards[1].size == TimerShards.count
        }
    }

    /// A relay that stops gracefully hands over at once: its users are offline for the others within a
    /// second (not after the 3 s silence), and another relay takes the timers.
    func testAStoppedRelayHandsOverAtOnce() async throws {
        let cluster = try await startCluster()
        let a = try await startNode("node-a", of: cluster)
        try await waitUntilFiringTimers(a)
        let b = try await startNode("node-b", of: cluster)
        let alice = try await a.user("alice")
        let bob = try await b.user("bob")
        try await befriend(alice, bob)
        try await eventually(within: 2, "node b to see alice online") { try b.running.relay.presence.isOnline(alice.username) }
        _ = try await bob.client.eventsAfterRoundTrip("presence")

        await a.shutdown()
        let offline = try await bob.client.event("presence", timeout: 1, where: { $0["username"] == .string(alice.username) })
        XCTAssertEqual(offline["online"], false)
        try await waitUntilFiringTimers(b, within: 3)
    }
}
