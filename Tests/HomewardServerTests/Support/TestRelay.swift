import Foundation
import HomewardCore
import HomewardCoreTestSupport
import HomewardProtocol
import HomewardServer
import HomewardStorage
import HomewardTestSupport
import Logging
import NIOHTTP1
import Synchronization
import XCTest

/// A relay on 127.0.0.1 (a free port) with its own temporary data directory.
final class TestRelay: Sendable {
    let dataDirectory: String
    let configuration: RelayConfiguration
    private struct State {
        var running: RunningRelay?
        var clients: [TestClient] = []
    }
    private let state: Mutex<State>

    private init(dataDirectory: String, configuration: RelayConfiguration, running: RunningRelay) {
        self.dataDirectory = dataDirectory
        self.configuration = configuration
        self.state = Mutex(State(running: running))
    }

    /// Starts a relay in a fresh temporary directory. `configure` may change anything but the data directory.
    /// `wrapStore` puts something between the relay and its database, such as an `InstrumentedStore`.
    static func start(_ configure: (inout RelayConfiguration) -> Void = { _ in },
                      wrapStore: @escaping @Sendable (any RelayStore) -> any RelayStore = { $0 }) async throws -> TestRelay {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("homeward-e2e-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var config = RelayConfiguration()
        config.host = "127.0.0.1"
        config.port = 0
        config.eventLoopThreads = 2
        // Sign-ins in tests check passwords, not their cost: the real count would be most of the suite's time.
        config.passwordHasher = .forTests
        // Every test client connects from 127.0.0.1; tests of the limit set it themselves.
        config.relayLimits.registrationsPerAddress = 0
        // HOMEWARD_TLS_BACKEND=openssl swift test runs every end-to-end test on the other TLS library.
        if let name = ProcessInfo.processInfo.environment["HOMEWARD_TLS_BACKEND"], let backend = TLSBackend(name) {
            config.tlsBackend = backend
        }
        configure(&config)
        config.dataDirectory = directory
        do {
            let running = try await RelayServer(configuration: config, logger: Self.logger, wrapStore: wrapStore).start()
            return TestRelay(dataDirectory: directory, configuration: config, running: running)
        } catch {
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
    }

    static let logger: Logger = {
        var logger = Logger(label: "homeward.e2e")
        logger.logLevel = ProcessInfo.processInfo.environment["HOMEWARD_TEST_LOG"] != nil ? .debug : .critical
        return logger
    }()

    var running: RunningRelay {
        get throws {
            guard let running = state.withLock({ $0.running }) else { throw TestFailure("the relay is not running") }
            return running
        }
    }

    var port: Int { get throws { try running.port } }

    var caPath: String {
        get throws {
            guard let path = try running.devCAPath else { throw TestFailure("the relay made no development CA") }
            return path
        }
    }

    /// Stops the relay the way SIGTERM does; the data directory stays.
    func shutdown() async {
        let running = state.withLock { state in
            defer { state.running = nil }
            return state.running
        }
        await running?.shutdown()
    }

    /// Shuts down (if running) and starts a new relay on the same data directory (on a new port).
    func restart() async throws {
        await shutdown()
        let running = try await RelayServer(configuration: configuration, logger: Self.logger).start()
        state.withLock { $0.running = running }
    }

    /// Closes the clients, stops the relay and removes the data directory.
    func stop() async {
        let clients = state.withLock { state in
            defer { state.clients = [] }
            return state.clients
        }
        for client in clients { await client.close() }
        await shutdown()
        try? FileManager.default.removeItem(atPath: dataDirectory)
    }

    // MARK: Clients

    /// A new, unauthenticated WebSocket connection.
    func connect(subprotocol: String? = nil, path: String = "/v1/ws", label: String = "client",
                 answerPings: Bool = true, preamble: [UInt8] = []) async throws -> TestClient {
        let client = try await TestClient.connect(port: port, caPath: caPath, path: path, subprotocol: subprotocol,
                                                  label: label, answerPings: answerPings, preamble: preamble)
        state.withLock { $0.clients.append(client) }
        return client
    }

    /// Registers a new user with a unique username starting with `base` and returns it signed in.
    func user(_ base: String = "user", name: String? = nil, password: String = "correct horse battery") async throws -> TestUser {
        let username = Self.uniqueUsername(base)
        let client = try await connect(label: username)
        var fields: [(String, JSONValue)] = [("username", .string(username)), ("password", .string(password))]
        if let name { fields.append(("name", .string(name))) }
        let reply = try await client.ok("register", fields)
        guard let token = reply["token"]?.stringValue else { throw TestFailure("register gave no token: \(JSONWriter.string(reply))") }
        return TestUser(username: username, name: name ?? username, password: password, token: token, client: client)
    }

    /// Another connection (device) of `user`, signed in with `hello`.
    func device(of user: TestUser, label: String? = nil) async throws -> TestClient {
        let client = try await connect(label: label ?? "\(user.username)-device")
        try await client.ok("hello", ["token": .string(user.token)])
        return client
    }

    /// `user` signed in again on a new connection, after its first one closed.
    func reconnect(_ user: TestUser) async throws -> TestUser {
        let client = try await device(of: user, label: user.username)
        return TestUser(username: user.username, name: user.name, password: user.password, token: user.token, client: client)
    }

    func http(_ path: String, method: HTTPMethod = .GET) async throws -> TestHTTPResponse {
        try await httpsRequest(port: port, caPath: caPath, method: method, path: path)
    }

    private static let counter = Mutex<Int>(0)

    /// `base` plus a process-wide counter, so usernames never collide.
    static func uniqueUsername(_ base: String) -> String {
        let n = counter.withLock { value in
            value += 1
            return value
        }
        return "\(base.prefix(24))\(n)"
    }
}

/// A registered user and their first, signed-in connection.
struct TestUser: Sendable {
    let username: String
    let name: String
    let password: String
    let token: String
    let client: TestClient
}

/// Base class of the end-to-end tests: a relay per test, removed afterwards.
class EndToEndTestCase: XCTestCase {
    /// Starts a relay that is stopped (and its directory removed) when the test ends.
    func startRelay(_ configure: (inout RelayConfiguration) -> Void = { _ in },
                    wrapStore: @escaping @Sendable (any RelayStore) -> any RelayStore = { $0 }) async throws -> TestRelay {
        let relay = try await TestRelay.start(configure, wrapStore: wrapStore)
        addTeardownBlock { await relay.stop() }
        return relay
    }

    /// Alice with friends bob and carol, and dave who is nobody's friend.
    func cast() async throws -> (TestRelay, TestUser, TestUser, TestUser, TestUser) {
        let relay = try await startRelay()
        let alice = try await relay.user("alice", name: "Alice")
        let bob = try await relay.user("bob")
        let carol = try await relay.user("carol")
        let dave = try await relay.user("dave")
        try await befriend(alice, bob)
        try await befriend(alice, carol)
        return (relay, alice, bob, carol, dave)
    }

    /// Makes `a` and `b` friends through the protocol and consumes the events it causes.
    func befriend(_ a: TestUser, _ b: TestUser) async throws {
        let requested = try await a.client.ok("friend.request", ["username": .string(b.username)])
        XCTAssertEqual(requested["status"], "requested")
        try await b.client.event("friend.request", where: { $0["from"]?["username"] == .string(a.username) })
        try await b.client.ok("friend.accept", ["username": .string(a.username)])
        try await a.client.event("friend.added", where: { $0["user"]?["username"] == .string(b.username) })
        try await b.client.event("friend.added", where: { $0["user"]?["username"] == .string(a.username) })
    }
}
