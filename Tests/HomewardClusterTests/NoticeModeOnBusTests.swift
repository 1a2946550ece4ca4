@testable import HomewardCluster
import HomewardCore
import HomewardNATS
import HomewardProtocol
import HomewardTestSupport
import Logging
import Synchronization
import XCTest

/// `--change-notices` must be the same on every relay: each heartbeat states its relay's mode, and a relay that hears
/// another one says so (an error logged once per relay and start, a counter per heartbeat), on a real nats-server. A
/// relay hearing only the users it follows also reads `hw.changes` while it hears a relay publishing there alone, and
/// takes that relay's notices there (no copy of a per-user relay's), after telling its relay to read back the rest.
final class NoticeModeOnBusTests: XCTestCase {
    private func connect(_ server: NATSServerProcess, node: String, perUser: Bool, logger: Logger = Logger(label: "test"),
                         metrics: RecordingMetrics = RecordingMetrics()) async throws -> NATSBus {
        try await NATSBus.connect(servers: [NATSServerAddress(host: "127.0.0.1", port: server.port)], node: node, logger: logger,
                                  publishesPerUser: perUser, readsEveryNotice: !perUser, metrics: metrics)
    }

    /// Three relays' buses: `here` (following its users, logging to `log`, counting in `metrics`), `alike` (notices per
    /// user too) and `other` (on `hw.changes` alone).
    private func threeBuses(_ server: NATSServerProcess, log: LogRecorder, metrics: RecordingMetrics)
        async throws -> (here: NATSBus, heard: TokenReceiver, alike: NATSBus, other: NATSBus) {
        let here = try await connect(server, node: "here", perUser: true, logger: log.logger, metrics: metrics)
        let heard = TokenReceiver()
        try await here.start(delivering: heard)
        let alike = try await connect(server, node: "alike", perUser: true)
        try await alike.start(delivering: TokenReceiver())
        let other = try await connect(server, node: "other", perUser: false)
        try await other.start(delivering: TokenReceiver())
        return (here, heard, alike, other)
    }

