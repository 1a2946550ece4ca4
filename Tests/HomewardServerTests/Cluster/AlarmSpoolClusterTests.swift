import Foundation
import HomewardProtocol
import HomewardServer
import XCTest

/// A panic button on a cluster whose PostgreSQL is stopped: answered within the store timeout plus one
/// second, heard on every relay at once, stored once PostgreSQL is back.
final class AlarmSpoolClusterTests: ClusterTestCase {
    func testAnAlarmRaisedWhilePostgresIsStoppedIsAnsweredHeardEverywhereAndStoredLater() async throws {
        let server = try await postgres()
        addTeardownBlock { if !server.isRunning { try? await server.start() } }
        let cluster = Cluster(location: try server.createDatabase(), nats: try await startNATS())
        let storeTimeout = Duration.seconds(2)
        let quick: (inout RelayConfiguration) -> Void = { $0.postgresTimeouts = .init(connect: storeTimeout, query: storeTimeout) }
        let a = try await startNode("node-a", of: cluster) { config in
            quick(&config)
            config.metricsListen = ListenAddress(host: "127.0.0.1", port: 0)
        }
        let b = try await startNode("node-b", of: cluster, quick)
        let c = try await startNode("node-c", of: cluster, quick)
        let alice = try await a.user("alice")
        let busy = try await a.user("busy")
        let bob = try await b.user("bob")
        let carol = try await c.user("carol")
        for friend in [busy, bob, carol] { try await befriend(alice, friend) }

        server.stop()
        // A write failing on alice's relay first, and the alarm right behind it: sent once node a has read
        // busy's request (counted on its event loop right before it goes to the relay's mailbox).
        let before = try await requestsRead("alarm.contacts", by: a)
        async let failing = busy.client.request("alarm.contacts", ["usernames": .strings([alice.username])], timeout: 15)
        try await eventually(within: 5, "node a to read busy's request") { try await requestsRead("alarm.contacts", by: a) > before }
        let clock = ContinuousClock()
        let started = clock.now
        let raised = try await alice.client.ok("alarm.raise", ["text": "help", "lat": 57.7, "lon": 11.9], timeout: 30)
        XCTAssertLessThanOrEqual(clock.now - started, storeTimeout + .seconds(1), "answered within the store timeout + 1 s")
        XCTAssertEqual(raised["stored"], false)
        let id = try XCTUnwrap(raised["alarm"]?["alarmId"]?.stringValue)
        for recipient in [bob, carol] {
            let heard = try await recipient.client.event("alarm", timeout: 2, where: { $0["alarm"]?["alarmId"] == .string(id) })
            XCTAssertEqual(heard["stored"], false)
        }
        _ = try await failing

        // Known to be down now: the next alarm waits for no store call of its own (at most for a read-back
        // already under way).
        let again = clock.now
        let second = try await alice.client.ok("alarm.raise", ["text": "still down"], timeout: 30)
        XCTAssertLessThanOrEqual(clock.now - again, storeTimeout + .seconds(1))
        XCTAssertEqual(second["stored"], false)

        try await server.start()
        try await eventually(within: 20, "the spooled alarm to be stored and known on bob's relay") {
            try await bob.client.request("alarm.ack", ["alarmId": .string(id)], timeout: 10)["type"] == "ok"
        }
        let acked = try await alice.client.event("alarm.acked", timeout: 5, where: { $0["alarmId"] == .string(id) })
        XCTAssertNil(acked["stored"], "acknowledged once stored: an ordinary, stored acknowledgement")
    }

    /// How many requests of `type` `relay` has read, from its metrics listener (`homeward_messages_in_total`).
    private func requestsRead(_ type: String, by relay: TestRelay) async throws -> Int {
        let port = try XCTUnwrap(try relay.running.metricsPort)
        let metrics = try await httpsRequest(port: port, caPath: nil, path: "/metrics").body
        let prefix = "homeward_messages_in_total{type=\"\(type)\"} "
        guard let line = metrics.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }),
              let count = Double(line.dropFirst(prefix.count)) else { return 0 }
        return Int(count)
    }
}
