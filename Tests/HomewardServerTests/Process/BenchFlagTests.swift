import Foundation
import HomewardTestSupport
import XCTest

/// The benchmark tools refuse values they cannot run with, before they start a broker or fill a store: a one-line
/// usage error and exit 64, not a trap, a hang or a report of nothing.
final class BenchFlagTests: XCTestCase {
    /// A tool built beside `homeward-relay`.
    private func tool(_ name: String) throws -> URL {
        try RelayProcess.executable().deletingLastPathComponent().appendingPathComponent(name)
    }

    private func expectUsageError(_ name: String, _ arguments: [String], _ message: String) throws {
        let (status, output) = try runToEnd(try tool(name), arguments)
        XCTAssertEqual(status, 64, "\(name) \(arguments): \(output)")
        XCTAssertTrue(output.contains("Error: \(message)"), "\(name) \(arguments): \(output)")
    }

    func testHomewardBenchRefusesWhatItCannotRun() throws {
        try expectUsageError("homeward-bench", ["fanout", "--broker", "homeward,foo"],
                             "unknown broker foo; use homeward, homeward-openssl, homeward-nio-ssl, homeward-pg, homeward-cluster, nats, mosquitto or all")
        try expectUsageError("homeward-bench", ["fanout", "--broker", "homeward", "--threads", "0"], "--threads must be 1 to 256")
        try expectUsageError("homeward-bench", ["idle", "--broker", "homeward", "--counts", "0"], "--counts must list positive numbers")
        try expectUsageError("homeward-bench", ["codec", "--rounds", "0"], "--rounds must be more than 0")
        // The smoke runs one relay on SQLite: a broker it would ignore is refused.
        try expectUsageError("homeward-bench", ["smoke", "--broker", "nats"],
                             "smoke runs Homeward only; leave out --broker (or give --broker homeward), not --broker nats")
    }

    func testHomewardCacheBenchRefusesWhatItCannotRun() throws {
        try expectUsageError("homeward-cache-bench", ["--users", "2", "--friendships", "1", "--reloads", "0"],
                             "--reloads, --notices and --rounds must be at least 1")
        try expectUsageError("homeward-cache-bench", ["--users", "2", "--friendships", "1", "--start-relay", "/nonexistent/homeward-relay"],
                             "--start-relay: /nonexistent/homeward-relay is not an executable")
        // More friendships than pairs of users: the city would draw pairs for ever.
        try expectUsageError("homeward-cache-bench", ["--users", "3", "--friendships", "4"], "--friendships must be 0 to 3, the pairs 3 users make")
    }
}
