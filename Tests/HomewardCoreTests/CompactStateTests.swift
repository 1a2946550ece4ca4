import HomewardProtocol
import XCTest

@testable import HomewardCore

/// A relay caching connected users keeps a presence entry for every owner and observer of every active session,
/// and every active session, from its start: what one of each costs is multiplied by hundreds of thousands.
final class CompactStateTests: XCTestCase {
    func testAPresenceEntryHoldsNoPositionTrailOrDestinationInline() {
        XCTAssertEqual(MemoryLayout<LastPosition>.size, 8)
        XCTAssertLessThanOrEqual(MemoryLayout<PresenceTable.Entry>.stride, 200, "448 with two positions, a trail and a destination inline")
    }

    /// A presence entry is paid per bucket of its shard's dictionary: 208 bytes a bucket (key and entry) took the
    /// presence table from 37 to 64 MiB when 10,000 users signed in on a store of a million (their friends' last-seen
    /// times each add an entry).
    func testAPresenceEntryKeepsTheRemoteDeliveryAndTheRestrictionOutOfLine() {
        XCTAssertLessThanOrEqual(MemoryLayout<PresenceTable.Entry>.stride, 120,
                                 "192 with the last remotely delivered message and the pause restriction inline")
    }

    func testAPresenceEntryKeepsARemoteDeliveryAndARestrictionItIsGiven() {
        var entry = PresenceTable.Entry()
        XCTAssertNil(entry.deliveredRemotely)
        XCTAssertNil(entry.restriction)
        entry.deliveredRemotely = EncodedMessage(.object([("type", .string("pos"))]), positionFrom: "alice")
        entry.restriction = .allBut(["bob"])
        XCTAssertEqual(entry.deliveredRemotely?.positionFrom, "alice")
        XCTAssertEqual(entry.restriction, .allBut(["bob"]))
        entry.deliveredRemotely = nil
        entry.restriction = nil
        XCTAssertNil(entry.deliveredRemotely)
        XCTAssertNil(entry.restriction)
    }

    func testALastPositionReadsBackWhatItRecorded() {
        let first = Position(lat: 1, lon: 2, ts: 10), second = Position(lat: 3, lon: 4, ts: 20)
        var last = LastPosition()
        XCTAssertTrue(last.isEmpty)
        XCTAssertEqual(last, LastPosition(nil))
        last.record(first, restriction: nil)
        XCTAssertEqual(last, LastPosition(first))
        let copy = last
        last.record(second, restriction: .allBut(["bob"]))
        XCTAssertEqual(copy.latest, first, "a copy keeps what it held")
        XCTAssertEqual(last.latest, second)
        XCTAssertEqual(last.unrestricted, first)
        XCTAssertEqual(last.shown(to: ["bob"]), first)
        XCTAssertEqual(last.shown(to: ["carol"]), second)
        XCTAssertEqual(last, LastPosition(latest: second, restriction: .allBut(["bob"]), unrestricted: first))
    }

    func testAnOutOfLineValueIsSetChangedInPlaceAndCleared() {
        var value = OutOfLine<[Int]>()
        XCTAssertNil(value.value)
        value.value = [1]
        let copy = value
        value.value?.append(2)
        XCTAssertEqual(value.value, [1, 2])
        XCTAssertEqual(copy.value, [1], "a copy keeps what it held")
        value.value = nil
        XCTAssertNil(value.value)
        XCTAssertEqual(OutOfLine([3]), OutOfLine([3]))
        XCTAssertNotEqual(OutOfLine([3]), OutOfLine<[Int]>())
    }

    func testASessionKeepsEachInviteesStateThroughChanges() {
        var session = FollowSession(id: "s1", owner: "alice", note: nil, startedAt: 0)
        session.set(.invited, for: "bob")
        session.set(.accepted, for: "carol")
        session.set(.invited, for: "dave")
        session.set(.accepted, for: "bob")
        XCTAssertEqual(session.invitees, ["bob", "carol", "dave"])
        XCTAssertEqual(session.observers, ["bob", "carol"])
        session.remove("carol")
        session.remove("erin")
        XCTAssertEqual(session.invitees, ["bob", "dave"])
        XCTAssertEqual(session.state(of: "bob"), .accepted)
        XCTAssertEqual(session.state(of: "dave"), .invited)
        XCTAssertNil(session.state(of: "carol"))
        session.set(.declined, for: "dave")
        XCTAssertEqual(session.observers, ["bob"])
        XCTAssertEqual(session.state(of: "dave"), .declined)
    }
}
