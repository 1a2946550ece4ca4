import HomewardCore
import HomewardCoreTestSupport
import HomewardProtocol
import HomewardStorage
import Synchronization
import XCTest

/// A relay caching its connected users lets go of those who left once the grace has passed (`Relay+Eviction`), and
/// answers everyone afterwards as before: the evicted user when they come back, their friends meanwhile, their timers.
final class EvictionRelayTests: XCTestCase {
    private let grace = RelayLimits().cacheEvictionGrace

    private func harness(friends: [(String, String)] = [("alice", "bob"), ("alice", "carol")], safety: SafetySettings = SafetySettings(),
                         wrapStore: @escaping (SQLiteStore) -> any RelayStore = { $0 }) async throws -> SafetyHarness {
        try await SafetyHarness(users: ["alice", "bob", "carol", "dave"], friends: friends, safety: safety, wrapStore: wrapStore,
                                cache: .connected)
    }

    private func residents(_ harness: SafetyHarness) async -> Set<String> { await harness.relay.residents ?? [] }

    /// Moves the clock past the grace and sweeps.
    private func evictAfterGrace(_ harness: SafetyHarness) async {
        harness.clock.advance(by: grace)
        await harness.relay.evictIdleResidents()
    }

    func testADepartedUserIsEvictedOnceTheGraceHasPassedAndAConnectedOneStays() async throws {
        let harness = try await harness()
        let alice = try await harness.connect("alice")
        _ = try await harness.connect("bob")
        // dave is admitted because a request names him; he never connects.
        _ = try await harness.ok(.friendRequest(username: "dave"), as: alice.1, sink: alice.0)
        await harness.disconnect(alice.1, alice.0)
        harness.clock.advance(by: grace - 1)
        await harness.relay.evictIdleResidents()
        let before = await residents(harness)
        XCTAssertTrue(before.isSuperset(of: ["alice", "bob", "dave"]), "within the grace nobody goes: \(before)")
        harness.clock.advance(by: 1)
        await harness.relay.evictIdleResidents()
        let after = await residents(harness)
        XCTAssertEqual(after, ["bob"], "alice left and dave was only named; bob is connected")
    }

    func testAReconnectWithinTheGraceKeepsTheUserAndRestartsTheirGrace() async throws {
        let harness = try await harness()
        let alice = try await harness.connect("alice")
        await harness.disconnect(alice.1, alice.0)
        harness.clock.advance(by: grace / 2)
        let again = try await harness.connect("alice")
        harness.clock.advance(by: grace)
        await harness.relay.evictIdleResidents()
        let connected = await residents(harness)
        XCTAssertTrue(connected.contains("alice"), "connected: stays whatever the time")
        await harness.disconnect(again.1, again.0)
        harness.clock.advance(by: grace - 1)
        await harness.relay.evictIdleResidents()
        let within = await residents(harness)
        XCTAssertTrue(within.contains("alice"), "the grace counts from the last departure")
        harness.clock.advance(by: 1)
        await harness.relay.evictIdleResidents()
        let gone = await residents(harness)
        XCTAssertFalse(gone.contains("alice"))
    }

    func testAnEvictedUserSigningInAgainIsAdmittedAndSeesEverything() async throws {
        let harness = try await harness()
        var alice = try await harness.connect("alice")
        _ = try await harness.ok(.alarmContacts(usernames: ["carol"]), as: alice.1, sink: alice.0)
        await harness.disconnect(alice.1, alice.0)
        await evictAfterGrace(harness)
        let evicted = await residents(harness)
        XCTAssertFalse(evicted.contains("alice"))
        // While she is away: a friend request, an invitation and a message wait for her.
        let dave = try await harness.connect("dave")
        _ = try await harness.ok(.friendRequest(username: "alice"), as: dave.1, sink: dave.0)
        let bob = try await harness.connect("bob")
        _ = try await harness.ok(.sessionStart(SessionOptions(invite: ["alice"])), as: bob.1, sink: bob.0)
        _ = try await harness.ok(.msgSend(to: "alice", text: "where are you?"), as: bob.1, sink: bob.0)

        alice = try await harness.connect("alice")
        let back = await residents(harness)
        XCTAssertTrue(back.contains("alice"), "admitted again at sign-in")
        XCTAssertEqual(alice.0.events("friend.request").count, 1, "\(alice.0.messages)")
        XCTAssertEqual(alice.0.events("session.invite").count, 1, "\(alice.0.messages)")
        XCTAssertEqual(alice.0.events("msg").count, 1, "\(alice.0.messages)")
        let list = try await harness.ok(.friendList, as: alice.1, sink: alice.0)
        let friends = list.field("friends")?.arrayValue?.compactMap { $0["name"]?.stringValue } ?? []
        XCTAssertEqual(Set(friends), ["Bob", "Carol"], "her friends, with their profiles: \(list.fields)")
        XCTAssertEqual(list.field("incoming")?.arrayValue?.count, 1, "\(list.fields)")
        let contacts = try await harness.ok(.alarmContacts(usernames: nil), as: alice.1, sink: alice.0)
        XCTAssertEqual(contacts.field("usernames")?.arrayValue?.compactMap(\.stringValue), ["carol"], "her own part is read back whole")
        let sessions = try await harness.ok(.sessionList, as: alice.1, sink: alice.0)
        XCTAssertEqual(sessions.field("invites")?.arrayValue?.count, 1, "\(sessions.fields)")
        let tokens = try await harness.ok(.authSessions, as: alice.1, sink: alice.0)
        XCTAssertFalse(tokens.field("sessions")?.arrayValue?.isEmpty ?? true, "her sign-ins: \(tokens.fields)")
    }

