import Foundation
@testable import HomewardCore
import HomewardCoreTestSupport
import HomewardProtocol
import HomewardStorage
import Synchronization
import XCTest

/// Two relays on one store: what one commits, the other applies to its cache from the notice (no reload),
/// and reloads only when it cannot place a notice.
final class RelayDeltaTests: XCTestCase {
    private struct Pair {
        let harness: SafetyHarness
        let aBus: RecordingBus
        let store: CountingStore
        let other: Relay

        /// Hands the other relay what relay A published since the last call, and waits until it is handled.
        func forwardNotices() async {
            let notices = aBus.notices
            aBus.clear()
            for notice in notices { other.remoteChanges(notice) }
            await other.drain()
        }

        /// Signs `user` in on the other relay.
        func connectToOther(_ user: String) async throws -> (RecordingSink, Authentication) {
            let sink = RecordingSink(user)
            let result = await withCheckedContinuation { continuation in
                other.serve(.hello(token: harness.tokens[user]!), auth: nil, peer: "test", sink: sink) { continuation.resume(returning: $0) }
            }
            await other.drain()
            guard case .authenticated(let auth) = try result.get().auth else { throw RelayError.unauthenticated("no auth") }
            return (sink, auth)
        }

        /// The other relay's cache, and the one a reload from the store would give it now.
        func caches() async throws -> (applied: CacheSnapshot, reloaded: CacheSnapshot) {
            let cache = await other.state
            return (CacheSnapshot(cache), CacheSnapshot(cache.reloaded(from: try await store.load(), afterRemoteChange: true)))
        }
    }

    private func pair() async throws -> Pair {
        let aBus = RecordingBus()
        let counting = Mutex<CountingStore?>(nil)
        let harness = try await SafetyHarness(users: ["alice", "bob", "carol"], friends: [("alice", "bob"), ("alice", "carol")],
                                              wrapStore: { store in
                                                  let wrapped = CountingStore(store)
                                                  counting.withLock { $0 = wrapped }
                                                  return wrapped
                                              }, bus: aBus)
        let store = try XCTUnwrap(counting.withLock { $0 })
        let other = try await Relay(store: store, hasher: .forTests, node: "there", bus: RecordingBus(), ownsTimers: false, clock: harness.clock.function)
        await other.drain()
        return Pair(harness: harness, aBus: aBus, store: store, other: other)
    }

    func testTheOtherRelayAppliesNoticesWithoutReloadingAndDeliversTheirEvents() async throws {
        let pair = try await pair()
        let (bob, bobAuth) = try await pair.connectToOther("bob")
        let (carol, _) = try await pair.connectToOther("carol")
        let (alice, aliceAuth) = try await pair.harness.connect("alice")
        let loads = pair.store.loads

        let started = try await pair.harness.ok(.sessionStart(SessionOptions(invite: ["bob"])), as: aliceAuth, sink: alice)
        let id = try XCTUnwrap(started.field("session")?["sessionId"]?.stringValue)
        _ = try await pair.harness.ok(.alarmContacts(usernames: ["bob", "carol"]), as: aliceAuth, sink: alice)
        _ = try await pair.harness.ok(.shareAlways(with: ["carol"]), as: aliceAuth, sink: alice)
        await pair.forwardNotices()

        XCTAssertEqual(pair.store.loads, loads, "no reload: the notices' commits followed the cache's versions")
        XCTAssertEqual(bob.events("session.invite").count, 1, "the event reached bob on the other relay: \(bob.messages)")
        let state = await pair.other.state
        XCTAssertEqual(state.sessions[id]?.invitees, ["bob"])
        XCTAssertEqual(state.audience(of: "alice"), ["carol"], "bob was only invited; carol gets alice at all times")
        XCTAssertTrue(pair.other.presence.remoteAudience(of: "alice").contains { $0 === carol },
                      "the presence table follows the applied commits: alice's positions reach carol here")
        let versions = await pair.other.versions
        XCTAssertEqual(versions, pair.store.versions, "the other cache holds every write about every user")
        XCTAssertEqual(versions?["alice"], 3, "alice's three writes")
        let caches = try await pair.caches()
        XCTAssertEqual(caches.applied, caches.reloaded)

        // A request on the other relay finds the store's versions where its cache has them: it reads nothing more.
        let before = pair.store.loads
        let result = await withCheckedContinuation { continuation in
            pair.other.serve(.sessionList, auth: bobAuth, peer: "test", sink: bob) { continuation.resume(returning: $0) }
        }
        XCTAssertNotNil(try? result.get())
        XCTAssertEqual(pair.store.loads, before)
    }

