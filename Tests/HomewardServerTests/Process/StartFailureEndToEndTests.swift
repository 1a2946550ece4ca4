import Foundation
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
}
