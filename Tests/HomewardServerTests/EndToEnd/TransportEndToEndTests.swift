import HomewardProtocol
import HomewardServer
import HomewardTestSupport
import NIOHTTP1
import XCTest

/// The WebSocket handshake, the subprotocol, TLS trust, and plain HTTP on the same port.
final class TransportEndToEndTests: EndToEndTestCase {
    func testSubprotocolIsSelectedWhenOffered() async throws {
        let relay = try await startRelay()
        let offered = try await relay.connect(subprotocol: "homeward.v1")
        XCTAssertEqual(offered.selectedSubprotocol, "homeward.v1")
        try await offered.ok("ping")
        let amongOthers = try await relay.connect(subprotocol: "chat, homeward.v1")
        XCTAssertEqual(amongOthers.selectedSubprotocol, "homeward.v1")
        let none = try await relay.connect()
        XCTAssertNil(none.selectedSubprotocol, "nothing offered, nothing selected")
        try await none.ok("ping")
        let other = try await relay.connect(subprotocol: "chat")
        XCTAssertNil(other.selectedSubprotocol, "the relay never selects a protocol it was not offered")
    }

    func testQueryStringOnTheUpgradePathIsAccepted() async throws {
        let relay = try await startRelay()
        let client = try await relay.connect(path: "/v1/ws?client=test")
        try await client.ok("ping")
    }

    func testUpgradeOnAnotherPathIsRefused() async throws {
        let relay = try await startRelay()
        do {
            let client = try await relay.connect(path: "/v2/ws")
            XCTFail("upgraded on /v2/ws: \(client)")
        } catch let failure as TestFailure {
            XCTAssertTrue(failure.description.contains("refused"), failure.description)
        }
    }

    func testClientThatDoesNotTrustTheCertificateCannotConnect() async throws {
        let relay = try await startRelay()
        let other = try await startRelay()
        // The other relay's CA is a different, freshly made CA.
        do {
            let client = try await TestClient.connect(port: relay.port, caPath: other.caPath, label: "untrusting")
            XCTFail("connected while trusting the wrong CA: \(client)")
        } catch {
            // Expected: the TLS handshake fails.
        }
    }

    func testHealthz() async throws {
        let relay = try await startRelay()
        let response = try await relay.http("/healthz")
        XCTAssertEqual(response.status, .ok)
    }

    func testMetricsArePrometheusTextOnTheMetricsListenerAndTheMainPortShowsNoActivity() async throws {
        let relay = try await startRelay { $0.metricsListen = ListenAddress(host: "127.0.0.1", port: 0) }
        let alice = try await relay.user("alice")
        try await alice.client.ok("friend.list")
        let metricsPort = try XCTUnwrap(try relay.running.metricsPort)
        let response = try await httpsRequest(port: metricsPort, caPath: nil, path: "/metrics")
        XCTAssertEqual(response.status, .ok)
        XCTAssertTrue(response.headers.first(name: "Content-Type")?.hasPrefix("text/plain") ?? false,
                      "\(response.headers)")
        XCTAssertTrue(response.body.contains("# TYPE"), response.body)
        XCTAssertTrue(response.body.contains("homeward_alarms_raised_total"), response.body)
        XCTAssertTrue(response.body.contains("homeward_alarms_pending"), response.body)

        // The public port: Prometheus text saying the relay is up, nothing about its users.
        let mainPort = try await relay.http("/metrics")
        XCTAssertEqual(mainPort.status, .ok)
        XCTAssertTrue(mainPort.body.contains("homeward_up 1"), mainPort.body)
        XCTAssertFalse(mainPort.body.contains("homeward_alarms"), mainPort.body)
        XCTAssertFalse(mainPort.body.contains("homeward_connections"), mainPort.body)
        let health = try await relay.http("/healthz")
        XCTAssertEqual(health.status, .ok)
    }

    func testWithATokenTheMainPortServesTheMetricsToItAndTheListenerToNobodyElse() async throws {
        let token = "a-token-of-32-characters-or-so.."
        let relay = try await startRelay {
            $0.metricsListen = ListenAddress(host: "127.0.0.1", port: 0)
            $0.metricsToken = token
        }
        let full = try await httpsRequest(port: try relay.port, caPath: try relay.caPath, path: "/metrics",
                                          headers: [("Authorization", "Bearer \(token)")])
        XCTAssertTrue(full.body.contains("homeward_alarms_pending"), full.body)
        let wrong = try await httpsRequest(port: try relay.port, caPath: try relay.caPath, path: "/metrics",
                                           headers: [("Authorization", "Bearer \(token)x")])
        XCTAssertEqual(wrong.status, .unauthorized)
        let metricsPort = try XCTUnwrap(try relay.running.metricsPort)
        let anonymous = try await httpsRequest(port: metricsPort, caPath: nil, path: "/metrics")
        XCTAssertEqual(anonymous.status, .unauthorized)
        let granted = try await httpsRequest(port: metricsPort, caPath: nil, path: "/metrics",
                                             headers: [("Authorization", "Bearer \(token)")])
        XCTAssertTrue(granted.body.contains("homeward_alarms_raised_total"), granted.body)
    }

    func testPlainGetOfTheWebSocketPathIs426() async throws {
        let relay = try await startRelay()
        let response = try await relay.http("/v1/ws")
        XCTAssertEqual(response.status, .upgradeRequired)
    }

    func testUnknownPathIs404() async throws {
        let relay = try await startRelay()
        for path in ["/", "/nope", "/v1", "/healthz/extra", "/v1/ws/more"] {
            let response = try await relay.http(path)
            XCTAssertEqual(response.status, .notFound, path)
        }
        let post = try await relay.http("/nope", method: .POST)
        XCTAssertEqual(post.status, .notFound)
    }

    func testManyConcurrentClients() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        let clients = try await withThrowingTaskGroup(of: TestClient.self) { group in
            for index in 0..<12 {
                group.addTask {
                    let client = try await relay.connect(label: "anon-\(index)")
                    try await client.ok("ping")
                    return client
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        XCTAssertEqual(clients.count, 12)
        for client in clients { try await client.ok("ping") }
        try await alice.client.ok("friend.list")
    }
}