    func testAFriendOfAnEvictedUserStillGetsCorrectAnswers() async throws {
        let harness = try await harness()
        let alice = try await harness.connect("alice")
        _ = try await harness.ok(.shareAlways(with: ["bob"]), as: alice.1, sink: alice.0)
        await harness.disconnect(alice.1, alice.0)
        let bob = try await harness.connect("bob")
        await evictAfterGrace(harness)
        let residents = await residents(harness)
        XCTAssertEqual(residents, ["bob"])
        // bob's part still holds alice on both sides: the friendship and her standing share with him.
        let list = try await harness.ok(.friendList, as: bob.1, sink: bob.0)
        let friends = list.field("friends")?.arrayValue ?? []
        XCTAssertEqual(friends.compactMap { $0["name"]?.stringValue }, ["Alice"], "\(list.fields)")
        XCTAssertEqual(friends.first?["online"], .bool(false))
        // A rule that reads her part admits her again: an alarm to her reaches her at sign-in.
        _ = try await harness.ok(.alarmRaise(Request.AlarmRaise(text: "help", to: ["alice"])), as: bob.1, sink: bob.0)
        let again = try await harness.connect("alice")
        XCTAssertEqual(again.0.events("alarm").count, 1, "\(again.0.messages)")
        // And her standing share with bob was kept: her position reaches him.
        bob.0.clear()
        harness.relay.publish(Position(lat: 57.7, lon: 11.9, acc: 5, ts: harness.clock.now), from: "alice")
        XCTAssertEqual(bob.0.events("pos").count, 1, "\(bob.0.messages)")
    }

    func testAFriendRequestRepeatedAfterAnEvictionRingsNoSoonerThanOnAWholeCache() async throws {
        let harness = try await harness()
        var alice = try await harness.connect("alice")
        var dave = try await harness.connect("dave")
        _ = try await harness.ok(.friendRequest(username: "dave"), as: alice.1, sink: alice.0)
        XCTAssertEqual(dave.0.events("friend.request").count, 1)
        _ = try await harness.ok(.friendRemove(username: "dave"), as: alice.1, sink: alice.0)
        await harness.disconnect(alice.1, alice.0)
        await harness.disconnect(dave.1, dave.0)
        await evictAfterGrace(harness)
        let evicted = await residents(harness)
        XCTAssertTrue(evicted.isDisjoint(with: ["alice", "dave"]), "\(evicted)")
        alice = try await harness.connect("alice")
        dave = try await harness.connect("dave")
        dave.0.clear()
        // Within the cooldown of the first one (`FriendRequestNotices`): stored, shown in lists, but not rung again.
        _ = try await harness.ok(.friendRequest(username: "dave"), as: alice.1, sink: alice.0)
        XCTAssertEqual(dave.0.events("friend.request").count, 0, "\(dave.0.messages)")
    }

    func testACheckInMissedByAnEvictedOwnerAlarmsTheirContactsOnce() async throws {
        let harness = try await harness()
        let alice = try await harness.connect("alice")
        _ = try await harness.ok(.alarmContacts(usernames: ["bob"]), as: alice.1, sink: alice.0)
        let checkInBy = harness.clock.now + grace + 60_000
        _ = try await harness.ok(.sessionStart(SessionOptions(invite: ["carol"], checkInBy: checkInBy)), as: alice.1, sink: alice.0)
        await harness.disconnect(alice.1, alice.0)
        let bob = try await harness.connect("bob")
        await evictAfterGrace(harness)
        let evicted = await residents(harness)
        XCTAssertFalse(evicted.contains("alice"), "\(evicted)")
        await harness.advance(by: 60_000)
        XCTAssertEqual(bob.0.events("alarm").count, 1, "the missed check-in alarms her contact: \(bob.0.messages)")
        await harness.advance(by: 60_000)
        await harness.relay.evictIdleResidents()
        await harness.advance(by: 600_000)
        // One alarm, raised once; what follows are its repeats (the owner's timer too), each number once.
        let alarms = bob.0.events("alarm")
        XCTAssertEqual(Set(alarms.compactMap { $0["alarm"]?["alarmId"]?.stringValue }).count, 1, "\(alarms)")
        XCTAssertEqual(alarms.filter { $0["repeat"] == nil }.count, 1, "raised once: \(alarms)")
        let repeats = alarms.compactMap { $0["repeat"]?.numberValue }
        XCTAssertEqual(repeats, Array(Set(repeats)).sorted(), "each repeat once, in order: \(repeats)")
    }

