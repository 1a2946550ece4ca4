import Foundation
import HomewardTestSupport
import XCTest

/// `--bus` and `--node-id` (and their HOMEWARD_ variables) on the real executable: a value the relay
/// cannot use stops it at start-up with a message that says what is wrong, before it listens.
final class ClusterFlagTests: XCTestCase {
    private func runRelay(_ arguments: [String], environment: [String: String] = [:]) throws -> (status: Int32, output: String) {
        try runToEnd(RelayProcess.executable(),
                     ["--host", "127.0.0.1", "--port", "0", "--data-dir", "/nonexistent/homeward-cluster-flag"] + arguments,
                     environment: ProcessInfo.processInfo.environment.merging(environment) { $1 })
    }

    func testBadBusAndNodeValuesAreStartupErrors() throws {
        let postgres = ["--store", "postgres://relay@127.0.0.1:1/relay"]
        let cases: [([String], [String: String], String)] = [
            (["--bus", "kafka://broker:9092"], [:], "unknown bus 'kafka://broker:9092': use local or nats://HOST:PORT"),
            (postgres + ["--bus", "nats://"], [:], "bad bus URL 'nats://': an empty server in the list"),
            (postgres + ["--bus", "nats://a:4222,,b:4222"], [:], "an empty server in the list"),
            (postgres + ["--bus", "nats://a:99999"], [:], "'a:99999' is not HOST[:PORT]"),
            (postgres + ["--bus", "nats://a:4222,b:x"], [:], "'b:x' is not HOST[:PORT]"),
            (postgres + ["--bus", "nats://u:hunter2@a:x"], [:], "bad bus URL 'nats://u:***@a:x'"),
            ([], ["HOMEWARD_BUS": "nats:/a:4222"], "unknown bus 'nats:/a:4222'"),
            (["--bus", "nats://127.0.0.1:4222"], [:], "--bus nats://... needs --store postgres://"),
            (["--node-id", "a b"], [:], "node-id must be 1-64 characters"),
            ([], ["HOMEWARD_NODE_ID": String(repeating: "n", count: 65)], "node-id must be 1-64 characters"),
        ]
        for (arguments, environment, expected) in cases {
            let (status, output) = try runRelay(arguments, environment: environment)
            XCTAssertNotEqual(status, 0, "\(arguments) \(environment)")
            XCTAssertTrue(output.contains(expected), "\(arguments) \(environment): \(output)")
            XCTAssertFalse(output.contains("hunter2"), "the password is not echoed: \(output)")
        }
    }

    func testHelpExplainsTheBusAndTheNodeID() throws {
        let (status, output) = try runRelay(["--help"])
        XCTAssertEqual(status, 0)
        XCTAssertTrue(output.contains("--bus <url>"), output)
        XCTAssertTrue(output.contains("nats://HOST:PORT[,HOST:PORT...]"), output)
        XCTAssertTrue(output.contains("--node-id <node-id>"), output)
    }
}
