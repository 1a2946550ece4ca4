import Foundation
import HomewardPostgresTestSupport
import HomewardTestSupport
import XCTest

/// A relay that cannot start says why and exits 1: the services that had started stop in order (`GroupMember`)
/// rather than all at once, so nothing is left waiting on a closed event loop (which hung such a relay for good,
/// deaf to SIGTERM).
final class StartFailureEndToEndTests: XCTestCase {
    func testAPortInUseStopsTheRelayWithItsErrorAndNothingOnAClosedEventLoop() async throws {
        let occupant = try await RelayProcess.start()
        addTeardownBlock { occupant.stop() }
        let (status, log) = try await runRelayUntilItExits(["--port", "\(try occupant.port)", "--metrics-listen", "127.0.0.1:0"])
        let lines = await log.allLines
        XCTAssertEqual(status, 1, lines.joined(separator: "\n"))
        XCTAssertTrue(lines.contains { $0.contains("already in use") }, "the reason: \(lines)")
        let problems = await log.lines(atLeast: .warning)
        XCTAssertEqual(problems, [], "no task scheduled on a closed event loop, no other complaint")
    }

    /// The relay's load, interrupted by the stop the metrics listener's failure asks for, is no error of its own.
    func testAMetricsPortInUseIsTheOnlyErrorTheOperatorSees() async throws {
        let occupant = try await RelayProcess.start()
        addTeardownBlock { occupant.stop() }
        let (status, log) = try await runRelayUntilItExits(["--port", "0", "--metrics-listen", "127.0.0.1:\(try occupant.port)"])
        let lines = await log.allLines
        XCTAssertEqual(status, 1, lines.joined(separator: "\n"))
        let errors = lines.filter { $0.localizedCaseInsensitiveContains("error") }
        XCTAssertEqual(errors.count, 1, "only the port's error: \(errors)")
        XCTAssertTrue(errors.first?.contains("cannot listen on 127.0.0.1:") == true
                      && errors.first?.contains("already in use") == true, "\(errors)")
    }

    /// A PostgreSQL server that cannot be reached is one line naming it and why, not the driver's description.
    func testAPostgreSQLServerThatRefusesSaysSoInOneLine() async throws {
        let closedPort = try PostgresServer.freePort()
        let (status, log) = try await runRelayUntilItExits(["--port", "0", "--store", "postgres://hw:secret@127.0.0.1:\(closedPort)/hw"])
        let lines = await log.allLines
        XCTAssertEqual(status, 1, lines.joined(separator: "\n"))
        let errors = lines.filter { $0.hasPrefix("Error: ") }
        XCTAssertEqual(errors, ["Error: cannot connect to PostgreSQL at 127.0.0.1:\(closedPort) (--store): "
                                    + "connection refused (is PostgreSQL running and listening on that port?)"], "\(lines)")
    }
}
