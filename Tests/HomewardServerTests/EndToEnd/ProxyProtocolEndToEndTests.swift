import HomewardProtocol
@testable import HomewardServer
import XCTest

/// A relay behind a balancer that sends PROXY headers (`--proxy-protocol-from`): every connection here
/// goes to 127.0.0.1, and only the header bytes claim the documentation addresses 192.0.2.x, as haproxy's
/// `send-proxy-v2` would for clients it forwards.
final class ProxyProtocolEndToEndTests: EndToEndTestCase {
    private func startRelayBehindBalancer(_ configure: @escaping (inout RelayConfiguration) -> Void = { _ in }) async throws -> TestRelay {
        try await startRelay { config in
            config.proxyProtocolFrom = [try! IPAddressRange(parsing: "127.0.0.1/32")]
            configure(&config)
        }
    }

    private func register(_ client: TestClient) async throws -> JSONValue {
        try await client.request("register", ["username": .string(TestRelay.uniqueUsername("proxied")), "password": "long enough pw"])
    }

    func testRegistrationLimitsCountEachClaimedClientAddressOnItsOwn() async throws {
        let relay = try await startRelayBehindBalancer { $0.relayLimits.registrationsPerAddress = 1 }
        let first = try await relay.connect(label: "192.0.2.7", preamble: ProxyHeaderBytes.v2TCP4([192, 0, 2, 7]))
        let firstReply = try await register(first)
        XCTAssertEqual(firstReply["type"], "ok", JSONWriter.string(firstReply))
        // The same client again (through a v1 header this time): its one registration this hour is used up.
        let again = try await relay.connect(label: "192.0.2.7 again", preamble: ProxyHeaderBytes.v1("PROXY TCP4 192.0.2.7 127.0.0.1 40001 8443"))
        let againReply = try await register(again)
        XCTAssertEqual(againReply["code"], "rate_limited", JSONWriter.string(againReply))
        // Another client behind the same balancer is not affected.
        let other = try await relay.connect(label: "192.0.2.8", preamble: ProxyHeaderBytes.v2TCP4([192, 0, 2, 8]))
        let otherReply = try await register(other)
        XCTAssertEqual(otherReply["type"], "ok", JSONWriter.string(otherReply))
        // A health check speaks for the balancer itself, which has a budget of its own.
        let local = try await relay.connect(label: "balancer", preamble: ProxyHeaderBytes.v2Local)
        let localReply = try await register(local)
        XCTAssertEqual(localReply["type"], "ok", JSONWriter.string(localReply))
    }

    func testUnauthenticatedConnectionsAreCountedPerClaimedAddress() async throws {
        let relay = try await startRelayBehindBalancer { $0.limits.maxUnauthenticatedPerAddress = 1 }
        _ = try await relay.connect(label: "192.0.2.7", preamble: ProxyHeaderBytes.v2TCP4([192, 0, 2, 7]))
        do {
            _ = try await relay.connect(label: "192.0.2.7 again", preamble: ProxyHeaderBytes.v2TCP4([192, 0, 2, 7], port: 40001))
            XCTFail("a second unauthenticated connection from 192.0.2.7 was accepted")
        } catch {}
        let ipv6 = try await relay.connect(label: "2001:db8::7", preamble: ProxyHeaderBytes.v2TCP6(ProxyHeaderBytes.documentationIPv6))
        try await ipv6.ok("ping")
        let slots = try relay.running.unauthenticated
        XCTAssertEqual(slots.count(for: "192.0.2.7"), 1)
        XCTAssertEqual(slots.count(for: "2001:db8::7"), 1)
        XCTAssertEqual(slots.count(for: "127.0.0.1"), 0, "the balancer's own address holds no client's slot")
    }

    func testAConnectionFromTheBalancerWithoutAHeaderIsClosed() async throws {
        let relay = try await startRelayBehindBalancer()
        do {
            _ = try await relay.connect(label: "no header")
            XCTFail("a connection from a --proxy-protocol-from address was served without a PROXY header")
        } catch {}
        // The relay itself is fine: the next proxied client is served.
        let client = try await relay.connect(preamble: ProxyHeaderBytes.v2TCP4([192, 0, 2, 7]))
        try await client.ok("ping")
    }

    func testAHeaderFromAnAddressNotListedIsNotTrusted() async throws {
        let relay = try await startRelay { $0.proxyProtocolFrom = [try! IPAddressRange(parsing: "192.0.2.0/24")] }
        do {
            _ = try await relay.connect(label: "claims 192.0.2.7", preamble: ProxyHeaderBytes.v2TCP4([192, 0, 2, 7]))
            XCTFail("a PROXY header from 127.0.0.1, which is not listed, was accepted")
        } catch {}
        let plain = try await relay.connect(label: "plain")
        try await plain.ok("ping")
        XCTAssertEqual(try relay.running.unauthenticated.count(for: "192.0.2.7"), 0, "the claim was not believed")
    }
}
