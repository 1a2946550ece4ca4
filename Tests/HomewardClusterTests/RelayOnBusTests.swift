import Foundation
import HomewardCore
import HomewardCoreTestSupport
import HomewardProtocol
import HomewardStorage
import Synchronization
import XCTest

/// A bus that records what the relay sends it, in order.
final class RecordingBus: RelayBus {
    enum Call: Equatable {
        case position(from: String, text: String, restriction: PositionRestriction?)
        case interest(adding: Set<String>, removing: Set<String>)
        case notice(ChangeNotice)
        case presence(PresenceMessage)
        case snapshotRequest(node: String)
        case flush
    }

    private let log = Mutex<[Call]>([])
    var calls: [Call] { log.withLock { $0 } }
    var isShared: Bool { true }

    func start(delivering receiver: any BusReceiver) async throws {}
    func publishPosition(_ message: EncodedMessage, of walker: String, restriction: PositionRestriction?) {
        log.withLock { $0.append(.position(from: walker, text: String(buffer: message.bytes), restriction: restriction)) }
    }
    func updateInterest(adding: Set<String>, removing: Set<String>) async {
        log.withLock { $0.append(.interest(adding: adding, removing: removing)) }
    }
    func publishChanges(_ notice: ChangeNotice) { log.withLock { $0.append(.notice(notice)) } }
    /// What `lastPosition(of:for:)` answers (none by default), and whom it was asked for.
    let lastPositionAnswer = Mutex<LastPositionAnswer?>(nil)
    let lastPositionAskers = Mutex<[[String]]>([])
    func lastPosition(of walker: String, for askers: [String]) async -> LastPositionAnswer? {
        lastPositionAskers.withLock { $0.append(askers) }
        return lastPositionAnswer.withLock { $0 }
    }
    func publishPresence(_ message: PresenceMessage) { log.withLock { $0.append(.presence(message)) } }
    func requestPresenceSnapshot(of node: String) { log.withLock { $0.append(.snapshotRequest(node: node)) } }
    func flush() async {
        log.withLock { $0.append(.flush) }
        await withCheckedContinuation { continuation in
            let pass = flushGate.withLock { gate in
                guard gate.held else { return true }
                gate.waiting.append(continuation)
                return false
            }
            if pass { continuation.resume() }
        }
    }
    /// While held, a flush (a notice's confirmation) waits until `releaseFlushes`.
    private let flushGate = Mutex((held: false, waiting: [CheckedContinuation<Void, Never>]()))
    func holdFlushes() { flushGate.withLock { $0.held = true } }
    func releaseFlushes() {
        let waiting = flushGate.withLock { gate in
            gate.held = false
            defer { gate.waiting.removeAll() }
            return gate.waiting
        }
        for continuation in waiting { continuation.resume() }
    }
    /// Confirms nothing: the relay asks its store instead.
    func barrier() async -> Int? { nil }
    var generation: Int? { nil }
    func stop() async {}

    var positions: [String] { calls.compactMap { if case .position(_, let text, _) = $0 { text } else { nil } } }
    var restrictions: [PositionRestriction?] { calls.compactMap { if case .position(_, _, let restriction) = $0 { restriction } else { nil } } }
    var notices: [ChangeNotice] { calls.compactMap { if case .notice(let notice) = $0 { notice } else { nil } } }
    func clear() { log.withLock { $0.removeAll() } }
}

/// The relay as one of several, driven directly (manual clock, SQLite file) with a recording bus: what it
/// sends the others, and what it does with what they send.
final class RelayOnBusTests: XCTestCase {
    private func harness(ownsTimers: Bool = true, safety: SafetySettings = SafetySettings()) async throws -> (SafetyHarness, RecordingBus) {
        let bus = RecordingBus()
        let harness = try await SafetyHarness(users: ["alice", "bob", "carol"], friends: [("alice", "bob"), ("alice", "carol")],
                                              safety: safety, bus: bus, ownsTimers: ownsTimers)
        return (harness, bus)
    }