    func testLostContactOfAnEvictedOwnerReachesTheObserverOnce() async throws {
        var safety = SafetySettings()
        safety.lostContactGrace = grace + 120_000
        let harness = try await harness(safety: safety)
        let alice = try await harness.connect("alice")
        let bob = try await harness.connect("bob")
        _ = try await harness.ok(.sessionStart(SessionOptions(invite: ["bob"])), as: alice.1, sink: alice.0)
        let id = try XCTUnwrap(bob.0.events("session.invite").first?["session"]?["sessionId"]?.stringValue, "\(bob.0.messages)")
        _ = try await harness.ok(.sessionAccept(sessionId: id), as: bob.1, sink: bob.0)
        await harness.disconnect(alice.1, alice.0)
        await evictAfterGrace(harness)
        let evicted = await residents(harness)
        XCTAssertFalse(evicted.contains("alice"), "\(evicted)")
        await harness.advance(by: 120_000)
        XCTAssertEqual(bob.0.events("session.lost").count, 1, "\(bob.0.messages)")
        await harness.relay.evictIdleResidents()
        await harness.advance(by: safety.lostContactGrace)
        XCTAssertEqual(bob.0.events("session.lost").count, 1, "once: \(bob.0.messages)")
    }

    func testAnOwnerWatchedThroughAShareLinkHereStays() async throws {
        let harness = try await harness()
        let alice = try await harness.connect("alice")
        let started = try await harness.ok(.sessionStart(SessionOptions(invite: ["bob"])), as: alice.1, sink: alice.0)
        let id = try XCTUnwrap(started.field("session")?["sessionId"]?.stringValue, "\(started.fields)")
        let share = try await harness.ok(.shareCreate(sessionId: id, ttl: 3_600), as: alice.1, sink: alice.0)
        let token = try XCTUnwrap(share.field("share")?["token"]?.stringValue, "\(share.fields)")
        let viewer = RecordingSink("viewer")
        let watching = try await harness.serve(.watch(token: token), as: nil, sink: viewer).get()
        guard case .watching(let viewerKey) = watching.auth else { return XCTFail("\(watching.fields)") }
        await harness.disconnect(alice.1, alice.0)
        await evictAfterGrace(harness)
        let watched = await residents(harness)
        XCTAssertTrue(watched.contains("alice"), "a viewer here watches her link: \(watched)")
        harness.relay.disconnect(viewerKey, sink: viewer)
        await harness.relay.drain()
        await evictAfterGrace(harness)
        let unwatched = await residents(harness)
        XCTAssertFalse(unwatched.contains("alice"), "\(unwatched)")
    }

    func testAnEvictionDueWhileAWriteAboutTheUserIsOnItsWayLosesNothing() async throws {
        let instrumented = Mutex<InstrumentedStore?>(nil)
        let harness = try await harness(wrapStore: { store in
            let wrapped = InstrumentedStore(store)
            instrumented.withLock { $0 = wrapped }
            return wrapped
        })
        let store = try XCTUnwrap(instrumented.withLock { $0 })
        let alice = try await harness.connect("alice")
        await harness.disconnect(alice.1, alice.0)
        let bob = try await harness.connect("bob")
        harness.clock.advance(by: grace)
        // bob's removal of alice (resident, due for eviction) is decided, and held on its way to the store.
        store.holdWrites()
        let (relay, auth, sink) = (harness.relay, bob.1, bob.0)
        let reply = Task {
            await withCheckedContinuation { (done: CheckedContinuation<Result<RelayReply, RelayError>, Never>) in
                relay.serve(.friendRemove(username: "alice"), auth: auth, peer: "test", sink: sink) { done.resume(returning: $0) }
            }
        }
        await store.writeIsHeld()
        await relay.evictIdleResidents()
        let during = await residents(harness)
        XCTAssertTrue(during.contains("alice"), "not evicted while a write about her is on its way: \(during)")
        store.releaseWrites()
        _ = try await reply.value.get()
        await relay.evictIdleResidents()
        let after = await residents(harness)
        XCTAssertFalse(after.contains("alice"), "evicted once it is stored")
        let again = try await harness.connect("alice")
        let list = try await harness.ok(.friendList, as: again.1, sink: again.0)
        let friends = list.field("friends")?.arrayValue?.compactMap { $0["username"]?.stringValue } ?? []
        XCTAssertEqual(friends, ["carol"], "the removal is in what she reads back: \(list.fields)")
    }
}
