import HomewardCore
import HomewardProtocol
import XCTest

/// A connection that only has an identity.
private final class QuietSink: ClientSink {
    func send(_ message: EncodedMessage) {}
    func close(_ code: CloseCode, reason: String) {}
}

/// The walk's trail the relay keeps in memory: bounded in points and age, thinned by distance, each point
/// shown only to whom no pause hid it from when it was sent, and dropped with the session.
final class SessionTrailTests: XCTestCase {
    private let now = CoreFixture.now

    /// About 111 m north of the start per step: never thinned at the default 10 m.
    private func step(_ index: Int, ts: Int64? = nil) -> Position {
        Position(lat: 57.0 + Double(index) * 0.001, lon: 11.0, ts: ts ?? now + Int64(index))
    }

    private func lats(_ points: [Position]) -> [Double] { points.map(\.lat) }

    func testKeepsAtMostMaxPointsDroppingTheOldestFirst() {
        var trail = SessionTrail(sessionId: "s_1", since: now, limits: TrailLimits(maxPoints: 5))
        for index in 0..<12 { trail.record(step(index), restriction: nil, now: now + Int64(index)) }
        XCTAssertEqual(trail.count, 5)
        XCTAssertEqual(trail.points(shownTo: ["bob"], now: now + 12).map(\.ts), (7..<12).map { now + Int64($0) },
                       "the newest five, oldest first")
    }

    func testDropsPointsOlderThanTheAgeLimitByArrival() {
        var trail = SessionTrail(sessionId: "s_1", since: now, limits: TrailLimits(maxAgeMillis: 1000))
        trail.record(step(0), restriction: nil, now: now)
        trail.record(step(1), restriction: nil, now: now + 600)
        XCTAssertEqual(trail.points(shownTo: ["bob"], now: now + 1100).count, 1, "read after the limit: the old one is left out")
        trail.record(step(2), restriction: nil, now: now + 1200)
        XCTAssertEqual(trail.count, 2, "recording drops what is past the limit")
        trail.record(step(3), restriction: nil, now: now + 5000)
        XCTAssertEqual(lats(trail.points(shownTo: ["bob"], now: now + 5000)), [step(3).lat])
        // After the ring emptied and refilled, the order still holds.
        for index in 4..<8 { trail.record(step(index), restriction: nil, now: now + 5000 + Int64(index)) }
        XCTAssertEqual(lats(trail.points(shownTo: ["bob"], now: now + 5010)), (3..<8).map { step($0).lat })
    }

    /// The ring keeps its order when the age limit frees room at the front and the walk then grows past
    /// what it held before.
    func testKeepsOrderWhenItGrowsAfterDroppingOldPoints() {
        var trail = SessionTrail(sessionId: "s_1", since: now, limits: TrailLimits(maxAgeMillis: 100, maxPoints: 10))
        for index in 0..<4 { trail.record(step(index), restriction: nil, now: now + Int64(index) * 40) }
        // At now + 160 the first two (0, 40) are past the limit.
        for index in 4..<9 { trail.record(step(index), restriction: nil, now: now + 160 + Int64(index - 4)) }
        XCTAssertEqual(lats(trail.points(shownTo: ["bob"], now: now + 170)), (2..<9).map { step($0).lat })
    }

    func testThinsPositionsCloserThanTheMinimumDistance() {
        var trail = SessionTrail(sessionId: "s_1", since: now, limits: TrailLimits(minDistanceMetres: 10))
        let start = Position(lat: 57.0, lon: 11.0, ts: now)
        trail.record(start, restriction: nil, now: now)
        // 0.00005° of latitude is about 5.6 m: jitter, not kept.
        trail.record(Position(lat: 57.00005, lon: 11.0, ts: now + 1), restriction: nil, now: now + 1)
        trail.record(Position(lat: 57.0, lon: 11.00005, ts: now + 2), restriction: nil, now: now + 2)
        XCTAssertEqual(trail.count, 1)
        // 0.0002° is about 22 m: kept.
        trail.record(Position(lat: 57.0002, lon: 11.0, ts: now + 3), restriction: nil, now: now + 3)
        XCTAssertEqual(trail.points(shownTo: ["bob"], now: now + 3).map(\.ts), [now, now + 3])
    }

    func testAPointUnderAnotherRestrictionIsKeptHoweverClose() {
        var trail = SessionTrail(sessionId: "s_1", since: now)
        trail.record(step(0), restriction: nil, now: now)
        trail.record(Position(lat: step(0).lat, lon: 11.0, ts: now + 1), restriction: .allBut(["bob"]), now: now + 1)
        XCTAssertEqual(trail.count, 2, "the stretch under a pause is its own point")
    }