    /// The rules' own commits, one request at a time on relay A: after each, the other relay's cache (its
    /// commits applied, never reloaded) is the one a reload would give.
    func testEveryRequestsCommitsLeaveTheOtherCacheAsAReloadWould() async throws {
        let pair = try await pair()
        let (alice, aliceAuth) = try await pair.harness.connect("alice")
        let (bob, bobAuth) = try await pair.harness.connect("bob")
        let (carol, carolAuth) = try await pair.harness.connect("carol")
        await pair.forwardNotices()
        let loads = pair.store.loads
        let now = pair.harness.clock.now
        var step = 0
        func run(_ request: Request, as auth: Authentication, _ sink: RecordingSink) async throws -> RelayReply {
            let reply = try await pair.harness.ok(request, as: auth, sink: sink)
            await pair.forwardNotices()
            let caches = try await pair.caches()
            XCTAssertEqual(caches.applied, caches.reloaded, "after \(request)")
            step += 1
            return reply
        }
        let loadsBefore = { pair.store.loads - step }
        _ = try await run(.friendRequest(username: "carol"), as: bobAuth, bob)
        _ = try await run(.userBlock(username: "bob"), as: carolAuth, carol)
        _ = try await run(.userUnblock(username: "bob"), as: carolAuth, carol)
        _ = try await run(.friendAccept(username: "bob"), as: carolAuth, carol)
        let session = try await run(.sessionStart(SessionOptions(invite: ["bob", "carol"], checkInBy: now + 600_000)), as: aliceAuth, alice)
        let id = try XCTUnwrap(session.field("session")?["sessionId"]?.stringValue)
        _ = try await run(.sessionAccept(sessionId: id), as: bobAuth, bob)
        _ = try await run(.sessionDecline(sessionId: id), as: carolAuth, carol)
        let share = try await run(.shareCreate(sessionId: id, ttl: 600), as: aliceAuth, alice)
        _ = try await run(.sessionCheckin(sessionId: id, checkInBy: now + 900_000), as: aliceAuth, alice)
        _ = try await run(.alarmContacts(usernames: ["bob", "carol"]), as: aliceAuth, alice)
        let alarm = try await run(.alarmRaise(Request.AlarmRaise(text: "help", lat: 57.7, lon: 11.9)), as: aliceAuth, alice)
        let alarmId = try XCTUnwrap(alarm.field("alarmId")?.stringValue ?? alarm.field("alarm")?["alarmId"]?.stringValue)
        _ = try await run(.alarmAck(alarmId: alarmId), as: bobAuth, bob)
        _ = try await run(.alarmCancel(alarmId: alarmId, reason: "safe"), as: aliceAuth, alice)
        _ = try await run(.shareAlways(with: ["bob", "carol"]), as: aliceAuth, alice)
        _ = try await run(.locationPause(from: "bob", until: now + 60_000), as: aliceAuth, alice)
        _ = try await run(.locationPause(from: nil, until: nil), as: aliceAuth, alice)
        _ = try await run(.locationResume(from: nil), as: aliceAuth, alice)
        let meeting = try await run(.meetPropose(MeetingProposal(to: ["bob", "carol"], lat: 57.7, lon: 11.9, name: "Café", time: now + 3_600_000)),
                                    as: aliceAuth, alice)
        let meetingId = try XCTUnwrap(meeting.field("meeting")?["meetingId"]?.stringValue ?? meeting.field("meetingId")?.stringValue)
        _ = try await run(.meetAccept(meetingId: meetingId), as: bobAuth, bob)
        _ = try await run(.meetCancel(meetingId: meetingId), as: aliceAuth, alice)
        _ = try await run(.msgSend(to: "bob", text: "home soon"), as: aliceAuth, alice)
        let shareId = try XCTUnwrap(share.field("share")?["shareId"]?.stringValue)
        _ = try await run(.shareRevoke(shareId: shareId), as: aliceAuth, alice)
        _ = try await run(.sessionEnd(sessionId: id), as: aliceAuth, alice)
        _ = try await run(.friendRemove(username: "carol"), as: aliceAuth, alice)
        _ = try await run(.logout, as: carolAuth, carol)
        XCTAssertEqual(loadsBefore(), loads, "every commit was applied, none reloaded (the only loads are the comparisons')")
    }

