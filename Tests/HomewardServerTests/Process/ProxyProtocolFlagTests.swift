import Foundation
import XCTest

/// `--proxy-protocol-from` on the real executable: what is not a list of address blocks stops the relay
/// at start-up, from the flag and from HOMEWARD_PROXY_PROTOCOL_FROM alike, and `--help` explains it.
final class ProxyProtocolFlagTests: XCTestCase {
    func testWhatIsNotAListOfAddressBlocksIsAStartupError() throws {
        let cases: [([String], [String: String], String)] = [
            (["--proxy-protocol-from", "10.0.0.1/8"], [:], "bits set beyond the /8 prefix"),
            (["--proxy-protocol-from", "haproxy.internal"], [:], "not an IPv4 or IPv6 address"),
            (["--proxy-protocol-from", "10.0.0.11,"], [:], "an empty item"),
            ([], ["HOMEWARD_PROXY_PROTOCOL_FROM": "10.0.0.0/33"], "prefix length must be 0 to 32"),
        ]
        for (arguments, environment, expected) in cases {
            let (status, output) = try runRelayToEnd(arguments, environment: environment)
            XCTAssertNotEqual(status, 0, "\(arguments) \(environment)")
            XCTAssertTrue(output.contains("--proxy-protocol-from"), "\(arguments) \(environment): \(output)")
            XCTAssertTrue(output.contains(expected), "\(arguments) \(environment): \(output)")
        }
    }

    func testHelpExplainsWhoMaySendTheHeader() throws {
        let (status, output) = try runRelayToEnd(["--help"])
        XCTAssertEqual(status, 0)
        XCTAssertTrue(output.contains("--proxy-protocol-from <cidr[,cidr...]>"), output)
        XCTAssertTrue(output.contains("PROXY protocol"), output)
    }
}
