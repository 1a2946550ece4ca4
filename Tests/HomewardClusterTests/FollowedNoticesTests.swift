import Foundation
@testable import HomewardCore
import HomewardCoreTestSupport
import HomewardProtocol
import Synchronization
import XCTest

/// A relay caching its connected users hears only the notices addressed to the users it follows (`Relay+Following`):
/// two relays on one store that checks writes, the notices routed as nats-server routes subjects (`SubjectRouter`:
/// to a relay that follows one of the users a notice is addressed to at the moment it is published).
final class FollowedNoticesTests: XCTestCase {
    /// alice, bob and carol (alice friends with both) with alice's relay reading every notice, and another relay caching
    /// its connected users that hears only those of the users it follows.
    private func twoRelays(metrics: RecordingMetrics = RecordingMetrics())
        async throws -> (SafetyHarness, CountingStore, Relay, SubjectRouter.Bus, SubjectRouter) {
        let router = SubjectRouter()
        let aBus = router.bus(readsEveryNotice: true)
        let (harness, store) = try await threeFriendsOnACheckingStore(bus: aBus)
        let bBus = router.bus(readsEveryNotice: false)
        let other = try await Relay(store: store, hasher: .forTests, node: "there", bus: bBus, ownsTimers: false, cache: .connected,
                                    clock: harness.clock.function, metrics: metrics)
        aBus.deliver(to: harness.relay)
        bBus.deliver(to: other)
        await other.drain()
        return (harness, store, other, bBus, router)
    }

    private func signIn(_ user: String, on relay: Relay, _ harness: SafetyHarness) async throws -> RecordingSink {
        let sink = RecordingSink(user)
        let signedIn = await withCheckedContinuation { continuation in
            relay.serve(.hello(token: harness.tokens[user]!), auth: nil, peer: "test", sink: sink) { continuation.resume(returning: $0) }
        }
        guard case .authenticated = try signedIn.get().auth else { throw RelayError.forbidden("\(user) did not sign in") }
        await relay.drain()
        return sink
    }

    func testARelayFollowingItsUsersGetsEveryCommitAboutThemAndNoneAboutOthers() async throws {
        let metrics = RecordingMetrics()
        let (harness, store, other, bBus, _) = try await twoRelays(metrics: metrics)
        let bob = try await signIn("bob", on: other, harness)
        XCTAssertTrue(bBus.followed.contains("bob"), "a resident is followed")
        XCTAssertFalse(bBus.followed.contains("carol"), "nobody named carol on this relay")
        let (alice, aliceAuth) = try await harness.connect("alice")
        let (carol, carolAuth) = try await harness.connect("carol")
        let loads = store.loads

        // About bob (an invite): heard and applied; alice, the owner of what bob is now part of, followed from then on.
        let started = try await harness.ok(.sessionStart(SessionOptions(invite: ["bob"])), as: aliceAuth, sink: alice)
        let id = try XCTUnwrap(started.field("session")?["sessionId"]?.stringValue)
        await other.drain()
        XCTAssertEqual(bob.events("session.invite").count, 1, "\(bob.messages)")
        var invitees = await other.state.sessions[id]?.invitees
        XCTAssertEqual(invitees, ["bob"])
        XCTAssertTrue(bBus.followed.contains("alice"), "the owner of a session a resident is invited to is followed")
        // About carol alone: not heard.
        let applied = metrics.counter("homeward_cache_commits_applied_total")
        _ = try await harness.ok(.alarmContacts(usernames: ["alice"]), as: carolAuth, sink: carol)
        await other.drain()
        XCTAssertEqual(bBus.received, bBus.received.filter { !$0.address.users.isDisjoint(with: ["alice", "bob"]) },
                       "every notice heard is about a followed user")
        XCTAssertEqual(metrics.counter("homeward_cache_commits_applied_total"), applied, "carol's commit never reached this relay")
        // About alice's session (bob's part): heard in order.
        _ = try await harness.ok(.sessionInvite(sessionId: id, invite: ["carol"]), as: aliceAuth, sink: alice)
        await other.drain()
        invitees = await other.state.sessions[id]?.invitees
        XCTAssertEqual(invitees, ["bob", "carol"])
        XCTAssertEqual(store.loads, loads, "no reload")
        let versions = await other.versions
        for user in ["alice", "bob"] { XCTAssertEqual(versions?[user] ?? 0, store.versions[user] ?? 0, "\(user)'s version") }
    }