    /// A token's use is stored without a notice (at most once a minute): the other relay's cache still
    /// has its older use, and must look in the store before it calls the token expired.
    func testATokenUsedOnAnotherRelayIsNotExpiredHere() async throws {
        let pair = try await pair()
        let day: Int64 = 24 * 3600 * 1000
        pair.harness.clock.advance(by: 29 * day)
        _ = try await pair.harness.connect("bob") // relay A stores the use
        XCTAssertTrue(pair.aBus.notices.isEmpty, "a token's use tells no other relay")
        pair.harness.clock.advance(by: 2 * day)
        let loads = pair.store.loads
        let slices = pair.store.slices.count
        let (bob, _) = try await pair.connectToOther("bob")
        XCTAssertEqual(Array(pair.store.slices.dropFirst(slices)), [["bob"]], "its cache held the token as expired: it read bob's part back first")
        XCTAssertEqual(pair.store.loads, loads, "and nobody else's")
        XCTAssertTrue(bob.closes.isEmpty)

        // An expired token retried reloads at most once a minute.
        pair.harness.clock.advance(by: 31 * day)
        for _ in 0..<3 {
            let sink = RecordingSink("bob")
            let result = await withCheckedContinuation { continuation in
                pair.other.serve(.hello(token: pair.harness.tokens["bob"]!), auth: nil, peer: "test", sink: sink) { continuation.resume(returning: $0) }
            }
            XCTAssertThrowsError(try result.get())
        }
        XCTAssertEqual(pair.store.slices.count, slices + 2)
        XCTAssertEqual(pair.store.loads, loads)
    }

    /// A token issued on relay A a moment ago, its notice not here (lost): the other relay finds its user in the
    /// store and reads back that user's part of the cache alone.
    func testATokenIssuedOnAnotherRelayReadsBackOnlyItsUsersSlice() async throws {
        let pair = try await pair()
        let registered = try await pair.harness.serve(.register(username: "dave", password: "a long enough password", name: nil),
                                                      as: nil, sink: RecordingSink("dave")).get()
        let token = try XCTUnwrap(registered.field("token")?.stringValue)
        pair.aBus.clear()
        let loads = pair.store.loads
        let slices = pair.store.slices.count
        let result = await withCheckedContinuation { continuation in
            pair.other.serve(.hello(token: token), auth: nil, peer: "test", sink: RecordingSink("dave")) { continuation.resume(returning: $0) }
        }
        guard case .authenticated(let auth) = try result.get().auth else { return XCTFail("dave's token was refused") }
        XCTAssertEqual(auth.username, "dave")
        XCTAssertEqual(Array(pair.store.slices.dropFirst(slices)), [["dave"]])
        XCTAssertEqual(pair.store.loads, loads, "no whole reload")
    }

