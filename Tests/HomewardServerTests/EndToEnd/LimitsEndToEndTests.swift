import HomewardProtocol
import XCTest

/// Keepalive, the idle timeout, and the per-account limits that answer `rate_limited`.
final class LimitsEndToEndTests: EndToEndTestCase {
    func testRelayPingsAndKeepsAnsweringClientsOpen() async throws {
        let relay = try await startRelay {
            $0.limits.pingInterval = 0.2
            $0.limits.idleTimeout = 0.6
        }
        let alice = try await relay.user("alice")
        // Six pings span more than the idle timeout; the pongs keep the connection alive.
        try await alice.client.waitForPings(6)
        try await alice.client.ok("friend.list")
        XCTAssertTrue(alice.client.isActive)
    }

    func testSilentConnectionIsClosedAfterTheIdleTimeout() async throws {
        let relay = try await startRelay {
            $0.limits.pingInterval = 0.2
            $0.limits.idleTimeout = 0.6
        }
        let client = try await relay.connect(label: "silent", answerPings: false)
        try await client.ok("register", ["username": .string(TestRelay.uniqueUsername("silent")), "password": "long enough pw"])
        // It never answers pings and sends nothing else: the relay must close it.
        _ = try await client.closeCode(timeout: 10)
        try await client.waitUntilClosed()
    }

    func testConnectionsPerUserAreLimited() async throws {
        let relay = try await startRelay { $0.relayLimits.maxConnectionsPerUser = 2 }
        let alice = try await relay.user("alice")
        _ = try await relay.device(of: alice)
        let third = try await relay.connect(label: "third")
        let code = try await third.failure("hello", ["token": .string(alice.token)])
        XCTAssertEqual(code, "rate_limited")
        // A password login is not limited: the connection that signed in first makes room.
        try await third.ok("login", ["username": .string(alice.username), "password": .string(alice.password)])
        let closed = try await alice.client.closeCode()
        XCTAssertEqual(closed, 1008)
        // Others are not affected.
        let bob = try await relay.user("bob")
        try await bob.client.ok("friend.list")
    }

    func testRepeatedFailedLoginsAreThrottled() async throws {
        let relay = try await startRelay { $0.relayLimits.loginFailuresPerUsername = 2 }
        let alice = try await relay.user("alice")
        let bob = try await relay.user("bob")
        let client = try await relay.connect(label: "guesser")
        for _ in 0..<2 {
            let code = try await client.failure("login", ["username": .string(alice.username), "password": "wrong guess!"])
            XCTAssertEqual(code, "unauthenticated")
        }
        let throttled = try await client.failure("login", ["username": .string(alice.username), "password": .string(alice.password)])
        XCTAssertEqual(throttled, "rate_limited", "once throttled, even the right password waits")
        // Another account is not throttled, and alice's token still works.
        let other = try await relay.connect(label: "bob-login")
        try await other.ok("login", ["username": .string(bob.username), "password": .string(bob.password)])
        let phone = try await relay.connect(label: "alice-hello")
        try await phone.ok("hello", ["token": .string(alice.token)])
    }
}
