import Foundation
import HomewardCore
import HomewardCoreTestSupport
@testable import HomewardServer
import HomewardTestSupport
import ServiceLifecycle
import XCTest

/// A relay whose start fails or is stopped halfway stops its services in order (`GroupMember`): it ends with the
/// reason, nothing waits on a closed event loop, and a stop asked for during the load does not wait for the load.
final class StartStopOrderTests: XCTestCase {
    func testAStoreThatCannotLoadStopsTheRelayWithItsErrorAndQuietly() async throws {
        let log = LogRecorder()
        let server = RelayServer(configuration: try configuration(), logger: log.logger, wrapStore: { store in
            let failing = InstrumentedStore(store)
            failing.setDown(true)
            return failing
        })
        do {
            // Cancelling the group instead would close the event loops under the metrics listener and hang the stop.
            let running = try await withTimeout(60, "the relay to give up") { try await server.start() }
            await running.shutdown()
            XCTFail("a relay whose store cannot be read started")
        } catch is InstrumentedStore.InjectedFailure {
            // The load's own error, not a waiting service's cancellation.
        }
        // swift-service-lifecycle's own account (debug): it shut the group down service after service.
        XCTAssertEqual(log.lines(at: .trace).filter { $0.contains("Cancelling") }, [],
                       "the group stops its services one after another, it does not cancel them all at once")
        XCTAssertEqual(log.lines(at: .warning), [], "the services that had started stop in order, without complaint")
        XCTAssertFalse(log.lines(at: .info).contains { $0.contains("homeward relay listening") })
    }

    func testAGracefulShutdownDuringTheLoadStopsTheRelayWithoutWaitingForIt() async throws {
        let log = LogRecorder()
        let gate = LoadGate()
        let server = RelayServer(configuration: try configuration(), logger: log.logger,
                                 wrapStore: { InstrumentedStore($0, holdingLoadsAt: gate) })
        // What `run` does with SIGTERM, by hand: the group's graceful shutdown once the load has begun.
        let group = GroupMember.group(try await server.makeServices().services, logger: log.logger)
        let running = Task { try await group.run() }
        await gate.loadIsHeld()
        await group.triggerGracefulShutdown()
        // The load never ends by itself: only stopping it ends the group.
        try await withTimeout(60, "the relay to stop during its load") { try await running.value }
        XCTAssertTrue(log.lines(at: .info).contains { $0.contains("stopped before the relay had loaded") }, "\(log.lines(at: .info))")
        XCTAssertFalse(log.lines(at: .info).contains { $0.contains("homeward relay listening") }, "a relay asked to stop never listens")
        XCTAssertEqual(log.lines(at: .warning), [])
    }

    /// A relay on 127.0.0.1 with a metrics listener (a service that starts before the relay has loaded), in a
    /// temporary directory removed when the test ends.
    private func configuration() throws -> RelayConfiguration {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("homeward-order-\(UUID().uuidString)").path
        addTeardownBlock { try? FileManager.default.removeItem(atPath: directory) }
        var config = RelayConfiguration()
        config.host = "127.0.0.1"
        config.port = 0
        config.eventLoopThreads = 2
        config.passwordHasher = .forTests
        config.metricsListen = ListenAddress(host: "127.0.0.1", port: 0)
        config.dataDirectory = directory
        return config
    }
}
