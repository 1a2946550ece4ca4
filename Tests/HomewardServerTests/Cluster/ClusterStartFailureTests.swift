import Foundation
import HomewardTestSupport
import XCTest

/// A relay of a cluster that cannot start (its port is taken) stops in order with its error: PostgreSQL's pool, the
/// bus and the event loops close after the relay, the push worker and the timer lease that use them.
final class ClusterStartFailureTests: ClusterTestCase {
    func testAClusterRelayThatCannotListenStopsInOrderWithItsError() async throws {
        let cluster = try await startCluster()
        let occupant = try await RelayProcess.start()
        addTeardownBlock { occupant.stop() }
        let (status, log) = try await runRelayUntilItExits(cluster.arguments(node: "late")
            + ["--port", "\(try occupant.port)", "--metrics-listen", "127.0.0.1:0"])
        let lines = await log.allLines
        XCTAssertEqual(status, 1, lines.joined(separator: "\n"))
        XCTAssertTrue(lines.contains { $0.contains("already in use") }, "the reason: \(lines)")
        XCTAssertEqual(lines.filter { $0.contains("poolShutdown") || $0.contains("clientClosedConnection") }, [],
                       "no store call meets a closed pool")
        let problems = await log.lines(atLeast: .warning)
        XCTAssertEqual(problems, [], "no task scheduled on a closed event loop, no other complaint")
    }
}