    func testARelayFollowingItsUsersReportsARelayThatPublishesOnHwChangesAloneOnce() async throws {
        let server = try await NATSServerProcess.start()
        defer { server.stop() }
        let log = LogRecorder(), metrics = RecordingMetrics()
        let (here, heard, alike, other) = try await threeBuses(server, log: log, metrics: metrics)

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

    private func notice(_ token: String, from node: String, users: Set<String> = []) -> ChangeNotice {
        ChangeNotice(node: node, revokedTokens: [token], address: NoticeAddress(users: users))
    }

    func testARelayFollowingItsUsersReadsHwChangesForARelayPublishingThereAloneAndTakesOnlyItsNotices() async throws {
        let server = try await NATSServerProcess.start()
        defer { server.stop() }
        let log = LogRecorder(), metrics = RecordingMetrics()
        let (here, heard, alike, other) = try await threeBuses(server, log: log, metrics: metrics)
        await here.follow(users: ["bob"], unfollowing: [])

        // Before its heartbeat is heard, the other relay's notices reach nobody here: the relay reads them back after.
        other.publishChanges(notice("1", from: "other", users: ["bob"]))
        await other.flush()
        _ = await here.barrier()
        XCTAssertEqual(heard.tokens, [])
        other.publishPresence(.heartbeat(PresenceHeartbeat(node: "other", epoch: "o", seq: 0)))
        _ = try await heard.nextHeartbeat()
        XCTAssertEqual(heard.missedFrom, ["other"], "told to read back once hw.changes is read")
        XCTAssertEqual(metrics.gauge("homeward_bus_followed_subjects"), 2, "bob's subject and hw.changes")
        let errors = log.lines(at: .error)
        XCTAssertEqual(errors.count, 1, "\(errors)")
        XCTAssertTrue(errors.first?.contains("reading hw.changes") ?? false, "\(errors)")

        other.publishChanges(notice("2", from: "other", users: ["bob"]))
        other.publishChanges(notice("3", from: "other"))
        alike.publishChanges(notice("4", from: "alike", users: ["bob"]))
        alike.publishChanges(notice("5", from: "alike", users: ["dan"]))
        await other.flush()
        await alike.flush()
        let generation = await here.barrier()
        XCTAssertEqual(generation, 0)
        XCTAssertEqual(heard.tokens.sorted(), ["2", "3", "4"],
                       "every notice of the relay publishing on hw.changes alone, each notice of a per-user relay once")

        // A relay that restarted per user before its heartbeat says so: the stamped copy of its notice taken on
        // hw.changes is dropped, and its notices there are copies from then on.
        let restarted = try await NATSClient.connect(urls: [server.url])
        try await restarted.publish(subject: "hw.presence",
                                    payload: ClusterCodec.encode(.heartbeat(PresenceHeartbeat(node: "back", epoch: "b", seq: 0))))
        _ = try await heard.nextHeartbeat()
        for index in 1...2 {
            let payload = ClusterCodec.encode(notice("back\(index)", from: "back", users: ["bob"]))
            try await restarted.publish(subject: "hw.changes", payload: payload)
            try await restarted.publish(subject: "hw.changes.bob",
                                        payload: NoticeStamp(node: "back", epoch: "e", number: UInt64(index)).stamped(payload))
        }
        try await restarted.flush()
        _ = await here.barrier()
        XCTAssertEqual(heard.tokens.filter { $0.hasPrefix("back") }, ["back1", "back2"], "each once")
        await restarted.close()

        // Once those relays are silent for `PresenceMessage.expiry`, hw.changes is read no more.
        await other.stop()
        let stopped = try await withTimeout(10, "hw.changes dropped") {
            while metrics.gauge("homeward_bus_followed_subjects") != 1 {
                here.publishPresence(.heartbeat(PresenceHeartbeat(node: "here", epoch: "h", seq: 0)))
                try await Task.sleep(for: .milliseconds(200))
            }
            return true
        }
        XCTAssertTrue(stopped)
        for bus in [here, alike] { await bus.stop() }
    }

    func testTheRelaysPublishingOnHwChangesAloneAreForgottenWhenTheyTurnPerUserOrFallSilent() {
        let check = NoticeModeCheck(publishesPerUser: true, readsEveryNotice: false, logger: Logger(label: "test"),
                                    metrics: RecordingMetrics())
        XCTAssertTrue(check.heard(PresenceHeartbeat(node: "a", epoch: "1", seq: 0), now: 0), "new: read hw.changes")
        XCTAssertFalse(check.heard(PresenceHeartbeat(node: "a", epoch: "1", seq: 1), now: 1000), "already read")
        XCTAssertFalse(check.heard(PresenceHeartbeat(node: "p", epoch: "1", seq: 0, noticesPerUser: true), now: 1000))
        XCTAssertTrue(check.takesUnstamped(from: "a"))
        XCTAssertFalse(check.takesUnstamped(from: "p"))
        XCTAssertTrue(check.forgetSilent(now: 1000 + PresenceMessage.expiry - 1))
        XCTAssertFalse(check.forgetSilent(now: 1000 + PresenceMessage.expiry), "silent for the expiry: gone")
        XCTAssertFalse(check.takesUnstamped(from: "a"))
        XCTAssertTrue(check.heard(PresenceHeartbeat(node: "a", epoch: "2", seq: 0), now: 9000), "heard again: read back again")
        check.heardStamped(from: "a")
        XCTAssertFalse(check.takesUnstamped(from: "a"), "a stamped notice: it publishes per user")
        XCTAssertTrue(check.heard(PresenceHeartbeat(node: "a", epoch: "2", seq: 1), now: 9500))
        XCTAssertFalse(check.heard(PresenceHeartbeat(node: "a", epoch: "3", seq: 0, noticesPerUser: true), now: 9600))
        XCTAssertFalse(check.takesUnstamped(from: "a"), "its heartbeat says per user")

        let whole = NoticeModeCheck(publishesPerUser: true, readsEveryNotice: true, logger: Logger(label: "test"),
                                    metrics: RecordingMetrics())
        XCTAssertFalse(whole.heard(PresenceHeartbeat(node: "a", epoch: "1", seq: 0), now: 0), "a bus reading hw.changes needs nothing")
    }
}
