import Foundation
import HomewardPostgres
import HomewardPostgresTestSupport
import HomewardServer
import Synchronization
import XCTest

/// The relay on PostgreSQL (`--store postgres://…`), in process, against a real server that this class
/// starts once (its first test) and removes at the end; each test has its own database.
final class PostgresRelayEndToEndTests: EndToEndTestCase {
    private static let shared = Mutex<PostgresServer.Availability?>(nil)

    /// The class's server; fails when PostgreSQL is missing, skips only with HOMEWARD_SKIP_POSTGRES=1.
    private func server() async throws -> PostgresServer {
        var availability = Self.shared.withLock { $0 }
        if availability == nil {
            // XCTest runs one test of a class at a time, so only one of them starts the server.
            let started = await PostgresServer.startIfAvailable()
            Self.shared.withLock { $0 = started }
            availability = started
        }
        guard let server = try availability?.server() else {
            throw XCTSkip("\(PostgresServer.skipVariable)=1: PostgreSQL tests skipped")
        }
        return server
    }

    override class func tearDown() {
        if case .running(let server)? = shared.withLock({ slot in defer { slot = nil }; return slot }) { server.remove() }
        super.tearDown()
    }

    private func startRelay(on location: PostgresLocation, timeout: Duration = .seconds(5)) async throws -> TestRelay {
        try await startRelay { config in
            config.store = .postgres(location)
            config.postgresTimeouts = .init(connect: timeout, query: timeout)
        }
    }

    func testStateSurvivesRestartOnPostgres() async throws {
        let server = try await server()
        let relay = try await startRelay(on: try server.createDatabase())
        try await assertStateSurvivesRestart(relay)
        XCTAssertFalse(FileManager.default.fileExists(atPath: relay.configuration.databasePath),
                       "the data is in PostgreSQL, not in an SQLite file")
    }

    /// PostgreSQL stops under a running relay: requests that need storage get `internal` within a few
    /// seconds on a connection that stays open, and once PostgreSQL is back the next request works,
    /// without restarting the relay.
    func testStoppedPostgresGivesErrorsAndTheRelayRecoversWhenItIsBack() async throws {
        let server = try await server()
        addTeardownBlock { if !server.isRunning { try? await server.start() } }
        let relay = try await startRelay(on: try server.createDatabase(), timeout: .seconds(2))
        let alice = try await relay.user("alice")
        let bob = try await relay.user("bob")

        server.stop()
        let clock = ContinuousClock()
        let started = clock.now
        let code = try await alice.client.failure("friend.request", ["username": .string(bob.username)], timeout: 15)
        XCTAssertEqual(code, "internal")
        // One timed-out write and one timed-out reload: about 4 s with 2 s timeouts.
        XCTAssertLessThan(clock.now - started, .seconds(8), "the error comes within a few seconds")
        XCTAssertTrue(alice.client.isActive, "the connection stays open")
        let login = try await relay.connect(label: "alice-login")
        let loginCode = try await login.failure("login", ["username": .string(alice.username), "password": .string(alice.password)],
                                                timeout: 15)
        XCTAssertEqual(loginCode, "internal", "a sign-in that must read the password hash fails too")
        try await alice.client.ok("ping")

        try await server.start()
        // The next requests that need storage work again: a sign-in (a read), a new account and a friend
        // request (writes), with the event delivered. (Not alice's failed request again: the relay could not
        // reload its state while PostgreSQL was down and still holds that request in memory; see Relay.persist.)
        try await login.ok("login", ["username": .string(alice.username), "password": .string(alice.password)])
        let carol = try await relay.user("carol")
        try await carol.client.ok("friend.request", ["username": .string(bob.username)])
        let request = try await bob.client.event("friend.request", where: { $0["from"]?["username"] == .string(carol.username) })
        XCTAssertEqual(request["from"]?["username"], .string(carol.username))
    }

    func testUnreachablePostgresIsAClearStartupError() async throws {
        let server = try await server()
        // A database that does not exist on a running server, a user it does not know, then a port nobody listens on.
        let missing = server.location(database: "no_such_database")
        var stranger = server.location(database: "postgres")
        stranger.username = "no_such_user"
        var closed = missing
        closed.port = 1
        for (location, expected) in [(missing, "database \"no_such_database\" does not exist"),
                                     (stranger, "authentication failed for user no_such_user"),
                                     (closed, "connection refused")] {
            let clock = ContinuousClock()
            let started = clock.now
            do {
                let relay = try await startRelay(on: location, timeout: .seconds(1))
                await relay.stop()
                XCTFail("the relay started without its database at \(location)")
            } catch let error as RelayStartupError {
                guard case .cannotConnectDatabase(let server, _) = error else { return XCTFail("unexpected \(error)") }
                XCTAssertEqual(server, "\(location.host):\(location.port)")
                XCTAssertTrue(error.description.contains(expected), error.description)
                XCTAssertFalse(error.description.contains("\n"), "one line: \(error.description)")
            }
            XCTAssertLessThan(clock.now - started, .seconds(5), "no hang on \(location)")
        }
    }

    /// The real executable with `--store postgres://…` (the flag, not an in-process configuration):
    /// what was acknowledged survives kill -9, and the data directory holds no SQLite database.
    func testRelayProcessWithTheStoreFlagKeepsItsDataAcrossKill9() async throws {
        let server = try await server()
        let location = try server.createDatabase()
        let relay = try await RelayProcess.start(["--store", "postgres://postgres@127.0.0.1:\(server.port)/\(location.database)?sslmode=disable"])
        addTeardownBlock { relay.stop() }
        let alice = try await relay.register("alice")
        let bob = try await relay.register("bob")
        try await alice.client.ok("friend.request", ["username": .string(bob.username)])
        try await bob.client.ok("friend.accept", ["username": .string(alice.username)])
        let raised = try await alice.client.ok("alarm.raise", ["text": "help\u{0} at the bridge"])
        let alarmID = try XCTUnwrap(raised["alarm"]?["alarmId"]?.stringValue)

        try await relay.killAndRestart()
        let bobAgain = try await relay.connect(label: "\(bob.username)-again")
        try await bobAgain.ok("hello", ["token": .string(bob.token)])
        let alarm = try await bobAgain.event("alarm")
        XCTAssertEqual(alarm["alarm"]?["alarmId"], .string(alarmID), "the alarm acknowledged before kill -9 is pending")
        XCTAssertEqual(alarm["alarm"]?["text"], "help\u{0} at the bridge", "its text comes back whole")
        XCTAssertFalse(FileManager.default.fileExists(atPath: relay.dataDirectory + "/homeward.sqlite"))
    }
}
