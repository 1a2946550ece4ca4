import Foundation
import HomewardTestSupport
import XCTest

/// The push flags on the real executable: values the relay cannot use stop it at start-up with a
/// message that says what is wrong; `--help` explains them.
final class PushFlagTests: XCTestCase {
    private func runRelay(_ arguments: [String], environment: [String: String] = [:]) throws -> (status: Int32, output: String) {
        try runToEnd(RelayProcess.executable(),
                     ["--host", "127.0.0.1", "--port", "0", "--data-dir", "/nonexistent/homeward-push-flag"] + arguments,
                     environment: ProcessInfo.processInfo.environment.merging(environment) { $1 })
    }

    func testBadPushValuesAreStartupErrors() throws {
        let cases: [([String], [String: String], String)] = [
            (["--vapid-subject", "ops@example.org"], [:], "must start with mailto: or https:"),
            ([], ["HOMEWARD_VAPID_SUBJECT": "mailto:"], "mailto: VAPID subject needs an address"),
            (["--webhook-url", "https://desk.example.org/hook"], [:], "--webhook-url needs --webhook-secret"),
            (["--webhook-secret", "s3cret"], [:], "--webhook-secret without --webhook-url"),
            (["--webhook-url", "desk.example.org", "--webhook-secret", "s"], [:], "webhook-url must be an http or https URL"),
            (["--max-push-subscriptions", "0"], [:], "max-push-subscriptions must be at least 1"),
            ([], ["HOMEWARD_PUSH_ALLOW_HTTP": "maybe"], "HOMEWARD_PUSH_ALLOW_HTTP='maybe' is not a valid value"),
        ]
        for (arguments, environment, expected) in cases {
            let (status, output) = try runRelay(arguments, environment: environment)
            XCTAssertNotEqual(status, 0, "\(arguments) \(environment)")
            XCTAssertTrue(output.contains(expected), "\(arguments) \(environment): \(output)")
        }
    }

    func testHelpExplainsThePushFlags() throws {
        let (status, output) = try runRelay(["--help"])
        XCTAssertEqual(status, 0)
        for flag in ["--vapid-key <pem>", "--vapid-subject <uri>", "--push-allow-http", "--push-allow-private",
                     "--max-push-subscriptions", "--webhook-url <url>", "--webhook-secret"] {
            XCTAssertTrue(output.contains(flag), "\(flag) in \(output)")
        }
    }
}
