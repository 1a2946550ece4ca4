import Foundation
import HomewardClient
import HomewardCore
import HomewardServer
import HomewardTestSupport
import Logging
import XCTest

/// A real relay, in this process, on 127.0.0.1 and a free port, with a temporary data directory.
final class LoopbackRelay: @unchecked Sendable {
    let dataDirectory: String
    private(set) var running: RunningRelay
    private let configuration: RelayConfiguration

    var port: Int { running.port }
    var url: String { "wss://127.0.0.1:\(running.port)/v1/ws" }
    var caPath: String { running.devCAPath ?? dataDirectory + "/certs/dev-ca.pem" }

    private init(dataDirectory: String, configuration: RelayConfiguration, running: RunningRelay) {
        self.dataDirectory = dataDirectory
        self.configuration = configuration
        self.running = running
    }

    static func start(_ configure: (inout RelayConfiguration) -> Void = { _ in }) async throws -> LoopbackRelay {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("homeward-client-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var configuration = RelayConfiguration()
        configuration.host = "127.0.0.1"
        configuration.port = 0
        configuration.dataDirectory = directory
        // The CLI tests check what sign-in does, not its cost: a cheap count keeps the suite fast.
        configuration.passwordHasher = PasswordHasher(unsafeIterations: 200)
        configuration.eventLoopThreads = 2
        configuration.relayLimits.registrationsPerAddress = 0  // every test client is 127.0.0.1
        configure(&configuration)
        let running = try await RelayServer(configuration: configuration, logger: logger).start()
        return LoopbackRelay(dataDirectory: directory, configuration: configuration, running: running)
    }

    private var isRunning = true

    /// Stops the relay, keeping its data, until `start()`.
    func pause() async {
        guard isRunning else { return }
        isRunning = false
        await running.shutdown()
    }

    /// Starts a paused relay again on the same port and data directory.
    func resume() async throws {
        guard !isRunning else { return }
        var configuration = self.configuration
        configuration.port = running.port
        running = try await RelayServer(configuration: configuration, logger: Self.logger).start()
        isRunning = true
    }

    /// Stops the relay and starts it again on the same port and data directory, as after a crash or deploy.
    func restart() async throws {
        await pause()
        try await resume()
    }

    func stop() async {
        await pause()
        try? FileManager.default.removeItem(atPath: dataDirectory)
    }

    func clientConfiguration(reconnect: ReconnectPolicy = ReconnectPolicy(initialDelay: .milliseconds(50), maximumDelay: .seconds(1)))
        throws -> RelayClientConfiguration {
        RelayClientConfiguration(endpoint: try RelayEndpoint(url: url), trust: .caFile(caPath), reconnect: reconnect,
                                 requestTimeout: .seconds(20))
    }

    func makeClient() throws -> RelayClient {
        try RelayClient(configuration: clientConfiguration())
    }

    static let logger: Logger = {
        var logger = Logger(label: "homeward.client-tests")
        logger.logLevel = ProcessInfo.processInfo.environment["HOMEWARD_TEST_LOG"] != nil ? .debug : .critical
        return logger
    }()
}

/// A unique, valid username for one test.
func uniqueName(_ prefix: String) -> String {
    "\(prefix)_\(UUID().uuidString.prefix(8).lowercased())"
}

extension AsyncStream where Element == RelayEvent {
    /// The next event that `match` turns into a value, skipping others.
    @discardableResult
    func first<T: Sendable>(_ what: String, within seconds: Double = 15, _ match: @escaping @Sendable (RelayEvent) -> T?) async throws -> T {
        try await withTimeout(seconds, what) {
            for await event in self {
                if let value = match(event) { return value }
            }
            throw TestFailure("the stream ended before \(what)")
        }
    }
}