    func testEachPointIsShownOnlyToWhomItsPauseDidNotHideItFrom() {
        var trail = SessionTrail(sessionId: "s_1", since: now)
        trail.record(step(0), restriction: nil, now: now)
        trail.record(step(1), restriction: .allBut(["bob"]), now: now + 1)
        trail.record(step(2), restriction: .only(["dave"]), now: now + 2)
        trail.record(step(3), restriction: nil, now: now + 3)
        XCTAssertEqual(lats(trail.points(shownTo: ["bob"], now: now + 3)), [step(0).lat, step(3).lat],
                       "paused from bob, then from everyone: never shown those, also after the pauses ended")
        XCTAssertEqual(lats(trail.points(shownTo: ["carol"], now: now + 3)), [step(0).lat, step(1).lat, step(3).lat])
        XCTAssertEqual(lats(trail.points(shownTo: ["dave"], now: now + 3)), (0..<4).map { step($0).lat },
                       "an alarm recipient got the points sent while paused from everyone")
        XCTAssertEqual(lats(trail.points(shownTo: ["share:sh_1"], now: now + 3)), [step(0).lat, step(1).lat, step(3).lat],
                       "a pause from one friend does not hide from viewers; one from everyone does")
    }

    // MARK: In the presence table

    func testThePresenceTableRecordsTheTrailOfAnActiveSessionWithEachPositionsRestriction() {
        let table = PresenceTable()
        _ = table.attach("alice", QuietSink(), now: now)
        _ = table.fanout(step(0), from: "alice", now: now)
        XCTAssertNil(table.trail(of: "alice", shownTo: ["bob"], now: now), "no session, no trail")

        table.setTrail(of: "alice", sessionId: "s_1", now: now + 1)
        _ = table.fanout(step(1), from: "alice", now: now + 2)
        table.setOwner("alice", true, restriction: .allBut(["bob"]))
        _ = table.fanout(step(2), from: "alice", now: now + 3)
        table.setOwner("alice", true)  // resumed
        _ = table.fanout(step(3), from: "alice", now: now + 4)
        table.setTrail(of: "alice", sessionId: "s_1", now: now + 5)  // the same session again: kept

        let forBob = table.trail(of: "alice", shownTo: ["bob"], now: now + 5)
        XCTAssertEqual(forBob?.sessionId, "s_1")
        XCTAssertEqual(forBob?.since, now + 1)
        XCTAssertEqual(forBob.map { lats($0.points) }, [step(1).lat, step(3).lat])
        XCTAssertEqual(table.trail(of: "alice", shownTo: ["carol"], now: now + 5).map { lats($0.points) },
                       [step(1).lat, step(2).lat, step(3).lat])

        // Another relay asking for carol gets the record with each point's restriction.
        let answer = table.lastPositionAnswer(of: "alice", for: ["carol"])
        XCTAssertEqual(answer?.trail.map { lats($0.points(shownTo: ["bob"], now: now + 5)) }, [step(1).lat, step(3).lat])
    }

    func testTheTrailIsDroppedWhenTheSessionEndsAndANewSessionStartsAfresh() {
        let table = PresenceTable()
        _ = table.attach("alice", QuietSink(), now: now)
        table.setTrail(of: "alice", sessionId: "s_1", now: now)
        _ = table.fanout(step(0), from: "alice", now: now)
        table.setTrail(of: "alice", sessionId: nil, now: now + 1)
        XCTAssertNil(table.trail(of: "alice", shownTo: ["bob"], now: now + 1))
        XCTAssertNil(table.trailRecord(of: "alice"))

        table.setTrail(of: "alice", sessionId: "s_2", now: now + 2)
        XCTAssertEqual(table.trail(of: "alice", shownTo: ["bob"], now: now + 2), TrailInfo(sessionId: "s_2", since: now + 2, points: []))
    }

    func testAPauseFromEveryAskerGivesAnotherRelayNoTrail() {
        let table = PresenceTable()
        _ = table.attach("alice", QuietSink(), now: now)
        table.setTrail(of: "alice", sessionId: "s_1", now: now)
        _ = table.fanout(step(0), from: "alice", now: now)
        table.setOwner("alice", true, restriction: .allBut(["bob"]))
        XCTAssertNil(table.lastPositionAnswer(of: "alice", for: ["bob"])?.trail)
        XCTAssertNotNil(table.lastPositionAnswer(of: "alice", for: ["bob", "carol"])?.trail)
    }

    func testTheWireFormIsCompactAndReadsBack() {
        let info = TrailInfo(sessionId: "s_1", since: now, points: [Position(lat: 57.5, lon: 11.25, ts: now + 1)])
        XCTAssertEqual(info.json["points"], [[57.5, 11.25, .int(now + 1)]])
        XCTAssertEqual(TrailInfo(json: info.json), info)
        XCTAssertEqual(FriendTrailReply(json: .object(FriendTrailReply(username: "alice", trail: info).fields))?.trail, info)
        XCTAssertNil(FriendTrailReply(json: .object(FriendTrailReply(username: "alice", trail: nil).fields))?.trail)
    }
}
