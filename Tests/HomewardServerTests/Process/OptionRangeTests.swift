import Foundation
import HomewardTestSupport
import XCTest

/// Values an option's type accepts but the relay cannot use (infinite or enormous seconds, more event loops than
/// descriptors allow, no connection per user) stop the real executable with a one-line usage error, exit 64,
/// instead of a trap (exit 132) while it starts or at the first connection.
final class OptionRangeTests: XCTestCase {
    func testOutOfRangeValuesStopTheRelayWithAUsageErrorNotATrap() async throws {
        let cases: [([String], [String: String], String)] = [
            (["--lost-contact-grace", "inf"], [:], "lost-contact-grace must be more than 0 and at most 604800 seconds"),
            ([], ["HOMEWARD_LOST_CONTACT_GRACE": "nan"], "lost-contact-grace must be more than 0 and at most 604800 seconds"),
            (["--alarm-repeat-interval", "1e300"], [:], "alarm-repeat-interval must be more than 0 and at most 604800 seconds"),
            (["--ping-interval", "1e300"], [:], "ping-interval must be more than 0 and at most 604800 seconds"),
            (["--auth-timeout", "inf"], [:], "auth-timeout must be more than 0 and at most 604800 seconds"),
            (["--idle-timeout", "0"], [:], "idle-timeout must be more than 0 and at most 604800 seconds"),
            (["--rate-limit", "inf"], [:], "rate-limit and control-frame-rate must be positive numbers"),
            (["--threads", "100000"], [:], "threads must be at least 1 and at most 256"),
            (["--max-connections-per-user", "0"], [:], "max-connections-per-user must be at least 1"),
        ]
        for (arguments, environment, message) in cases {
            // Not runRelayToEnd: a relay that takes such a value starts and runs (until its first connection traps),
            // which this turns into a failure after a while instead of a hang.
            let (status, log) = try await runRelayUntilItExits(arguments, environment: environment, within: 30)
            let output = (await log.allLines).joined(separator: "\n")
            XCTAssertEqual(status, 64, "\(arguments) \(environment): \(output)")
            XCTAssertTrue(output.contains("Error: \(message)"), "\(arguments) \(environment): \(output)")
        }
    }
}
