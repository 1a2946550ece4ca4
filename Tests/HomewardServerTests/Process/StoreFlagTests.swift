import Foundation
import HomewardTestSupport
import XCTest

/// `--store` and HOMEWARD_STORE on the real executable: a value the relay cannot use stops it at start-up
/// with a message that says what is wrong, before it listens or touches the data directory.
final class StoreFlagTests: XCTestCase {
    private func runRelay(_ arguments: [String], environment: [String: String] = [:]) throws -> (status: Int32, output: String) {
        try runToEnd(RelayProcess.executable(),
                     ["--host", "127.0.0.1", "--port", "0", "--data-dir", "/nonexistent/homeward-store-flag"] + arguments,
                     environment: ProcessInfo.processInfo.environment.merging(environment) { $1 })
    }

    func testBadStoreValuesAreStartupErrors() throws {
        let cases: [([String], [String: String], String)] = [
            (["--store", "mysql://u@db/relay"], [:], "unknown store 'mysql://u@db/relay': use sqlite or postgres://"),
            (["--store", "postgres://db:5432/relay"], [:], "it names no user"),
            (["--store", "postgres://relay:hunter2@db:5432/"], [:], "it names no database"),
            ([], ["HOMEWARD_STORE": "postgres://relay@db/relay?sslmode=sometimes"], "sslmode must be disable, prefer, require"),
            (["--store", "sqlite", "--store-timeout", "0"], [:], "store-timeout must be more than 0"),
        ]
        for (arguments, environment, expected) in cases {
            let (status, output) = try runRelay(arguments, environment: environment)
            XCTAssertNotEqual(status, 0, "\(arguments) \(environment)")
            XCTAssertTrue(output.contains(expected), "\(arguments) \(environment): \(output)")
            XCTAssertFalse(output.contains("hunter2"), "the password is not echoed: \(output)")
        }
    }

    func testHelpExplainsTheStore() throws {
        let (status, output) = try runRelay(["--help"])
        XCTAssertEqual(status, 0)
        XCTAssertTrue(output.contains("--store <url>"), output)
        XCTAssertTrue(output.contains("postgres://USER[:PASS]@HOST[:PORT]/DB"), output)
    }
}
