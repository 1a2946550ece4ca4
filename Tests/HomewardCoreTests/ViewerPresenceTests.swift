import HomewardCore
import HomewardProtocol
import XCTest

/// Share-link viewers in the presence table: reached by the owner's fan-out like observers, but not users.
final class ViewerPresenceTests: XCTestCase {
    private final class Viewer: ClientSink {
        func send(_ message: EncodedMessage) {}
        func close(_ code: CloseCode, reason: String) {}
    }

    private let now = CoreFixture.now
    private let key = "share:sh_1"

    func testAViewerInTheAudienceGetsTheOwnersPositionsAndIsNotCountedOnline() {
        let table = PresenceTable()
        _ = table.attach("alice", Viewer(), now: now)
        table.setAudience(of: "alice", to: [key])
        let viewer = Viewer()
        table.attachViewer(key, viewer)
        XCTAssertEqual(table.onlineUserCount, 1, "a viewer is not a user online")
        XCTAssertNil(table.lastSeen(key), "and has no last-seen time")
        let sinks = table.fanout(Position(lat: 1, lon: 2, ts: now), from: "alice", now: now).sinks
        XCTAssertEqual(sinks.map { ObjectIdentifier($0) }, [ObjectIdentifier(viewer)])
        XCTAssertEqual(table.connectionCount(of: key), 1)

        table.detachViewer(key, viewer)
        XCTAssertTrue(table.fanout(Position(lat: 1, lon: 2, ts: now), from: "alice", now: now).sinks.isEmpty)
        XCTAssertEqual(table.onlineUserCount, 1)
    }

    func testAViewerAttachedBeforeTheAudienceChangeGetsPositionsUntilTheLinkLeavesIt() {
        let table = PresenceTable()
        let viewer = Viewer()
        table.attachViewer(key, viewer)
        _ = table.attach("alice", Viewer(), now: now)
        XCTAssertTrue(table.fanout(Position(lat: 1, lon: 2, ts: now), from: "alice", now: now).sinks.isEmpty,
                      "not in alice's audience yet")
        table.setAudience(of: "alice", to: [key])
        XCTAssertEqual(table.fanout(Position(lat: 1, lon: 2, ts: now), from: "alice", now: now).sinks.count, 1)
        table.setAudience(of: "alice", to: [])
        XCTAssertTrue(table.fanout(Position(lat: 1, lon: 2, ts: now), from: "alice", now: now).sinks.isEmpty,
                      "a revoked or expired link leaves the audience")
    }
}
