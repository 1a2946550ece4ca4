import HomewardCore
import HomewardProtocol
import XCTest

/// A connection that only has an identity.
private final class DummySink: ClientSink {
    let label: String
    init(_ label: String) { self.label = label }
    func send(_ message: EncodedMessage) {}
    func close(_ code: CloseCode, reason: String) {}
}

final class PresenceTableTests: XCTestCase {
    private let now = CoreFixture.now

    private func labels(_ sinks: [any ClientSink]) -> [String] {
        sinks.compactMap { ($0 as? DummySink)?.label }.sorted()
    }

    func testAttachReportsOnlyTheFirstConnection() {
        let table = PresenceTable()
        let phone = DummySink("phone"), laptop = DummySink("laptop")
        XCTAssertFalse(table.isOnline("alice"))
        XCTAssertTrue(table.attach("alice", phone, now: now))
        XCTAssertFalse(table.attach("alice", laptop, now: now + 1))
        XCTAssertFalse(table.attach("alice", phone, now: now + 2), "attaching the same sink again is not a first")
        XCTAssertEqual(table.connectionCount(of: "alice"), 2)
        XCTAssertTrue(table.isOnline("alice"))
    }

    /// What a relay subscribes to on a shared bus: senders some local connection receives, reported once
    /// when that starts and once when it ends; a change undone before it was taken is not reported.
    func testInterestFollowsWhetherAnyLocalConnectionReceivesASender() {
        let table = PresenceTable()
        let phone = DummySink("phone")
        table.setAudience(of: "alice", to: ["bob"])
        XCTAssertTrue(table.takeInterestChanges() == ([], []), "bob is not connected here")
        _ = table.attach("bob", phone, now: now)
        XCTAssertTrue(table.takeInterestChanges() == (["alice"], []))
        XCTAssertEqual(labels(table.remoteAudience(of: "alice")), ["phone"])
        _ = table.detach("bob", phone, now: now)
        _ = table.attach("bob", phone, now: now)
        XCTAssertTrue(table.takeInterestChanges() == ([], []), "gone and back before anyone asked")
        table.setAudience(of: "alice", to: [])
        XCTAssertTrue(table.takeInterestChanges() == ([], ["alice"]))
    }

    /// Connections to other relays count as online; the change of "online anywhere" is reported.
    func testConnectionsOnOtherRelaysCountAsOnline() {
        let table = PresenceTable()
        let phone = DummySink("phone")
        XCTAssertTrue(table.setRemote("alice", node: "b", connected: true, now: now))
        XCTAssertTrue(table.isOnline("alice") && table.isOnlineElsewhere("alice"))
        XCTAssertFalse(table.setRemote("alice", node: "c", connected: true, now: now), "already online")
        _ = table.attach("alice", phone, now: now)
        XCTAssertFalse(table.setRemote("alice", node: "b", connected: false, now: now))
        XCTAssertFalse(table.setRemote("alice", node: "c", connected: false, now: now), "still connected here")
        XCTAssertEqual(table.onlineUserCount, 1, "the count is of this relay's users")
        XCTAssertEqual(table.localUsers(), ["alice"])
        _ = table.detach("alice", phone, now: now + 5)
        XCTAssertTrue(table.setRemote("alice", node: "d", connected: true, now: now + 6))
        XCTAssertTrue(table.setRemote("alice", node: "d", connected: false, now: now + 9, lastSeen: now + 7))
        XCTAssertEqual(table.lastSeen("alice"), now + 7)
        XCTAssertEqual(table.localUsers(), [])
    }

    func testDetachReportsOnlyTheLastConnection() {
        let table = PresenceTable()
        let phone = DummySink("phone"), laptop = DummySink("laptop")
        _ = table.attach("alice", phone, now: now)
        _ = table.attach("alice", laptop, now: now)
        XCTAssertFalse(table.detach("alice", phone, now: now + 1))
        XCTAssertTrue(table.isOnline("alice"))
        XCTAssertTrue(table.detach("alice", laptop, now: now + 2))
        XCTAssertFalse(table.isOnline("alice"))
        XCTAssertEqual(table.connectionCount(of: "alice"), 0)
        XCTAssertFalse(table.detach("alice", laptop, now: now + 3), "a sink detached twice is not a last again")
    }

