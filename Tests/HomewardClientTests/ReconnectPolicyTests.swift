import HomewardClient
import XCTest

final class ReconnectPolicyTests: XCTestCase {
    func testDelaysGrowExponentiallyUpToTheCap() {
        let policy = ReconnectPolicy(initialDelay: .milliseconds(250), maximumDelay: .seconds(30), multiplier: 2, jitter: 0.5)
        let bases = (0..<10).map { policy.baseDelay(forAttempt: $0).seconds }
        XCTAssertEqual(bases, [0.25, 0.5, 1, 2, 4, 8, 16, 30, 30, 30])
        XCTAssertEqual(policy.baseDelay(forAttempt: 10_000).seconds, 30)
    }

    func testJitterStaysWithinItsFraction() {
        let policy = ReconnectPolicy(initialDelay: .seconds(1), maximumDelay: .seconds(8), jitter: 0.5)
        XCTAssertEqual(policy.delay(forAttempt: 2, unit: 0).seconds, 4, accuracy: 1e-9)
        XCTAssertEqual(policy.delay(forAttempt: 2, unit: 1).seconds, 2, accuracy: 1e-9)
        for attempt in 0..<12 {
            let delay = policy.delay(forAttempt: attempt).seconds
            let base = policy.baseDelay(forAttempt: attempt).seconds
            XCTAssertGreaterThanOrEqual(delay, base * 0.5 - 1e-9)
            XCTAssertLessThanOrEqual(delay, base + 1e-9)
        }
    }
}

final class RelayEndpointTests: XCTestCase {
    func testParsesRelayURLs() throws {
        let standard = try RelayEndpoint(url: "wss://127.0.0.1:8443/v1/ws")
        XCTAssertEqual(standard, RelayEndpoint(host: "127.0.0.1", port: 8443, path: "/v1/ws", usesTLS: true))
        XCTAssertTrue(standard.hostIsIPAddress)
        let named = try RelayEndpoint(url: "wss://relay.example.org/v1/ws")
        XCTAssertEqual(named.port, 443)
        XCTAssertFalse(named.hostIsIPAddress)
        let v6 = try RelayEndpoint(url: "wss://[::1]:9000/v1/ws")
        XCTAssertEqual(v6.host, "::1")
        XCTAssertEqual(v6.url, "wss://[::1]:9000/v1/ws")
        XCTAssertThrowsError(try RelayEndpoint(url: "https://x/v1/ws"))
        XCTAssertThrowsError(try RelayEndpoint(url: "wss://x:99999/v1/ws"))
        XCTAssertThrowsError(try RelayEndpoint(url: "relay"))
    }
}
