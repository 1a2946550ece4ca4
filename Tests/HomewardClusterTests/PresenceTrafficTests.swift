import HomewardCluster
import HomewardCore
import HomewardCoreTestSupport
import HomewardNATS
import HomewardTestSupport
import Logging
import NIOCore
import Synchronization
import XCTest

/// What presence costs on the bus: two relays on a real nats-server, each with `users` connected and idle,
/// and the bytes per second on the presence subjects (`hw.presence` and `hw.presence.>`) measured by a
/// listener of its own. Printed for docs/architecture.md; the assertion keeps the cost independent of how
/// many users are connected (a few heartbeats a second, not a list of everyone).
final class PresenceTrafficTests: XCTestCase {
    func testIdleUsersCostNoPresenceTrafficOnTheBus() async throws {
        let small = try await presenceBytesPerSecond(usersPerRelay: 10)
        let large = try await presenceBytesPerSecond(usersPerRelay: 1000)
        print("presence traffic, 2 relays: 10 idle users each \(small) B/s, 1000 idle users each \(large) B/s")
        XCTAssertLessThan(large, 2 * max(small, 200), "the traffic must not grow with the number of connected users")
    }

    private func presenceBytesPerSecond(usersPerRelay: Int) async throws -> Int {
        let server = try await NATSServerProcess.start()
        defer { server.stop() }
        let address = NATSServerAddress(host: "127.0.0.1", port: server.port)
        var harnesses: [SafetyHarness] = []
        for node in ["node-a", "node-b"] {
            let bus = try await NATSBus.connect(servers: [address], node: node, logger: Logger(label: "test"))
            let users = (0..<usersPerRelay).map { "\(node)-user\($0)" }
            let harness = try await SafetyHarness(users: users, friends: [], bus: bus, node: node)
            try await harness.relay.startBus()
            for user in users { _ = try await harness.connect(user) }
            harnesses.append(harness)
        }
        let listener = try await NATSClient.connect(urls: [server.url])
        let bytes = ByteCount()
        var counting: [Task<Void, Never>] = []
        for subject in ["hw.presence", "hw.presence.>"] {
            let subscription = try await listener.subscribe(subject: subject)
            counting.append(Task { for await message in subscription { bytes.add(message.payload.readableBytes) } })
        }
        try await listener.flush()
        // Past the sign-ins' own traffic, then a whole number of presence seconds.
        try await Task.sleep(for: .milliseconds(1500))
        bytes.reset()
        let seconds = 5
        try await Task.sleep(for: .seconds(seconds))
        let total = bytes.total
        for task in counting { task.cancel() }
        await listener.close()
        for harness in harnesses { await harness.relay.stopBus() }
        return total / seconds
    }
}

/// Bytes counted by the listener's tasks.
private final class ByteCount: Sendable {
    private let count = Mutex(0)
    func add(_ bytes: Int) { count.withLock { $0 += bytes } }
    func reset() { count.withLock { $0 = 0 } }
    var total: Int { count.withLock { $0 } }
}
