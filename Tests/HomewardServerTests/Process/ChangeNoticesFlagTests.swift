import Foundation
import HomewardTestSupport
import XCTest

/// `--change-notices` / `HOMEWARD_CHANGE_NOTICES` on the real executable: a value the relay does not know stops it with
/// the choices, and `--help` shows them with the default (every notice on one subject).
final class ChangeNoticesFlagTests: XCTestCase {
    func testAValueTheRelayDoesNotKnowStopsItNamingTheChoices() throws {
        let (status, output) = try runRelayToEnd(["--change-notices", "some"])
        XCTAssertNotEqual(status, 0)
        XCTAssertTrue(output.contains("change-notices must be all or per-user, not 'some'"), output)
    }

    func testHelpShowsTheChoicesAndTheDefault() throws {
        let (status, output) = try runRelayToEnd(["--help"])
        XCTAssertEqual(status, 0)
        let text = output.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        XCTAssertTrue(text.contains("--change-notices <all|per-user>"), output)
        XCTAssertTrue(text.contains("[env: HOMEWARD_CHANGE_NOTICES] [default: all]"), output)
    }
}