    /// Carol's friend request to bob is committed on relay A and its notice lost; bob's next request on the other
    /// relay (no bus barrier to trust) finds bob's version ahead in the store and reads back his part of the cache
    /// alone, which holds the request on both sides: the cache is then what a whole reload gives.
    func testAUserBehindTheStoreIsCaughtUpWithTheirSliceAlone() async throws {
        let pair = try await pair()
        let (bob, bobAuth) = try await pair.connectToOther("bob")
        let (carol, carolAuth) = try await pair.harness.connect("carol")
        await pair.forwardNotices()
        _ = try await pair.harness.ok(.friendRequest(username: "bob"), as: carolAuth, sink: carol)
        pair.aBus.clear()
        let loads = pair.store.loads
        let slices = pair.store.slices.count
        let result = await withCheckedContinuation { continuation in
            pair.other.serve(.friendList, auth: bobAuth, peer: "test", sink: bob) { continuation.resume(returning: $0) }
        }
        XCTAssertNoThrow(try result.get())
        let incoming = await pair.other.state.incoming["bob"]
        XCTAssertEqual(incoming, ["carol"], "the request was decided on the caught-up cache")
        XCTAssertEqual(Array(pair.store.slices.dropFirst(slices)), [["bob"]])
        XCTAssertEqual(pair.store.loads, loads, "no whole reload")
        let caches = try await pair.caches()
        XCTAssertEqual(caches.applied, caches.reloaded)
    }

    func testAGapThatDoesNotFillMakesTheOtherRelayReloadAndThenDeliver() async throws {
        let pair = try await pair()
        let (bob, _) = try await pair.connectToOther("bob")
        let (alice, aliceAuth) = try await pair.harness.connect("alice")
        pair.store.skipAVersion(of: "alice")
        _ = try await pair.harness.ok(.sessionStart(SessionOptions(invite: ["bob"])), as: aliceAuth, sink: alice)
        let loads = pair.store.loads
        await pair.forwardNotices()
        XCTAssertEqual(pair.store.loads, loads, "held while the commit before it may still come")
        XCTAssertEqual(bob.events("session.invite").count, 0, "its event waits with it")

        // No notice fills the gap: after the hold limit the relay reloads, then delivers.
        let deadline = Date().addingTimeInterval(5)
        while bob.events("session.invite").isEmpty, Date() < deadline {
            try await Task.sleep(for: .milliseconds(10))
            await pair.other.drain()
        }
        XCTAssertEqual(bob.events("session.invite").count, 1)
        XCTAssertEqual(pair.store.loads, loads + 1)
        let caches = try await pair.caches()
        XCTAssertEqual(caches.applied, caches.reloaded)
    }

    /// Carol, on relay A, sends bob, on the other relay (which has heard A's heartbeat), a friend request; A
    /// commits it and its notice is lost (taken off A's bus, returned here), as when A dies before it publishes.
    private func friendRequestWhoseNoticeIsLost() async throws -> (Pair, RecordingSink, [ChangeNotice]) {
        let pair = try await pair()
        let (bob, _) = try await pair.connectToOther("bob")
        let (carol, carolAuth) = try await pair.harness.connect("carol")
        pair.other.remotePresence(.heartbeat(PresenceHeartbeat(node: pair.harness.relay.node, epoch: "e", seq: 0)))
        await pair.forwardNotices()
        _ = try await pair.harness.ok(.friendRequest(username: "bob"), as: carolAuth, sink: carol)
        let lost = pair.aBus.notices
        pair.aBus.clear()
        return (pair, bob, lost)
    }

    /// Relay A commits carol's friend request and dies before its notice goes out: the other relay hears
    /// nothing but A's silence. Once A misses its heartbeat, the other relay reads the store and sends bob, who is
    /// connected to it, the request he would otherwise see only at his next sign-in; the notice coming late after
    /// all (A was only slow) shows it no second time.
    func testARelaySilentAfterACommitWhoseNoticeIsLostStillReachesItsRecipients() async throws {
        let (pair, bob, lost) = try await friendRequestWhoseNoticeIsLost()
        XCTAssertFalse(lost.isEmpty)
        XCTAssertEqual(bob.events("friend.request").count, 0, "nothing reached the other relay")

        // A heartbeat missed: the other relay's next presence check finds A silent, and submits the catch-up
        // (so the second drain waits for it).
        pair.harness.clock.advance(by: PresenceMessage.silence + 1)
        pair.other.submit(.presenceCheck)
        await pair.other.drain()
        await pair.other.drain()
        XCTAssertEqual(bob.events("friend.request").map { $0["from"]?["username"] }, [.string("carol")])

        for notice in lost { pair.other.remoteChanges(notice) }
        await pair.other.drain()
        XCTAssertEqual(bob.events("friend.request").count, 1, "the late notice repeats nothing")
    }