    func testDetachOfUnknownSinkOrUserIsNotLast() {
        let table = PresenceTable()
        let phone = DummySink("phone")
        XCTAssertFalse(table.detach("alice", phone, now: now))
        _ = table.attach("alice", phone, now: now)
        XCTAssertFalse(table.detach("alice", DummySink("other"), now: now))
        XCTAssertFalse(table.detach("bob", phone, now: now))
        XCTAssertTrue(table.isOnline("alice"))
    }

    func testFirstAgainAfterAllDetached() {
        let table = PresenceTable()
        let phone = DummySink("phone")
        XCTAssertTrue(table.attach("alice", phone, now: now))
        XCTAssertTrue(table.detach("alice", phone, now: now + 1))
        XCTAssertTrue(table.attach("alice", phone, now: now + 2))
    }

    func testLastSeenFollowsAttachDetachAndPositions() {
        let table = PresenceTable()
        let phone = DummySink("phone")
        XCTAssertNil(table.lastSeen("alice"))
        _ = table.attach("alice", phone, now: now)
        XCTAssertEqual(table.lastSeen("alice"), now)
        _ = table.fanout(Position(lat: 1, lon: 2, ts: now), from: "alice", now: now + 5)
        XCTAssertEqual(table.lastSeen("alice"), now + 5)
        _ = table.detach("alice", phone, now: now + 10)
        XCTAssertEqual(table.lastSeen("alice"), now + 10)
        XCTAssertFalse(table.isOnline("alice"))
    }

    func testSeedLastSeen() {
        let table = PresenceTable()
        table.seedLastSeen(["bob": 42])
        XCTAssertEqual(table.lastSeen("bob"), 42)
        XCTAssertFalse(table.isOnline("bob"))
    }

    func testOnlineUserCountCountsUsersNotConnections() {
        let table = PresenceTable()
        _ = table.attach("alice", DummySink("a1"), now: now)
        _ = table.attach("alice", DummySink("a2"), now: now)
        let bob = DummySink("b1")
        _ = table.attach("bob", bob, now: now)
        table.seedLastSeen(["carol": 1])
        XCTAssertEqual(table.onlineUserCount, 2)
        _ = table.detach("bob", bob, now: now)
        XCTAssertEqual(table.onlineUserCount, 1)
        // Detaching what is not attached, or twice, changes nothing.
        _ = table.detach("bob", bob, now: now)
        _ = table.detach("carol", DummySink("c1"), now: now)
        XCTAssertEqual(table.onlineUserCount, 1)
        _ = table.attach("bob", bob, now: now)
        XCTAssertEqual(table.onlineUserCount, 2)
    }

    func testRecordReturnsSinksOfAudienceMembersOnly() {
        let table = PresenceTable()
        let alice = DummySink("alice"), bob = DummySink("bob"), carol = DummySink("carol")
        _ = table.attach("alice", alice, now: now)
        _ = table.attach("bob", bob, now: now)
        _ = table.attach("carol", carol, now: now)
        table.setAudience(of: "alice", to: ["bob"])

        let position = Position(lat: 57.7, lon: 11.9, acc: 5, ts: now)
        let sinks = table.fanout(position, from: "alice", now: now + 1).sinks
        XCTAssertEqual(labels(sinks), ["bob"], "neither the sender nor a non-member receives it")
        XCTAssertEqual(sinks.count, 1)
        XCTAssertEqual(table.lastPosition("alice"), position)
    }

    func testRecordReachesEveryDeviceOfEachMember() {
        let table = PresenceTable()
        _ = table.attach("alice", DummySink("alice-phone"), now: now)
        _ = table.attach("alice", DummySink("alice-laptop"), now: now)
        _ = table.attach("bob", DummySink("bob-phone"), now: now)
        _ = table.attach("bob", DummySink("bob-tablet"), now: now)
        _ = table.attach("carol", DummySink("carol-phone"), now: now)
        table.setAudience(of: "alice", to: ["bob", "carol"])

        let sinks = table.fanout(Position(lat: 0, lon: 0, ts: now), from: "alice", now: now).sinks
        XCTAssertEqual(labels(sinks), ["bob-phone", "bob-tablet", "carol-phone"])
    }

