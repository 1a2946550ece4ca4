import Foundation
import HomewardCore
import HomewardPostgres
import HomewardProtocol
import HomewardServer
import HomewardTestSupport
import Logging
import XCTest

/// A relay on PostgreSQL stopped the way SIGTERM stops it right after its clients went away: their last-seen
/// times are written before the store closes, and nothing fails on the way. `shutdown()` triggers the graceful
/// shutdown of the relay's service group, as SIGTERM does in `homeward-relay`: PostgreSQL's pool is one of its
/// services, stopped only after the relay's last write.
final class PostgresShutdownTests: ClusterTestCase {
    func testAStopRightAfterDisconnectsStoresTheLastSeenTimesAndLogsNoError() async throws {
        let server = try await postgres()
        let location = try server.createDatabase()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("homeward-pgstop-\(UUID().uuidString)").path
        addTeardownBlock { try? FileManager.default.removeItem(atPath: directory) }
        var config = RelayConfiguration()
        config.host = "127.0.0.1"
        config.port = 0
        config.eventLoopThreads = 2
        config.passwordIterations = 210_000
        config.relayLimits.registrationsPerAddress = 0
        config.dataDirectory = directory
        config.store = .postgres(location)
        let log = LogRecorder()
        let relayServer = RelayServer(configuration: config, logger: log.logger)
        let running = try await withTimeout(60, "the relay to start") { try await relayServer.start() }
        let caPath = try XCTUnwrap(running.devCAPath)

        var users: [(TestClient, String)] = []
        for index in 0..<6 {
            let client = try await TestClient.connect(port: running.port, caPath: caPath, label: "user\(index)")
            let username = TestRelay.uniqueUsername("gone")
            try await client.ok("register", ["username": .string(username), "password": "correct horse battery"])
            users.append((client, username))
        }
        let beforeClosing = Relay.systemMillis()
        for (client, _) in users { await client.close() }
        try await withTimeout(30, "the relay to stop") { await running.shutdown() }

        let problems = log.lines(at: .error) + log.lines(at: .warning).filter { $0.contains("last-seen") }
        XCTAssertEqual(problems, [], "a clean stop")
        let store = try await PostgresStore.open(location)
        let stored = try await store.load()
        await store.close()
        for (_, username) in users {
            let seen = try XCTUnwrap(stored.lastSeen[username], "\(username)'s last-seen time is stored")
            XCTAssertGreaterThanOrEqual(seen, beforeClosing, "\(username): the time they left, not their sign-in")
        }
    }
}