    func testAdmissionFollowsBeforeItReadsSoACommitRacingItIsNotLost() async throws {
        let (harness, store, other, bBus, _) = try await twoRelays()
        let (carol, carolAuth) = try await harness.connect("carol")
        // Right after carol's slice is read for her admission on the other relay, before it has it, she changes her alarm
        // contacts on her own relay: a commit about her alone, in no one else's slice.
        // Used by the hook alone, while this test waits for the admission: never from two tasks at once.
        nonisolated(unsafe) let carolsRelay = harness
        store.afterNextSlice {
            _ = try await carolsRelay.ok(.alarmContacts(usernames: ["alice"]), as: carolAuth, sink: carol)
        }
        // Signing in admits her in the mailbox's turn, as a relay does (an `admit` called from outside the mailbox would
        // let the notice be taken while the read is awaited, before her part is in place).
        _ = try await signIn("carol", on: other, harness)
        XCTAssertTrue(bBus.received.contains { $0.address.users.contains("carol") }, "its notice reached the relay following carol")
        let contacts = await other.state.contacts["carol"]
        XCTAssertEqual(contacts, ["alice"], "the commit made after carol's slice was read is in her part")
        let versions = await other.versions
        XCTAssertEqual(versions?["carol"], store.versions["carol"])
    }

