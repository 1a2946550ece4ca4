@testable import HomewardCore
import HomewardCoreTestSupport
import HomewardProtocol
import Synchronization
import XCTest

/// A relay whose write is refused because another relay wrote about one of its users since its cache had them
/// (`StoreCacheBehind`): it decides the request again on the reloaded state, and nothing of the refused
/// attempt is sent or kept. Driven directly (manual clock, SQLite behind a `CountingStore` that checks writes, recording bus).
final class RelayWriteConflictTests: XCTestCase {
    /// Alice's session, inviting bob and carol, on a relay whose store checks writes; bob is connected to it.
    private struct Setup {
        let harness: SafetyHarness
        let store: CountingStore
        let bus: RecordingBus
        let alice: RecordingSink
        let bob: RecordingSink
        let bobAuth: Authentication
        let sessionId: String

        /// Bob's accept, as the relay answers it.
        func bobAccepts() async -> Result<RelayReply, RelayError> {
            await harness.serve(.sessionAccept(sessionId: sessionId), as: bobAuth, sink: bob)
        }

        /// The session's observers as stored.
        func storedObservers() async throws -> [String]? {
            try await store.load().sessions.first { $0.id == sessionId }?.observers
        }
    }

    private func aliceInvitesBobAndCarol() async throws -> Setup {
        let bus = RecordingBus()
        let (harness, store) = try await threeFriendsOnACheckingStore(bus: bus)
        let (alice, aliceAuth) = try await harness.connect("alice")
        let (bob, bobAuth) = try await harness.connect("bob")
        let started = try await harness.ok(.sessionStart(SessionOptions(invite: ["bob", "carol"])), as: aliceAuth, sink: alice)
        let id = try XCTUnwrap(started.field("session")?["sessionId"]?.stringValue)
        alice.clear()
        bus.clear()
        return Setup(harness: harness, store: store, bus: bus, alice: alice, bob: bob,
                     bobAuth: bobAuth, sessionId: id)
    }

    /// Carol's accept on another relay lands between bob's relay reading the count and writing bob's accept.
    private static func carolAccepts(_ id: String) -> CountingStore.Write {
        { stored in
            guard var session = stored.sessions.first(where: { $0.id == id }) else { return [] }
            session.set(.accepted, for: "carol")
            return [.saveSession(session)]
        }
    }

    func testARefusedAcceptIsDecidedAgainOnTheReloadedSessionAndKeepsTheOtherRelaysAccept() async throws {
        let setup = try await aliceInvitesBobAndCarol()
        setup.store.interleave([Self.carolAccepts(setup.sessionId)])
        let accepted = try await setup.bobAccepts().get()
        XCTAssertEqual(setup.store.refused, 1, "the first write was refused")
        XCTAssertEqual(accepted.field("session")?["observers"], .strings(["bob", "carol"]), "decided on the reloaded session")

        let stored = try await setup.storedObservers()
        XCTAssertEqual(stored, ["bob", "carol"], "carol's accept is not undone")
        XCTAssertEqual(setup.alice.events("session.accepted").map { $0["by"] }, ["bob"], "the refused attempt sent nothing")
        XCTAssertEqual(setup.bus.notices.flatMap(\.events).filter { $0.message["type"] == "session.accepted" }.count, 1)
        XCTAssertEqual(setup.bob.messages.filter { $0["type"] == "session.accepted" }, [])
    }

    /// What a refused batch makes stale is its users' part of the cache: that is read back (here alice's, the
    /// session's owner), not the whole store, and the cache is then the store's.
    func testARefusalReadsBackTheSlicesOfItsUsersNotTheWholeStore() async throws {
        let setup = try await aliceInvitesBobAndCarol()
        setup.store.interleave([Self.carolAccepts(setup.sessionId)])
        let loads = setup.store.loads
        let slices = setup.store.slices.count
        let accepted = try await setup.bobAccepts().get()
        XCTAssertEqual(setup.store.refused, 1, "the first write was refused")
        XCTAssertEqual(accepted.field("session")?["observers"], .strings(["bob", "carol"]), "decided on the caught-up session")
        XCTAssertEqual(Array(setup.store.slices.dropFirst(slices)), [["alice"]])
        XCTAssertEqual(setup.store.loads, loads, "no whole reload")
        let cache = await setup.harness.relay.state
        let reloaded = cache.reloaded(from: try await setup.store.load(), afterRemoteChange: true)
        XCTAssertEqual(CacheSnapshot(cache), CacheSnapshot(reloaded))
    }

