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
        let (harness, store) = try await threeFriendsOnACheckingStore(bus: aBus)
        let other = try await connectedRelay(on: store, harness, ownsTimers: false)
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

    /// bob is resident on the other relay and on alice's list of standing shares; alice is not resident there (bob's
    /// sign-in names nobody for that list), and no notice told it of her. Two commits about alice then arrive in the
    /// wrong order (two relays writing about her within milliseconds): the slice that admitted bob gave alice's
    /// version too, so the later one waits for the earlier one instead of being applied first and making the earlier
    /// one look already held.
    func testCommitsAboutTheOwnerOfWhatAResidentIsPartOfArePlacedInOrderFromTheSlice() async throws {
        let aBus = RecordingBus()
        let (harness, store) = try await threeFriendsOnACheckingStore(bus: aBus)
        let (alice, aliceAuth) = try await harness.connect("alice")
        _ = try await harness.ok(.shareAlways(with: ["bob"]), as: aliceAuth, sink: alice)
        aBus.clear()

        let other = try await connectedRelay(on: store, harness, ownsTimers: false)
        try await signIn("bob", on: other, harness)
        let residents = await other.residents
        XCTAssertEqual(residents?.contains("alice"), false, "alice is not resident on the other relay")
        let standing = await other.state.standing["alice"]
        XCTAssertEqual(standing, ["bob"], "alice's list is in bob's part")
        let known = await other.versions?["alice"]
        XCTAssertEqual(known, store.versions["alice"], "bob's slice gave the version of the owner of that list")

        _ = try await harness.ok(.shareAlways(with: ["bob", "carol"]), as: aliceAuth, sink: alice)
        let earlier = aBus.notices
        aBus.clear()
        _ = try await harness.ok(.alarmContacts(usernames: ["carol"]), as: aliceAuth, sink: alice)
        let later = aBus.notices
        aBus.clear()
        XCTAssertFalse(earlier.isEmpty || later.isEmpty)
        let loads = store.loads
        for notice in later + earlier { other.remoteChanges(notice) }
        await other.drain()

        let list = await other.state.standing["alice"]
        XCTAssertEqual(list, ["bob", "carol"], "the earlier commit is in bob's part of the cache")
        XCTAssertEqual(store.loads, loads, "placed in order from the notices, no reload")
        let versions = await other.versions
        XCTAssertEqual(versions?["alice"], store.versions["alice"])
    }

    /// The same, on a relay that fires alice's timers: alice starts a session with carol alone (not in bob's part)
    /// before bob's slice is read, and its notice comes after. The slice's version of alice does not vouch for that
    /// session, so it is not taken: the notice is applied as it comes, and the session's deadline is known here.
    func testTheOwnersVersionIsNotTakenFromASliceByTheRelayFiringTheirTimers() async throws {
        let aBus = RecordingBus()
        let (harness, store) = try await threeFriendsOnACheckingStore(bus: aBus)
        let (alice, aliceAuth) = try await harness.connect("alice")
        _ = try await harness.ok(.shareAlways(with: ["bob"]), as: aliceAuth, sink: alice)
        aBus.clear()
        let other = try await connectedRelay(on: store, harness, ownsTimers: true)

        let started = try await harness.ok(.sessionStart(SessionOptions(invite: ["carol"], checkInBy: harness.clock.now + 600_000)),
                                           as: aliceAuth, sink: alice)
        let id = try XCTUnwrap(started.field("session")?["sessionId"]?.stringValue)
        let late = aBus.notices
        aBus.clear()
        try await signIn("bob", on: other, harness)
        let known = await other.versions?["alice"]
        XCTAssertNil(known, "alice's timers fire here: her version is not taken from bob's slice")
        for notice in late { other.remoteChanges(notice) }
        await other.drain()

        let session = await other.state.sessions[id]
        XCTAssertEqual(session?.owner, "alice", "the session committed before bob's slice and heard after it is in the cache")
        XCTAssertNotNil(session?.checkInBy)
    }

    /// Another relay on `store`, caching only its connected users, once it has loaded.
    private func connectedRelay(on store: CountingStore, _ harness: SafetyHarness, ownsTimers: Bool) async throws -> Relay {
        let relay = try await Relay(store: store, hasher: .forTests, node: "there", bus: RecordingBus(), ownsTimers: ownsTimers,
                                    cache: .connected, clock: harness.clock.function)
        await relay.drain()
        return relay
    }

    /// Signs `user` in on `relay` with their token, and waits until the relay has done what the sign-in started.
    private func signIn(_ user: String, on relay: Relay, _ harness: SafetyHarness,
                        file: StaticString = #filePath, line: UInt = #line) async throws {
        let sink = RecordingSink(user)
        let signedIn = await withCheckedContinuation { continuation in
            relay.serve(.hello(token: harness.tokens[user]!), auth: nil, peer: "test", sink: sink) { continuation.resume(returning: $0) }
        }
        guard case .authenticated = try signedIn.get().auth else { return XCTFail("\(user) did not sign in", file: file, line: line) }
        await relay.drain()
    }
}
