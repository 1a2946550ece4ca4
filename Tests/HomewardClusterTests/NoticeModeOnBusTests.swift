import HomewardCluster
import HomewardCore
import HomewardNATS
import HomewardProtocol
import HomewardTestSupport
import Logging
import Synchronization
import XCTest

/// `--change-notices` must be the same on every relay: each heartbeat states its relay's mode, and a relay that hears
/// another one says so (an error logged once per relay and start, a counter per heartbeat), on a real nats-server.
final class NoticeModeOnBusTests: XCTestCase {
    private func connect(_ server: NATSServerProcess, node: String, perUser: Bool, logger: Logger = Logger(label: "test"),
                         metrics: RecordingMetrics = RecordingMetrics()) async throws -> NATSBus {
        try await NATSBus.connect(servers: [NATSServerAddress(host: "127.0.0.1", port: server.port)], node: node, logger: logger,
                                  publishesPerUser: perUser, readsEveryNotice: !perUser, metrics: metrics)
    }

    func testARelayFollowingItsUsersReportsARelayThatPublishesOnHwChangesAloneOnce() async throws {
        let server = try await NATSServerProcess.start()
        defer { server.stop() }
        let log = LogRecorder(), metrics = RecordingMetrics()
        let here = try await connect(server, node: "here", perUser: true, logger: log.logger, metrics: metrics)
        let heard = TokenReceiver()
        try await here.start(delivering: heard)
        let alike = try await connect(server, node: "alike", perUser: true)
        try await alike.start(delivering: TokenReceiver())
        let other = try await connect(server, node: "other", perUser: false)
        try await other.start(delivering: TokenReceiver())

        alike.publishPresence(.heartbeat(PresenceHeartbeat(node: "alike", epoch: "a", seq: 0)))
        var heartbeat = try await heard.nextHeartbeat()
        XCTAssertEqual(heartbeat.node, "alike")
        XCTAssertTrue(heartbeat.noticesPerUser, "its bus states its mode")
        XCTAssertEqual(metrics.counter("homeward_bus_notice_mode_mismatches_total"), 0)

        for seq in 0..<2 {
            other.publishPresence(.heartbeat(PresenceHeartbeat(node: "other", epoch: "o", seq: Int64(seq))))
            heartbeat = try await heard.nextHeartbeat()
            XCTAssertFalse(heartbeat.noticesPerUser)
        }
        XCTAssertEqual(metrics.counter("homeward_bus_notice_mode_mismatches_total"), 2, "each heartbeat of another mode counted")
        let errors = log.lines(at: .error)
        XCTAssertEqual(errors.count, 1, "logged once: \(errors)")
        XCTAssertTrue(errors.first?.contains("relay=other") ?? false, "\(errors)")
        for bus in [here, alike, other] { await bus.stop() }
    }
}
