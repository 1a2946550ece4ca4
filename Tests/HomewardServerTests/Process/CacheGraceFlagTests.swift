import Foundation
import HomewardTestSupport
import XCTest

/// `--cache-grace` / `HOMEWARD_CACHE_GRACE` on the real executable: a grace out of range, from the flag or the environment,
/// stops the relay with the range before it opens anything; `--help` shows the default.
final class CacheGraceFlagTests: XCTestCase {
    func testAGraceOutOfRangeStopsTheRelayNamingTheRange() throws {
        for value in ["0", "604801", "-5"] {
            let (status, output) = try runRelayToEnd(["--cache-grace=\(value)"])
            XCTAssertNotEqual(status, 0, value)
            XCTAssertTrue(output.contains("cache-grace must be at least 1 and at most 604800 seconds"), "\(value): \(output)")
        }
        let (status, output) = try runRelayToEnd([], environment: ["HOMEWARD_CACHE_GRACE": "0"])
        XCTAssertNotEqual(status, 0)
        XCTAssertTrue(output.contains("cache-grace must be at least 1 and at most 604800 seconds"), output)
    }

    func testAGraceThatIsNotANumberIsRefused() throws {
        let (status, output) = try runRelayToEnd(["--cache-grace", "soon"])
        XCTAssertNotEqual(status, 0)
        XCTAssertTrue(output.contains("The value 'soon' is invalid for '--cache-grace"), output)
    }

    func testHelpShowsTheVariableAndTheDefault() throws {
        let (status, output) = try runRelayToEnd(["--help"])
        XCTAssertEqual(status, 0)
        let text = output.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        XCTAssertTrue(text.contains("[env: HOMEWARD_CACHE_GRACE] [default: 300]"), output)
    }
}