    func testRecordSkipsOfflineMembersAndFollowsAudienceChanges() {
        let table = PresenceTable()
        let bob = DummySink("bob")
        _ = table.attach("alice", DummySink("alice"), now: now)
        _ = table.attach("bob", bob, now: now)
        table.setAudience(of: "alice", to: ["bob", "carol"])  // carol is offline
        XCTAssertEqual(labels(table.fanout(Position(lat: 0, lon: 0, ts: now), from: "alice", now: now).sinks), ["bob"])

        _ = table.detach("bob", bob, now: now)
        XCTAssertTrue(table.fanout(Position(lat: 0, lon: 0, ts: now), from: "alice", now: now).sinks.isEmpty)

        _ = table.attach("bob", bob, now: now)
        table.setAudience(of: "alice", to: [])
        XCTAssertTrue(table.fanout(Position(lat: 0, lon: 0, ts: now), from: "alice", now: now).sinks.isEmpty)
    }

    func testLastPositionIsTheNewest() {
        let table = PresenceTable()
        _ = table.attach("alice", DummySink("alice"), now: now)
        XCTAssertNil(table.lastPosition("alice"))
        _ = table.fanout(Position(lat: 1, lon: 1, ts: now), from: "alice", now: now)
        _ = table.fanout(Position(lat: 2, lon: 2, ts: now + 1), from: "alice", now: now + 1)
        XCTAssertEqual(table.lastPosition("alice"), Position(lat: 2, lon: 2, ts: now + 1))
    }

    func testSinksOfListsEveryConnection() {
        let table = PresenceTable()
        _ = table.attach("alice", DummySink("p"), now: now)
        _ = table.attach("alice", DummySink("q"), now: now)
        XCTAssertEqual(labels(table.sinks(of: "alice")), ["p", "q"])
        XCTAssertTrue(table.sinks(of: "bob").isEmpty)
    }

    func testMembersWhoComeOnlineLaterReceiveWithoutAnAudienceChange() {
        let table = PresenceTable()
        _ = table.attach("alice", DummySink("alice"), now: now)
        table.setAudience(of: "alice", to: ["bob", "carol"])
        XCTAssertTrue(table.fanout(Position(lat: 0, lon: 0, ts: now), from: "alice", now: now).sinks.isEmpty)
        _ = table.attach("carol", DummySink("carol-phone"), now: now)
        _ = table.attach("bob", DummySink("bob-phone"), now: now)
        XCTAssertEqual(labels(table.fanout(Position(lat: 0, lon: 0, ts: now), from: "alice", now: now).sinks), ["bob-phone", "carol-phone"])
    }

    func testOneMemberInSeveralAudiencesFollowsEachAndLeavesWhenRemoved() {
        let table = PresenceTable()
        let bob = DummySink("bob")
        table.setAudience(of: "alice", to: ["bob"])
        table.setAudience(of: "dave", to: ["bob"])
        _ = table.attach("bob", bob, now: now)
        _ = table.attach("alice", DummySink("alice"), now: now)
        _ = table.attach("dave", DummySink("dave"), now: now)
        XCTAssertEqual(labels(table.fanout(Position(lat: 0, lon: 0, ts: now), from: "alice", now: now).sinks), ["bob"])
        XCTAssertEqual(labels(table.fanout(Position(lat: 0, lon: 0, ts: now), from: "dave", now: now).sinks), ["bob"])
        table.setAudience(of: "alice", to: [])
        _ = table.detach("bob", bob, now: now)
        _ = table.attach("bob", bob, now: now)
        XCTAssertTrue(table.fanout(Position(lat: 0, lon: 0, ts: now), from: "alice", now: now).sinks.isEmpty,
                      "bob's reconnect does not bring him back into an audience he left")
        XCTAssertEqual(labels(table.fanout(Position(lat: 0, lon: 0, ts: now), from: "dave", now: now).sinks), ["bob"])
    }

    func testAudiencesSpanShards() {
        // With one shard per user at most, every member lives in a different shard than the sender.
        let table = PresenceTable(shardCount: 64)
        let members = (0..<40).map { "member\($0)" }
        for member in members { _ = table.attach(member, DummySink(member), now: now) }
        _ = table.attach("alice", DummySink("alice"), now: now)
        table.setAudience(of: "alice", to: Set(members))
        XCTAssertEqual(labels(table.fanout(Position(lat: 0, lon: 0, ts: now), from: "alice", now: now).sinks), members.sorted())
    }
}
