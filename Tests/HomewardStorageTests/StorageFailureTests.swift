import Foundation
import HomewardCore
import HomewardCoreTestSupport
import HomewardProtocol
import HomewardStorage
import XCTest

/// A write that fails: the request gets a storage error, memory goes back to what is on disk, and
/// what is not stored (the safety timings, which walkers are out of contact) is kept.
final class StorageFailureTests: XCTestCase {
    /// alice walks with bob observing, then loses her connection; carol and dave are friends of
    /// alice only. The relay's lost-contact grace is 5 s, not the default 60 s.
    private func walkerOutOfContact() async throws
        -> (SafetyHarness, InstrumentedStore, bob: (RecordingSink, Authentication), carol: (RecordingSink, Authentication))
    {
        var safety = SafetySettings()
        safety.lostContactGrace = 5_000
        safety.alarmRepeatInterval = 7_000
        let (harness, store) = try await SafetyHarness.instrumented(
            users: ["alice", "bob", "carol", "dave"], friends: [("alice", "bob"), ("alice", "carol"), ("alice", "dave")],
            safety: safety)
        let alice = try await harness.connect("alice")
        let bob = try await harness.connect("bob")
        let carol = try await harness.connect("carol")
        let started = try await harness.ok(.sessionStart(SessionOptions(invite: ["bob"])), as: alice.1, sink: alice.0)
        let id = try XCTUnwrap(started.field("session")?["sessionId"]?.stringValue)
        _ = try await harness.ok(.sessionAccept(sessionId: id), as: bob.1, sink: bob.0)
        await harness.disconnect(alice.1, alice.0)
        return (harness, store, bob, carol)
    }

    /// What a fresh store on the same file reads: the truth after the failure.
    private func onDisk(_ harness: SafetyHarness) async throws -> StoredState {
        let store = try SQLiteStore(path: harness.directory.appendingPathComponent("homeward.sqlite").path)
        defer { try? store.close() }
        return try await store.load()
    }

    func testFailedWriteIsAStorageErrorAndChangesNothing() async throws {
        let (harness, store, bob, carol) = try await walkerOutOfContact()
        store.failWrite(1)
        let result = await harness.serve(.friendRequest(username: "bob"), as: carol.1, sink: carol.0)
        XCTAssertEqual(result.failureCase, "storage", "the client is told the relay failed")
        XCTAssertTrue(bob.0.events("friend.request").isEmpty, "nobody hears of what was not stored")

        let disk = try await onDisk(harness)
        XCTAssertFalse(disk.friendRequests.contains { $0 == ("carol", "bob") })
        let list = try await harness.ok(.friendList, as: bob.1, sink: bob.0)
        XCTAssertEqual(list.field("incoming"), .array([]), "memory matches the disk: no request from carol")

        // The relay goes on: the same request now succeeds and is stored.
        _ = try await harness.ok(.friendRequest(username: "bob"), as: carol.1, sink: carol.0)
        XCTAssertEqual(bob.0.events("friend.request").count, 1)
        let after = try await onDisk(harness)
        XCTAssertTrue(after.friendRequests.contains { $0 == ("carol", "bob") })
    }

    func testFailedWriteKeepsTheSafetySettingsAndWhoIsOutOfContact() async throws {
        let (harness, store, bob, carol) = try await walkerOutOfContact()
        let configured = await harness.relay.safety
        store.failWrite(1)
        _ = await harness.serve(.friendRequest(username: "bob"), as: carol.1, sink: carol.0)
        let afterFailure = await harness.relay.safety
        XCTAssertEqual(afterFailure, configured)

        // alice has been gone since before the failure: the configured 5 s grace still runs for her.
        await harness.advance(by: 4_999)
        XCTAssertTrue(bob.0.events("session.lost").isEmpty)
        await harness.advance(by: 1)
        XCTAssertEqual(bob.0.events("session.lost").count, 1,
                       "lost contact fires after the configured grace, not the default 60 s, and not never")
    }

    func testFailedWriteOfAnAcceptLeavesTheObserverOut() async throws {
        let (harness, store) = try await SafetyHarness.instrumented(users: ["alice", "bob"], friends: [("alice", "bob")])
        let alice = try await harness.connect("alice")
        let bob = try await harness.connect("bob")
        let started = try await harness.ok(.sessionStart(SessionOptions(invite: ["bob"])), as: alice.1, sink: alice.0)
        let id = try XCTUnwrap(started.field("session")?["sessionId"]?.stringValue)

        store.failWrite(1)
        let accept = await harness.serve(.sessionAccept(sessionId: id), as: bob.1, sink: bob.0)
        XCTAssertEqual(accept.failureCase, "storage")
        harness.relay.publish(Position(lat: 57.7, lon: 11.9, ts: harness.clock.now), from: "alice")
        XCTAssertTrue(bob.0.events("pos").isEmpty, "an observer whose accept was not stored gets no positions")
        let list = try await harness.ok(.sessionList, as: bob.1, sink: bob.0)
        XCTAssertEqual(list.field("following"), .array([]))
        XCTAssertEqual(list.field("invites")?.arrayCount, 1, "the invitation is still open, as on disk")
        let disk = try await onDisk(harness)
        XCTAssertEqual(disk.sessions.first?.observers, [])

        _ = try await harness.ok(.sessionAccept(sessionId: id), as: bob.1, sink: bob.0)
        harness.relay.publish(Position(lat: 57.7, lon: 11.9, ts: harness.clock.now), from: "alice")
        XCTAssertEqual(bob.0.events("pos").count, 1)
    }

    func testAWriteThatFailsWhileStorageIsDownLeavesNothingBehind() async throws {
        let (harness, store) = try await SafetyHarness.instrumented(users: ["alice", "bob"], friends: [])
        let alice = try await harness.connect("alice")
        let bob = try await harness.connect("bob")

        store.setDown(true)
        let first = await harness.serve(.friendRequest(username: "bob"), as: alice.1, sink: alice.0)
        XCTAssertEqual(first.failureCase, "storage")
        // Memory may hold what was never stored, and it cannot be read back: requests fail fast.
        let list = await harness.serve(.friendList, as: bob.1, sink: bob.0)
        XCTAssertEqual(list.failureCase, "storage")

        store.setDown(false)
        harness.clock.advance(by: 1_000)
        // The same request goes through: the failed attempt left nothing behind (no "already asked").
        _ = try await harness.ok(.friendRequest(username: "bob"), as: alice.1, sink: alice.0)
        XCTAssertEqual(bob.0.events("friend.request").count, 1)
    }
}

extension Result where Failure == RelayError {
    /// The error's case name, nil on success.
    var failureCase: String? {
        guard case .failure(let error) = self else { return nil }
        return String(describing: error).prefix { $0 != "(" }.description
    }
}
