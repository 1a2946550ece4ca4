import Foundation
import HomewardTestSupport
import XCTest

/// `--cache` / `HOMEWARD_CACHE` on the real executable: the default stays a whole cache, the start says which mode
/// runs and what it loaded, and a mode the relay does not know stops it with the choices.
final class CacheFlagTests: XCTestCase {
    private func startLine(_ arguments: [String], _ environment: [String: String] = [:]) async throws -> String {
        let relay = try await RelayProcess.start(arguments, environment: environment)
        relay.stop()
        let lines = try await relay.log.allLines
        return try XCTUnwrap(lines.first { $0.contains("cache loaded") }, "\(lines)")
    }

    func testTheDefaultIsAWholeCacheAndTheVariableChoosesConnected() async throws {
        let byDefault = try await startLine([])
        XCTAssertTrue(byDefault.contains("cache=whole"), byDefault)
        let connected = try await startLine([], ["HOMEWARD_CACHE": "connected"])
        XCTAssertTrue(connected.contains("cache=connected"), connected)
        let flag = try await startLine(["--cache", "whole"], ["HOMEWARD_CACHE": "connected"])
        XCTAssertTrue(flag.contains("cache=whole"), flag)
    }

    func testAModeTheRelayDoesNotKnowStopsItNamingTheChoices() throws {
        let (status, output) = try runRelayToEnd(["--cache", "lazy"])
        XCTAssertNotEqual(status, 0)
        XCTAssertTrue(output.contains("cache must be whole or connected, not 'lazy'"), output)
    }

    func testHelpShowsTheModesAndTheDefault() throws {
        let (status, output) = try runRelayToEnd(["--help"])
        XCTAssertEqual(status, 0)
        let text = output.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        XCTAssertTrue(text.contains("--cache <whole|connected>"), output)
        XCTAssertTrue(text.contains("[env: HOMEWARD_CACHE] [default: whole]"), output)
    }
}
