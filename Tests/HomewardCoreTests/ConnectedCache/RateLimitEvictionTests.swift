import HomewardCore
import HomewardCoreTestSupport
import HomewardProtocol
import XCTest

/// A long-running relay does not keep the rate limits' entries of everyone who ever signed in or tried to: once their
/// windows have passed, a sweep leaves none (`Relay.forgetExpiredRateLimits`); and no sweep forgets a failure that is
/// still inside its window.
final class RateLimitEvictionTests: XCTestCase {
    private let limits = RelayLimits()

    private func harness() async throws -> SafetyHarness {
        try await SafetyHarness(users: ["alice", "bob"], friends: [("alice", "bob")], cache: .connected)
    }

    /// Serves `request` from a new connection at `peer`; signs it out again if it signed in.
    private func serveOnce(_ harness: SafetyHarness, _ request: Request, peer: String) async {
        let sink = RecordingSink(peer)
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<RelayReply, RelayError>, Never>) in
            harness.relay.serve(request, auth: nil, peer: peer, sink: sink) { continuation.resume(returning: $0) }
        }
        if case .success(let reply) = result, case .authenticated(let auth) = reply.auth {
            harness.relay.disconnect(auth.username, sink: sink)
        }
        await harness.relay.drain()
    }

    func testTheLimitsHoldNoEntriesForDepartedUsersOnceTheirWindowsHavePassed() async throws {
        let harness = try await harness()
        let visitors = 30
        for index in 0..<visitors {
            let peer = "10.0.0.\(index)"
            await serveOnce(harness, .login(username: "ghost\(index)", password: "wrong password"), peer: peer)
            await serveOnce(harness, .hello(token: "no-such-token-\(index)"), peer: peer)
            await serveOnce(harness, .watch(token: "no-such-link-\(index)"), peer: peer)
            await serveOnce(harness, .register(username: "newcomer\(index)", password: "correct horse", name: nil), peer: peer)
        }
        let alice = try await harness.connect("alice")
        _ = try await harness.ok(.userSearch(query: "bob"), as: alice.1, sink: alice.0)
        _ = try await harness.ok(.msgSend(to: "bob", text: "on my way"), as: alice.1, sink: alice.0)
        await harness.disconnect(alice.1, alice.0)
        let held = await harness.relay.rateLimitedKeys
        // Failed logins by username and by address, failed hellos and watches, registrations; alice's search and message.
        XCTAssertEqual(held, visitors * 5 + 2)

        let longest = [limits.loginFailureWindow, limits.registrationWindow, limits.watchFailureWindow,
                       RelayState.searchWindow, FriendsMapLimits.messageWindow].max()!
        harness.clock.advance(by: longest - 1)
        await harness.relay.evictIdleResidents()
        let registrationsLeft = await harness.relay.rateLimitedKeys
        XCTAssertEqual(registrationsLeft, visitors, "only the registrations' window, the longest, has not passed")
        harness.clock.advance(by: 1)
        await harness.relay.evictIdleResidents()
        let left = await harness.relay.rateLimitedKeys
        XCTAssertEqual(left, 0, "every window has passed: nothing of the departed users is held")
    }

    func testASweepKeepsTheFailuresStillInsideTheWindowAndTheLimitHolds() async throws {
        let harness = try await harness()
        let peer = "10.0.0.1"
        for _ in 0..<limits.loginFailuresPerUsername {
            await serveOnce(harness, .login(username: "alice", password: "wrong password"), peer: peer)
        }
        harness.clock.advance(by: limits.loginFailureWindow - 1)
        await harness.relay.evictIdleResidents()
        let held = await harness.relay.rateLimitedKeys
        XCTAssertEqual(held, 2, "alice's failures and the address's stay within the window")
        let sink = RecordingSink("alice")
        let limited = await withCheckedContinuation { (continuation: CheckedContinuation<Result<RelayReply, RelayError>, Never>) in
            harness.relay.serve(.login(username: "alice", password: "x"), auth: nil, peer: "10.0.0.2", sink: sink) {
                continuation.resume(returning: $0)
            }
        }
        guard case .failure(.rateLimited) = limited else { return XCTFail("expected rate_limited, got \(limited)") }
        harness.clock.advance(by: 1)
        await harness.relay.evictIdleResidents()
        let after = await harness.relay.rateLimitedKeys
        XCTAssertEqual(after, 0, "the window has passed")
    }
}
