import Foundation
import HomewardNATS
import HomewardProtocol
import HomewardServer
import NIOCore
import XCTest

/// Relays that die and a nats-server that restarts: timers still fire exactly once, positions resume.
final class ClusterFaultTests: ClusterTestCase {
    /// Node a (a real process) owns the timers when a walker on it sets a check-in deadline; node a is
    /// killed with SIGKILL; node b takes the timers and raises the missed check-in alarm, once.
    func testTimersOfAKilledRelayFireOnAnother() async throws {
        let cluster = try await startCluster()
        let a = try await RelayProcess.start(cluster.arguments(node: "node-a"))
        addTeardownBlock { a.stop() }
        // Node a started first and took the timer lock at once; node b waits for it.
        let b = try await startNode("node-b", of: cluster)
        try await Task.sleep(for: .milliseconds(1500))
        let bFiresTimers = try await b.running.relay.firesTimers
        XCTAssertFalse(bFiresTimers, "node a holds the timers")

        let aliceClient = try await a.connect(label: "alice")
        let alice = TestRelay.uniqueUsername("alice")
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
        let start = try await alice.client.ok("session.start", ["invite": [.string(bob.username)]])
        let id = try XCTUnwrap(start["session"]?["sessionId"]?.stringValue)
        try await bob.client.event("session.invite")
        try await bob.client.ok("session.accept", ["sessionId": .string(id)])
        try await alice.client.event("session.accepted")
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
        try await intruder.flush()
        await intruder.close()

        let alice = try await a.user("alice")
        let bob = try await b.user("bob")
        try await befriend(alice, bob)
        let list = try await bob.client.ok("friend.list")
        XCTAssertEqual(list["friends"]?.arrayValue?.first?["username"], .string(alice.username))
    }
}
