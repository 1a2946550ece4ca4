import Foundation
import HomewardCore
import HomewardPostgres
import HomewardProtocol
import XCTest

/// Two relays deciding at the same moment on the same session: a session is written whole, so without the
/// store's check (`StoreCacheBehind`) the later write puts back the invitee states of its relay's cache and
/// undoes the other relay's accept, whose observer got `ok` and never receives a position.
final class ClusterWriteConflictTests: ClusterTestCase {
    /// Observers on two relays accept one session at once, round after round: both stay observers in
    /// PostgreSQL, and both receive the walker's next position.
    func testTwoObserversAcceptingOneSessionOnTwoRelaysAtOnceBothObserve() async throws {
        let cluster = try await startCluster()
        let a = try await startNode("node-a", of: cluster)
        let b = try await startNode("node-b", of: cluster)
        let alice = try await a.user("alice")
        let bob = try await a.user("bob")
        let carol = try await b.user("carol")
        for friend in [bob, carol] { try await befriend(alice, friend) }
        let store = try await PostgresStore.open(cluster.location)
        addTeardownBlock { await store.close() }

        for round in 0..<20 {
            let start = try await alice.client.ok("session.start", ["invite": .strings([bob.username, carol.username])])
            let id = try XCTUnwrap(start["session"]?["sessionId"]?.stringValue)
            for observer in [bob, carol] {
                try await observer.client.event("session.invite", where: { $0["session"]?["sessionId"] == .string(id) })
            }
            async let bobAccepts = bob.client.request("session.accept", ["sessionId": .string(id)])
            async let carolAccepts = carol.client.request("session.accept", ["sessionId": .string(id)])
            let replies = try await [bobAccepts, carolAccepts]
            XCTAssertEqual(replies.map { $0["type"] }, ["ok", "ok"], "round \(round): \(replies)")
            for observer in [bob, carol] {
                try await alice.client.event("session.accepted", where: { $0["by"] == .string(observer.username) })
            }

            let stored = try await store.load().sessions.first { $0.id == id }
            XCTAssertEqual(stored?.observers.sorted(), [bob.username, carol.username].sorted(),
                           "round \(round): both accepts are in PostgreSQL")
            try await alice.client.send(["type": "pos", "lat": .number(57.0 + Double(round) / 1000), "lon": 11.5,
                                         "ts": .int(1_763_830_000_000 + Int64(round))])
            for observer in [bob, carol] {
                let pos = try await observer.client.event("pos", timeout: 3)
                XCTAssertEqual(pos["from"], .string(alice.username), "round \(round): \(observer.username)")
            }
            try await alice.client.ok("session.end", ["sessionId": .string(id)])
            for observer in [bob, carol] {
                try await observer.client.event("session.ended", where: { $0["sessionId"] == .string(id) })
            }
        }
    }
}