    /// What a catch-up sent is kept to drop replayed notices for the replay window only, not for the relay's life:
    /// a notice after the window finds it gone (and a long-lived cluster does not collect every catch-up).
    func testWhatACatchUpSentIsForgottenOnceTheReplayWindowPasses() async throws {
        let (pair, bob, _) = try await friendRequestWhoseNoticeIsLost()
        pair.harness.clock.advance(by: PresenceMessage.silence + 1)
        pair.other.submit(.presenceCheck)
        await pair.other.drain()
        await pair.other.drain()
        XCTAssertEqual(bob.events("friend.request").count, 1)
        let kept = await pair.other.cluster.caughtUp["bob"]?.count
        XCTAssertEqual(kept, 1, "within the window, the catch-up's request is kept to drop its replay")

        pair.harness.clock.advance(by: Relay.replayWindow)
        let repeated = await pair.other.alreadyCaughtUp("bob", with: .string("anything"))
        XCTAssertFalse(repeated)
        let left = await pair.other.cluster.caughtUp.isEmpty
        XCTAssertTrue(left, "past the window nothing of the catch-up is kept")
    }

    /// Relay A commits carol's friend request and dies before its notice goes out; the other relay takes A's
    /// timer shards before it finds A silent. Taking them reads the store, and bob, connected to it, gets the
    /// request then: the read does not take it in unseen, leaving the catch-up after A's silence nothing to send.
    func testTakingTheTimerShardsOfARelayThatDiedAfterACommitSendsWhatItsNoticeWouldHave() async throws {
        let (pair, bob, lost) = try await friendRequestWhoseNoticeIsLost()
        XCTAssertEqual(bob.events("friend.request").count, 0, "nothing reached the other relay")

        await pair.other.setTimerShards(.all)
        await pair.other.drain()
        XCTAssertEqual(bob.events("friend.request").map { $0["from"]?["username"] }, [.string("carol")])

        pair.harness.clock.advance(by: PresenceMessage.silence + 1)
        pair.other.submit(.presenceCheck)
        await pair.other.drain()
        await pair.other.drain()
        for notice in lost { pair.other.remoteChanges(notice) }
        await pair.other.drain()
        XCTAssertEqual(bob.events("friend.request").count, 1, "neither the catch-up after A's silence nor the late notice repeats it")
    }

    func testANoticeThatCannotBeReadMakesTheOtherRelayReload() async throws {
        let pair = try await pair()
        let (alice, aliceAuth) = try await pair.harness.connect("alice")
        _ = try await pair.harness.ok(.alarmContacts(usernames: ["bob"]), as: aliceAuth, sink: alice)
        pair.aBus.clear() // lost: only an unreadable notice arrives
        let loads = pair.store.loads
        pair.other.remoteChanges(.unreadable)
        await pair.other.drain()
        XCTAssertEqual(pair.store.loads, loads + 1)
        let contacts = await pair.other.state.contacts["alice"]
        XCTAssertEqual(contacts, ["bob"])
    }

    func testANoticeFromARelayOfAnotherVersionMakesTheOtherRelayReload() async throws {
        let pair = try await pair()
        let (alice, aliceAuth) = try await pair.harness.connect("alice")
        _ = try await pair.harness.ok(.alarmContacts(usernames: ["carol"]), as: aliceAuth, sink: alice)
        var notices = pair.aBus.notices
        pair.aBus.clear()
        for index in notices.indices { notices[index].commits = nil }
        let loads = pair.store.loads
        for notice in notices { pair.other.remoteChanges(notice) }
        await pair.other.drain()
        XCTAssertEqual(pair.store.loads, loads + 1)
        let contacts = await pair.other.state.contacts["alice"]
        XCTAssertEqual(contacts, ["carol"])
    }
}