    func testARefusedWriteIsDecidedAgainWhenTheOtherRelaysNoticeCameFirst() async throws {
        let setup = try await aliceInvitesBobAndCarol()
        // Carol's accept on another relay, whose notice (with its commit) reaches this relay as the write is refused.
        let relay = setup.harness.relay
        let id = setup.sessionId
        setup.store.interleave([{ stored in
            let changes = Self.carolAccepts(id)(stored)
            // Carol's accept concerns alice, the session's owner: her version moves on by one.
            let versions = ["alice": (stored.versions?["alice"] ?? 0) + 1]
            relay.remoteChanges(ChangeNotice(node: "other", commits: [ChangeNotice.Commit(versions: versions, changes: changes)]))
            return changes
        }])
        let accepted = try await setup.bobAccepts().get()
        XCTAssertEqual(setup.store.refused, 1, "the first write was refused")
        XCTAssertEqual(accepted.field("session")?["observers"], .strings(["bob", "carol"]), "decided on the caught-up session")
        let stored = try await setup.storedObservers()
        XCTAssertEqual(stored, ["bob", "carol"], "carol's accept is not undone")
        XCTAssertEqual(setup.alice.events("session.accepted").map { $0["by"] }, ["bob"], "the refused attempt sent nothing")
    }

    /// What a refused decision noted in memory only does not hold back the same request decided again: the
    /// friend request's target still hears of it, once.
    func testARefusedFriendRequestDecidedAgainStillReachesItsTarget() async throws {
        let setup = try await aliceInvitesBobAndCarol()
        let (carol, _) = try await setup.harness.connect("carol")
        // Another relay writes about bob (his alarm contacts) after this relay decided his request.
        setup.store.interleave([{ _ in [.setAlarmContacts(owner: "bob", ["alice"])] }])
        _ = try await setup.harness.ok(.friendRequest(username: "carol"), as: setup.bobAuth, sink: setup.bob)
        XCTAssertEqual(setup.store.refused, 1, "the first write was refused")
        await setup.harness.relay.drain()
        XCTAssertEqual(carol.events("friend.request").count, 1, "carol heard of bob's request once: \(carol.messages)")
        let requests = try await setup.store.load().friendRequests.map { "\($0.from)>\($0.to)" }
        XCTAssertEqual(requests, ["bob>carol"])
    }

    func testAWriteRefusedAtEveryAttemptAnswersStorageAndSendsNothing() async throws {
        let setup = try await aliceInvitesBobAndCarol()
        // Another relay writes before each of the relay's attempts (carol accepts, then again: the same row).
        setup.store.interleave(Array(repeating: Self.carolAccepts(setup.sessionId), count: Relay.writeAttempts))
        let result = await setup.bobAccepts()
        guard case .failure(.storage) = result else { return XCTFail("expected a storage error, got \(result)") }
        // Given up after its attempts or its time, whichever ran out first (each attempt here waits for notices
        // that never come).
        XCTAssertGreaterThan(setup.store.refused, 1, "decided again after a refusal")
        XCTAssertLessThanOrEqual(setup.store.refused, Relay.writeAttempts)
        setup.store.stopInterleaving()
        XCTAssertEqual(setup.alice.events("session.accepted"), [], "nothing of a refused attempt is sent")
        XCTAssertEqual(setup.bus.notices, [], "nor told the other relays")
        let stored = try await setup.storedObservers()
        XCTAssertEqual(stored, ["carol"])

        // The cache is the store's: the next accept goes through, once.
        let accepted = try await setup.bobAccepts().get()
        XCTAssertEqual(accepted.field("session")?["observers"], .strings(["bob", "carol"]))
        XCTAssertEqual(setup.alice.events("session.accepted").map { $0["by"] }, ["bob"])
    }
}