    func testAGapForAFollowedUserIsRepairedByTheirSliceNotAWholeReload() async throws {
        let metrics = RecordingMetrics()
        let (harness, store, other, _, router) = try await twoRelays(metrics: metrics)
        let bob = try await signIn("bob", on: other, harness)
        let (alice, aliceAuth) = try await harness.connect("alice")
        let (carol, carolAuth) = try await harness.connect("carol")
        let loads = store.loads
        // carol's friend request to bob is committed, and its notice lost (her relay died between the two, say).
        router.dropNext()
        _ = try await harness.ok(.friendRequest(username: "bob"), as: carolAuth, sink: carol)
        // The next commit about bob comes: ahead of what the cache holds of him.
        _ = try await harness.ok(.friendRemove(username: "bob"), as: aliceAuth, sink: alice)
        let deadline = ContinuousClock.now + .seconds(5)
        var versions = await other.versions
        while versions?["bob"] != store.versions["bob"], ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
            await other.drain()
            versions = await other.versions
        }
        XCTAssertEqual(versions?["bob"], store.versions["bob"], "caught up with bob once the hold limit passed")
        let incoming = await other.state.incoming["bob"]
        XCTAssertEqual(incoming, ["carol"], "the commit whose notice was lost is in bob's part")
        XCTAssertEqual(bob.events("friend.removed").count, 1, "the held notice's event went out: \(bob.messages)")
        let friends = await other.state.friends["bob"] ?? []
        XCTAssertFalse(friends.contains("alice"), "the held commit is in the cache too")
        XCTAssertEqual(store.loads, loads, "no whole reload")
        XCTAssertEqual(metrics.counter("homeward_cache_gap_repairs_total"), 1)
        XCTAssertTrue(store.slices.last?.contains("bob") ?? false, "bob's slice read back: \(store.slices)")
    }

    func testAnEvictedUserIsNoLongerFollowedAndIsFollowedAgainWhenAdmittedAgain() async throws {
        let (harness, _, other, bBus, _) = try await twoRelays()
        let bob = try await signIn("bob", on: other, harness)
        XCTAssertTrue(bBus.followed.contains("bob"))
        other.disconnect("bob", sink: bob)
        await other.drain()
        harness.clock.advance(by: RelayLimits().cacheEvictionGrace)
        await other.evictIdleResidents()
        let resident = await other.state.isResident("bob")
        XCTAssertFalse(resident, "bob was evicted")
        XCTAssertFalse(bBus.followed.contains("bob"), "an evicted user's notices are no longer heard")
        _ = try await signIn("bob", on: other, harness)
        XCTAssertTrue(bBus.followed.contains("bob"), "admitted again, followed again")
    }

    func testAnUnfollowedUserIsNoLongerHeard() async throws {
        let (harness, _, other, bBus, _) = try await twoRelays()
        _ = try await signIn("bob", on: other, harness)
        await other.unfollow(["bob"])
        XCTAssertFalse(bBus.followed.contains("bob"))
        let (alice, aliceAuth) = try await harness.connect("alice")
        _ = try await harness.ok(.sessionStart(SessionOptions(invite: ["bob"])), as: aliceAuth, sink: alice)
        await other.drain()
        XCTAssertTrue(bBus.received.isEmpty, "\(bBus.received)")
    }

    /// A share link created on another relay is in no notice this relay hears (it follows nobody of it): `watch` finds
    /// its owner in the store and admits them, so the viewer watches, and hears the link end from then on.
    func testAViewerWatchesALinkCreatedOnARelayItDoesNotFollowAndHearsItEnd() async throws {
        let (harness, _, other, bBus, _) = try await twoRelays()
        let (alice, aliceAuth) = try await harness.connect("alice")
        let started = try await harness.ok(.sessionStart(SessionOptions(invite: ["bob"])), as: aliceAuth, sink: alice)
        let id = try XCTUnwrap(started.field("session")?["sessionId"]?.stringValue)
        let created = try await harness.ok(.shareCreate(sessionId: id, ttl: nil), as: aliceAuth, sink: alice)
        let token = try XCTUnwrap(created.field("share")?["token"]?.stringValue)
        await other.drain()
        XCTAssertTrue(bBus.received.isEmpty, "nothing of alice's reached this relay: \(bBus.received)")

        let viewer = RecordingSink("viewer")
        let watched = await withCheckedContinuation { continuation in
            other.serve(.watch(token: token), auth: nil, peer: "test", sink: viewer) { continuation.resume(returning: $0) }
        }
        guard case .watching = try watched.get().auth else { return XCTFail("not watching: \(watched)") }
        XCTAssertTrue(bBus.followed.contains("alice"), "the link's owner is followed")
        _ = try await harness.ok(.sessionEnd(sessionId: id), as: aliceAuth, sink: alice)
        await other.drain()
        XCTAssertEqual(viewer.events("session.ended").count, 1, "\(viewer.messages)")
        XCTAssertEqual(viewer.closes, [.normal])
    }

    /// An owner nothing is heard of here (not followed, their timer shard held elsewhere): what the cache held of theirs
    /// is dropped (`Relay.dropUnheardOwners`), else it would stay stale for good once changed elsewhere.
    func testAnEvictedOwnersSessionIsNotKeptWhereItsEndIsNeverHeard() async throws {
        let (harness, _, other, bBus, _) = try await twoRelays()
        let bob = try await signIn("bob", on: other, harness)
        let (bobThere, bobAuth) = try await harness.connect("bob")
        let started = try await harness.ok(.sessionStart(SessionOptions()), as: bobAuth, sink: bobThere)
        let id = try XCTUnwrap(started.field("session")?["sessionId"]?.stringValue)
        await other.drain()
        var held = await other.state.sessions[id] != nil
        XCTAssertTrue(held, "bob is followed: his session is heard")

        other.disconnect("bob", sink: bob)
        await other.drain()
        harness.clock.advance(by: RelayLimits().cacheEvictionGrace)
        await other.evictIdleResidents()
        XCTAssertFalse(bBus.followed.contains("bob"))
        _ = try await harness.ok(.sessionEnd(sessionId: id), as: bobAuth, sink: bobThere)
        await other.drain()
        held = await other.state.sessions[id] != nil
        XCTAssertFalse(held, "a session whose end this relay never hears is not kept")
        let owners = await other.state.activeOwners()
        XCTAssertEqual(owners, [], "nothing of anyone's is kept: this relay follows nobody and fires no shard")
    }

    /// A relay following its users keeps the timers of its shards' owners and of those it follows only: at start, when it
    /// takes a shard (read from the store), when it releases one.
    func testACacheFollowingItsUsersKeepsTheTimersOfItsShardsOnly() async throws {
        let router = SubjectRouter()
        let (harness, store) = try await threeFriendsOnACheckingStore(bus: router.bus(readsEveryNotice: true))
        let (alice, aliceAuth) = try await harness.connect("alice")
        let started = try await harness.ok(.sessionStart(SessionOptions()), as: aliceAuth, sink: alice)
        let id = try XCTUnwrap(started.field("session")?["sessionId"]?.stringValue)
        let bBus = router.bus(readsEveryNotice: false)
        let other = try await Relay(store: store, hasher: .forTests, node: "there", bus: bBus, ownsTimers: false, cache: .connected,
                                    clock: harness.clock.function)
        bBus.deliver(to: other)
        await other.drain()
        var held = await other.state.sessions[id] != nil
        XCTAssertFalse(held, "started with no shard and following nobody: alice's session is not kept")

        var shards = TimerShards.none
        shards.insert(TimerShards.shard(of: "alice"))
        await other.setTimerShards(shards)
        await other.drain()
        held = await other.state.sessions[id] != nil
        XCTAssertTrue(held, "her shard taken: her session read from the store")
        let offline = await other.state.offlineOwners["alice"]
        XCTAssertNotNil(offline, "connected nowhere this relay knows of: offline, her lost contact counts")

        await other.setTimerShards(.none)
        await other.drain()
        held = await other.state.sessions[id] != nil
        XCTAssertFalse(held, "her shard released: nothing of hers is heard here any more")
    }

    /// With `--change-notices all` nothing reads a notice's address (it goes to `hw.changes` alone), so the relay does
    /// not work it out; with `per-user` it does.
    func testANoticeIsAddressedOnlyWhenTheBusPublishesPerUser() async throws {
        for perUser in [false, true] {
            let router = SubjectRouter()
            let (harness, _) = try await threeFriendsOnACheckingStore(bus: router.bus(readsEveryNotice: true, publishesPerUser: perUser))
            let whole = router.bus(readsEveryNotice: true)
            let (alice, aliceAuth) = try await harness.connect("alice")
            _ = try await harness.ok(.sessionStart(SessionOptions(invite: ["bob"])), as: aliceAuth, sink: alice)
            _ = try await harness.ok(.logout, as: aliceAuth, sink: alice)
            let addressed = whole.received.map(\.address)
            XCTAssertFalse(addressed.isEmpty, "per user \(perUser): the notices went out")
            if perUser {
                XCTAssertTrue(addressed.contains { $0.users.isSuperset(of: ["alice", "bob"]) && $0.timerOwners == ["alice"] }, "\(addressed)")
                XCTAssertTrue(whole.received.contains { !$0.revokedTokens.isEmpty && $0.address.users.contains("alice") },
                              "a revoked token's owner is addressed")
            } else {
                XCTAssertEqual(addressed, addressed.map { _ in NoticeAddress() }, "no address worked out")
            }
        }
    }
}

