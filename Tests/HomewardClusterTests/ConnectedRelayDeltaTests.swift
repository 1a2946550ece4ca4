import Foundation
@testable import HomewardCore
import HomewardCoreTestSupport
import HomewardProtocol
import HomewardStorage
import Synchronization
import XCTest

/// A relay caching only its connected users (`CacheMode.connected`) among others on one store that checks writes:
/// it applies the notices about its residents in their versions' order and those about users it does not know as
/// they come, without reloading, and its own writes about users it admitted go through the store's check.
final class ConnectedRelayDeltaTests: XCTestCase {
    func testNoticesAreAppliedWithoutReloadAndWritesAboutAdmittedUsersPassTheCheck() async throws {
        let aBus = RecordingBus()
        let counting = Mutex<CountingStore?>(nil)
        let harness = try await SafetyHarness(users: ["alice", "bob", "carol"], friends: [("alice", "bob"), ("alice", "carol")],
                                              wrapStore: { store in
                                                  let wrapped = CountingStore(store, checksWrites: true)
                                                  counting.withLock { $0 = wrapped }
                                                  return wrapped
                                              }, bus: aBus)
        let store = try XCTUnwrap(counting.withLock { $0 })
        let other = try await Relay(store: store, hasher: .forTests, node: "there", bus: RecordingBus(), ownsTimers: false,
                                    cache: .connected, clock: harness.clock.function)
        await other.drain()
        func forwardNotices() async {
            let notices = aBus.notices
            aBus.clear()
            for notice in notices { other.remoteChanges(notice) }
            await other.drain()
        }
        func serveOnOther(_ request: Request, as auth: Authentication?, sink: RecordingSink) async -> Result<RelayReply, RelayError> {
            let result = await withCheckedContinuation { continuation in
                other.serve(request, auth: auth, peer: "test", sink: sink) { continuation.resume(returning: $0) }
            }
            await other.drain()
            return result
        }
        let bob = RecordingSink("bob")
        guard case .authenticated(let bobAuth) = try await serveOnOther(.hello(token: harness.tokens["bob"]!), as: nil, sink: bob).get().auth
        else { return XCTFail("bob did not sign in") }
        let (alice, aliceAuth) = try await harness.connect("alice")
        let loads = store.loads

        let started = try await harness.ok(.sessionStart(SessionOptions(invite: ["bob"])), as: aliceAuth, sink: alice)
        let id = try XCTUnwrap(started.field("session")?["sessionId"]?.stringValue)
        // About alice only, whom the other relay has not admitted: applied as it comes.
        _ = try await harness.ok(.shareAlways(with: ["carol"]), as: aliceAuth, sink: alice)
        await forwardNotices()
        XCTAssertEqual(store.loads, loads, "no reload: the notices were placed by the versions the cache knows")
        XCTAssertEqual(bob.events("session.invite").count, 1, "\(bob.messages)")
        let invitees = await other.state.sessions[id]?.invitees
        XCTAssertEqual(invitees, ["bob"])

        // bob's accept writes alice's session: checked against alice's version, which the other relay knows once it
        // has her part (admitted before deciding, or read back after a refusal).
        let accepted = await serveOnOther(.sessionAccept(sessionId: id), as: bobAuth, sink: bob)
        XCTAssertNoThrow(try accepted.get())
        let stored = try await store.load()
        XCTAssertEqual(stored.sessions.first { $0.id == id }?.observers, ["bob"], "the accept is stored")
        let residents = await other.residents
        XCTAssertEqual(residents.map { $0.isSuperset(of: ["alice", "bob"]) }, true)
        XCTAssertEqual(residents?.contains("carol"), false, "carol was named by nobody on the other relay")
        let versions = await other.versions
        for user in ["alice", "bob"] {
            XCTAssertEqual(versions?[user] ?? 0, store.versions[user] ?? 0, "\(user)'s version as the store has it")
        }
    }
}