    func testAPositionIsPublishedOnceOnlyWhileTheWalkerHasAnAudience() async throws {
        let (harness, bus) = try await harness()
        let (alice, aliceAuth) = try await harness.connect("alice")
        let (bob, bobAuth) = try await harness.connect("bob")
        let position = Position(lat: 57.7, lon: 11.9, ts: harness.clock.now)
        harness.relay.publish(position, from: "alice")
        XCTAssertEqual(bus.positions, [], "nobody receives alice: nothing goes on the bus")

        let started = try await harness.ok(.sessionStart(SessionOptions(invite: ["bob"])), as: aliceAuth, sink: alice)
        let id = try XCTUnwrap(started.field("session")?["sessionId"]?.stringValue)
        bus.clear()
        _ = try await harness.ok(.sessionAccept(sessionId: id), as: bobAuth, sink: bob)
        // bob, here, now receives alice: the bus subscribes before alice hears of the accept (the accept's
        // commit went out before, confirmed, as every commit does before its reply).
        let calls = bus.calls
        let interest = try XCTUnwrap(calls.firstIndex(of: .interest(adding: ["alice"], removing: [])), "\(calls)")
        let accepted = try XCTUnwrap(calls.firstIndex { if case .notice(let notice) = $0 { !notice.events.isEmpty } else { false } }, "\(calls)")
        XCTAssertLessThan(interest, accepted)

        harness.relay.publish(position, from: "alice")
        XCTAssertEqual(bus.positions.count, 1, "published once, however many receive it")
        XCTAssertEqual(bus.positions.first, String(buffer: try XCTUnwrap(bob.messages.last.map { JSONWriter.encode($0) })))
        _ = alice
    }

    /// A commit's notice is published and confirmed by the bus (`flush`) before the reply, so that another relay's
    /// barrier finds it; it carries the events the commit caused, so the other relays apply the commit and deliver
    /// its events from one message, and no second notice follows.
    func testEveryCommitIsConfirmedOnTheBusWithItsEventsAndARefusalTellsNothing() async throws {
        let (harness, bus) = try await harness()
        let (alice, aliceAuth) = try await harness.connect("alice")
        bus.clear()
        _ = try await harness.ok(.alarmRaise(Request.AlarmRaise(text: "help")), as: aliceAuth, sink: alice)
        let told = bus.calls.filter { if case .notice = $0 { true } else { $0 == .flush } }
        guard told.count == 2, case .notice(let notice) = told[0], told[1] == .flush else {
            return XCTFail("expected one notice of the commit and its events, then a flush: \(told)")
        }
        XCTAssertEqual(notice.commits?.count, 1, "the alarm's commit")
        XCTAssertEqual(notice.node, "here")
        let event = try XCTUnwrap(notice.events.first)
        XCTAssertEqual(event.message["type"], "alarm")
        XCTAssertEqual(Set(event.recipients), ["bob", "carol"], "one event, encoded once, for both recipients")

        bus.clear()
        let refused = await harness.serve(.friendRequest(username: "nobody"), as: aliceAuth, sink: alice)
        guard case .failure(.notFound) = refused else { return XCTFail("expected not_found, got \(refused)") }
        XCTAssertEqual(bus.notices, [], "nothing stored, nothing to tell")
    }

    /// Another relay's notice: this relay reloads from the store first, then delivers the events, so the
    /// recipient's next request already sees the change.
    func testANoticeReloadsFromTheStoreBeforeItsEventsAreDelivered() async throws {
        let (harness, _) = try await harness()
        let (bob, bobAuth) = try await harness.connect("bob")
        // carol asks bob on another relay: it is in the database, this relay's cache does not know it.
        let other = try SQLiteStore(path: harness.databasePath)
        try await other.apply([.addFriendRequest(from: "carol", to: "bob", at: harness.clock.now)])
        let event = Event.friendRequest(from: UserInfo(username: "carol", name: "Carol")).json
        harness.relay.remoteChanges(ChangeNotice(node: "there", events: [.init(recipients: ["bob"], message: event)]))
        await harness.relay.drain()
        XCTAssertEqual(bob.events("friend.request").last?["from"]?["username"], "carol")
        _ = try await harness.ok(.friendAccept(username: "carol"), as: bobAuth, sink: bob)

        // Its own notices come back to no relay (echo is off), but one that did would change nothing.
        bob.clear()
        harness.relay.remoteChanges(ChangeNotice(node: "here", events: [.init(recipients: ["bob"], message: event)]))
        await harness.relay.drain()
        XCTAssertEqual(bob.events("friend.request"), [])
    }

