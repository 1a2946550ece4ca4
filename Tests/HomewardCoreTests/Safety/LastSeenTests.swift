import HomewardCore
import HomewardCoreTestSupport
import XCTest

/// Last-seen times are stored in batches, not one commit per disconnect, and none is lost on shutdown.
final class LastSeenTests: XCTestCase {
    func testManyDisconnectsShareOneCommitAndSurviveARestart() async throws {
        let users = (0..<50).map { "walker\($0)" }
        let (harness, store) = try await SafetyHarness.instrumented(users: users, friends: [])
        var connections: [(RecordingSink, Authentication)] = []
        for user in users { connections.append(try await harness.connect(user)) }
        harness.clock.advance(by: 60_000)
        let commitsBefore = store.commits
        // As after a network blip: everyone drops at once.
        for (sink, auth) in connections { harness.relay.disconnect(auth.username, sink: sink) }
        await harness.relay.drain()
        XCTAssertEqual(store.commits - commitsBefore, 1, "50 disconnects should be stored in one transaction")
        for user in users { XCTAssertEqual(harness.relay.presence.lastSeen(user), harness.clock.now) }

        try await harness.restart()
        for user in users {
            XCTAssertEqual(harness.relay.presence.lastSeen(user), harness.clock.now, "\(user)'s last-seen time was not stored")
        }
    }
}
