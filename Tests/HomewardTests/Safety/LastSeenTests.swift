import HomewardCore
import Synchronization
import XCTest

/// Last-seen times are stored in batches, not one commit per disconnect, and none is lost on shutdown.
final class LastSeenTests: XCTestCase {
    func testManyDisconnectsShareOneCommitAndSurviveARestart() async throws {
        let users = (0..<50).map { "walker\($0)" }
        let counting = Mutex<CountingStore?>(nil)
        let harness = try SafetyHarness(users: users, friends: [], wrapStore: { store in
            let wrapped = CountingStore(store)
            counting.withLock { $0 = wrapped }
            return wrapped
        })
        var connections: [(RecordingSink, Authentication)] = []
        for user in users { connections.append(try await harness.connect(user)) }
        let store = try XCTUnwrap(counting.withLock { $0 })
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
