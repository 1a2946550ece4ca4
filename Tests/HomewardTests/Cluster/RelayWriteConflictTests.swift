import HomewardCore
import HomewardProtocol
import Synchronization
import XCTest

/// A relay whose write is refused because another relay wrote since its cache was loaded
/// (`StoreCacheBehind`): it decides the request again on the reloaded state, and nothing of the refused
/// attempt is sent or kept. Driven directly (manual clock, SQLite behind a `CountingStore` that checks writes, recording bus).
final class RelayWriteConflictTests: XCTestCase {
    private func harness() async throws -> (SafetyHarness, CountingStore, RecordingBus) {
        let bus = RecordingBus()
        let counting = Mutex<CountingStore?>(nil)
        let harness = try await SafetyHarness(users: ["alice", "bob", "carol"], friends: [("alice", "bob"), ("alice", "carol")],
                                              wrapStore: { store in
                                                  let wrapped = CountingStore(store, checksWrites: true)
                                                  counting.withLock { $0 = wrapped }
                                                  return wrapped
                                              }, bus: bus)
        return (harness, try XCTUnwrap(counting.withLock { $0 }), bus)
    }

    /// Carol's accept on another relay lands between bob's relay reading the count and writing bob's accept.
    private static func carolAccepts(_ id: String) -> CountingStore.Write {
        { stored in
            guard var session = stored.sessions.first(where: { $0.id == id }) else { return [] }
            session.set(.accepted, for: "carol")
            return [.saveSession(session)]
        }
    }

    private func startSession(_ harness: SafetyHarness, _ alice: RecordingSink, _ aliceAuth: Authentication) async throws -> String {
        let started = try await harness.ok(.sessionStart(SessionOptions(invite: ["bob", "carol"])), as: aliceAuth, sink: alice)
        return try XCTUnwrap(started.field("session")?["sessionId"]?.stringValue)
    }

    func testARefusedAcceptIsDecidedAgainOnTheReloadedSessionAndKeepsTheOtherRelaysAccept() async throws {
        let (harness, store, bus) = try await harness()
        let (alice, aliceAuth) = try await harness.connect("alice")
        let (bob, bobAuth) = try await harness.connect("bob")
        let id = try await startSession(harness, alice, aliceAuth)
        alice.clear()
        bus.clear()

        store.interleave([Self.carolAccepts(id)])
        let accepted = try await harness.ok(.sessionAccept(sessionId: id), as: bobAuth, sink: bob)
        XCTAssertEqual(store.refused, 1, "the first write was refused")
        XCTAssertEqual(accepted.field("session")?["observers"], .strings(["bob", "carol"]), "decided on the reloaded session")

        let stored = try await store.load().sessions.first { $0.id == id }
        XCTAssertEqual(stored?.observers, ["bob", "carol"], "carol's accept is not undone")
        XCTAssertEqual(alice.events("session.accepted").map { $0["by"] }, ["bob"], "the refused attempt sent nothing")
        XCTAssertEqual(bus.notices.flatMap(\.events).filter { $0.message["type"] == "session.accepted" }.count, 1)
        XCTAssertEqual(bob.messages.filter { $0["type"] == "session.accepted" }, [])
    }

    func testARefusedWriteCatchesUpFromTheOtherRelaysNoticeWithoutReloading() async throws {
        let (harness, store, bus) = try await harness()
        let (alice, aliceAuth) = try await harness.connect("alice")
        let (bob, bobAuth) = try await harness.connect("bob")
        let id = try await startSession(harness, alice, aliceAuth)
        alice.clear()
        bus.clear()

        // Carol's accept on another relay, whose notice (with its commit) reaches this relay as the write is refused.
        let relay = harness.relay
        store.interleave([{ stored in
            let changes = Self.carolAccepts(id)(stored)
            relay.remoteChanges(ChangeNotice(node: "other", commits: [ChangeNotice.Commit(count: (stored.changeCount ?? 0) + 1, changes: changes)]))
            return changes
        }])
        let loads = store.loads
        let accepted = try await harness.ok(.sessionAccept(sessionId: id), as: bobAuth, sink: bob)
        XCTAssertEqual(store.refused, 1, "the first write was refused")
        XCTAssertEqual(store.loads, loads, "caught up from the notice: no reload")
        XCTAssertEqual(accepted.field("session")?["observers"], .strings(["bob", "carol"]), "decided on the caught-up session")
        let stored = try await store.load().sessions.first { $0.id == id }
        XCTAssertEqual(stored?.observers, ["bob", "carol"], "carol's accept is not undone")
    }

    func testAWriteRefusedAtEveryAttemptAnswersStorageAndSendsNothing() async throws {
        let (harness, store, bus) = try await harness()
        let (alice, aliceAuth) = try await harness.connect("alice")
        let (bob, bobAuth) = try await harness.connect("bob")
        let id = try await startSession(harness, alice, aliceAuth)
        alice.clear()
        bus.clear()

        // Another relay writes before each of the relay's attempts (carol accepts, then again: the same row).
        store.interleave(Array(repeating: Self.carolAccepts(id), count: Relay.writeAttempts))
        let result = await harness.serve(.sessionAccept(sessionId: id), as: bobAuth, sink: bob)
        guard case .failure(.storage) = result else { return XCTFail("expected a storage error, got \(result)") }
        // Given up after its attempts or its time, whichever ran out first (each attempt here waits for notices
        // that never come).
        XCTAssertGreaterThan(store.refused, 1, "decided again after a refusal")
        XCTAssertLessThanOrEqual(store.refused, Relay.writeAttempts)
        store.stopInterleaving()
        XCTAssertEqual(alice.events("session.accepted"), [], "nothing of a refused attempt is sent")
        XCTAssertEqual(bus.notices, [], "nor told the other relays")
        let stored = try await store.load().sessions.first { $0.id == id }
        XCTAssertEqual(stored?.observers, ["carol"])

        // The cache is the store's: the next accept goes through, once.
        let accepted = try await harness.ok(.sessionAccept(sessionId: id), as: bobAuth, sink: bob)
        XCTAssertEqual(accepted.field("session")?["observers"], .strings(["bob", "carol"]))
        XCTAssertEqual(alice.events("session.accepted").map { $0["by"] }, ["bob"])
    }
}