/// Routes change notices between test buses as nats-server routes subjects: a notice goes to each bus that reads every
/// notice, and, when its bus publishes per user, to each that follows one of the users it is addressed to (or the timer
/// shard of one of its timer owners) when it is published. `dropNext` loses the next notice on the way to the buses that follow.
final class SubjectRouter: Sendable {
    private let buses = Mutex<[Bus]>([])
    private let dropping = Mutex(false)

    /// `publishesPerUser` false: a relay with `--change-notices all`, whose notices go to `hw.changes` alone (routed here
    /// to the buses that read every notice).
    func bus(readsEveryNotice: Bool, publishesPerUser: Bool = true) -> Bus {
        let bus = Bus(router: self, readsEveryNotice: readsEveryNotice, publishesPerUser: publishesPerUser)
        buses.withLock { $0.append(bus) }
        return bus
    }

    func dropNext() { dropping.withLock { $0 = true } }

    fileprivate func route(_ notice: ChangeNotice, from sender: Bus) {
        let drop = dropping.withLock { dropping in defer { dropping = false }; return dropping }
        for bus in buses.withLock({ $0 }) where bus !== sender && (bus.readsEveryNotice || sender.publishesPerUser && bus.hears(notice)) {
            if drop, !bus.readsEveryNotice { continue }
            bus.receive(notice)
        }
    }

    final class Bus: RelayBus {
        private let router: SubjectRouter
        let readsEveryNotice: Bool
        let publishesPerUser: Bool
        private let state = Mutex((users: Set<String>(), shards: TimerShards.none, received: [ChangeNotice](),
                                   receiver: (any BusReceiver)?.none))

        fileprivate init(router: SubjectRouter, readsEveryNotice: Bool, publishesPerUser: Bool) {
            self.router = router
            self.readsEveryNotice = readsEveryNotice
            self.publishesPerUser = publishesPerUser
        }

        var followed: Set<String> { state.withLock { $0.users } }
        /// The notices this bus handed to its relay.
        var received: [ChangeNotice] { state.withLock { $0.received } }

        func deliver(to receiver: any BusReceiver) { state.withLock { $0.receiver = receiver } }

        fileprivate func hears(_ notice: ChangeNotice) -> Bool {
            state.withLock { state in
                !state.users.isDisjoint(with: notice.address.users) || notice.address.timerOwners.contains(where: state.shards.owns)
            }
        }

        fileprivate func receive(_ notice: ChangeNotice) {
            let receiver = state.withLock { state in
                state.received.append(notice)
                return state.receiver
            }
            receiver?.remoteChanges(notice)
        }

        var isShared: Bool { true }
        func start(delivering receiver: any BusReceiver) async throws { deliver(to: receiver) }
        func publishPosition(_ message: EncodedMessage, of walker: String, restriction: PositionRestriction?) {}
        func updateInterest(adding: Set<String>, removing: Set<String>) async {}
        func lastPosition(of walker: String, for askers: [String]) async -> LastPositionAnswer? { nil }
        func publishChanges(_ notice: ChangeNotice) { router.route(notice, from: self) }
        func publishPresence(_ message: PresenceMessage) {}
        func requestPresenceSnapshot(of node: String) {}
        func flush() async {}
        /// Confirms nothing: the relay asks its store instead.
        func barrier() async -> Int? { nil }
        var generation: Int? { nil }
        func stop() async {}
        func follow(users: Set<String>, unfollowing: Set<String>) async {
            state.withLock { state in
                state.users.subtract(unfollowing)
                state.users.formUnion(users)
            }
        }
        func followTimerShards(taking: TimerShards, releasing: TimerShards) async {
            state.withLock { state in
                state.shards = state.shards.subtracting(releasing)
                for shard in taking.members { state.shards.insert(shard) }
            }
        }
    }
}