    func testUsersOnOtherRelaysAreOnlineAndTheirFriendsHearOfIt() async throws {
        let (harness, _) = try await harness()
        let (alice, aliceAuth) = try await harness.connect("alice")
        harness.relay.remotePresence(.delta(PresenceDelta(node: "there", epoch: "e", seq: 1, joined: ["bob"])))
        await harness.relay.drain()
        XCTAssertTrue(harness.relay.presence.isOnline("bob"))
        XCTAssertEqual(alice.events("presence").last?["online"], true)

        harness.relay.remotePresence(.delta(PresenceDelta(node: "there", epoch: "e", seq: 2, joined: ["bob"])))
        harness.relay.remotePresence(.delta(PresenceDelta(node: "there", epoch: "e", seq: 3, left: ["bob": 1234])))
        await harness.relay.drain()
        XCTAssertFalse(harness.relay.presence.isOnline("bob"))
        XCTAssertEqual(alice.events("presence").count, 2, "a repeated online changes nothing")
        XCTAssertEqual(alice.events("presence").last?["online"], false)
        XCTAssertEqual(alice.events("presence").last?["lastSeen"], 1234)
        let list = try await harness.ok(.friendList, as: aliceAuth, sink: alice)
        let bob = list.field("friends")?.arrayValue?.first { $0["username"] == "bob" }
        XCTAssertEqual(bob?["online"], false)
    }

    /// alice's and bob's alarms: a relay holding only alice's shard repeats only hers; given bob's shard, it
    /// fires his overdue repeat at once; without alice's, it repeats hers no more.
    func testARelayFiresOnlyTheTimersOfItsShards() async throws {
        var safety = SafetySettings()
        safety.alarmRepeatInterval = 1000
        let (harness, _) = try await harness(ownsTimers: false, safety: safety)
        let aliceShard = TimerShards([TimerShards.shard(of: "alice")])
        let bobShard = TimerShards([TimerShards.shard(of: "bob")])
        XCTAssertNotEqual(aliceShard, bobShard)
        let (alice, aliceAuth) = try await harness.connect("alice")
        let (bob, bobAuth) = try await harness.connect("bob")
        _ = try await harness.ok(.alarmRaise(Request.AlarmRaise(text: "help")), as: aliceAuth, sink: alice)
        _ = try await harness.ok(.alarmRaise(Request.AlarmRaise(text: "me too")), as: bobAuth, sink: bob)
        await harness.advance(by: 5000)
        XCTAssertEqual(bob.events("alarm").count, 1, "no shards: no repeats")
        let firedBefore = await harness.relay.firedTimerShards
        XCTAssertEqual(firedBefore, .none)

        await harness.relay.setTimerShards(aliceShard)
        await harness.relay.drain()
        XCTAssertEqual(bob.events("alarm").last?["repeat"], 1, "alice's overdue repeat fires at once")
        XCTAssertEqual(alice.events("alarm").count, 1, "bob's alarm is not in this relay's shards")
        await harness.advance(by: 1000)
        XCTAssertEqual(bob.events("alarm").last?["repeat"], 2)
        XCTAssertEqual(alice.events("alarm").count, 1)

        await harness.relay.setTimerShards(aliceShard.union(bobShard))
        await harness.relay.drain()
        XCTAssertEqual(alice.events("alarm").last?["repeat"], 1, "the relay taking bob's shard fires his overdue repeat at once")
        XCTAssertEqual(bob.events("alarm").count, 3, "alice's next repeat is not due yet")

        await harness.relay.setTimerShards(bobShard)
        await harness.advance(by: 1000)
        XCTAssertEqual(alice.events("alarm").last?["repeat"], 2)
        XCTAssertEqual(bob.events("alarm").count, 3, "alice's shard was given up: her alarm repeats no more here")
    }
}
