import HomewardCore
import HomewardProtocol
import XCTest

/// A connection that only has an identity.
private final class QuietSink: ClientSink {
    func send(_ message: EncodedMessage) {}
    func close(_ code: CloseCode, reason: String) {}
}

/// A position sent while the walker was paused from someone is never shown to them, during the pause or
/// after it: the last position is kept with the restriction it was sent under (`LastPosition`), and every
/// reply and event that carries a last position asks for the one its receivers may see.
final class PausedPositionsTests: XCTestCase {
    private let now = CoreFixture.now
    private lazy var before = Position(lat: 57.1, lon: 11.1, ts: now - 2000)
    private lazy var duringPause = Position(lat: 57.2, lon: 11.2, ts: now - 1000)

    // MARK: The record

    func testTheNewestPositionIsShownOnlyToWhomItWasNotHiddenFrom() {
        var last = LastPosition()
        XCTAssertNil(last.shown(to: ["bob"]))
        last.record(duringPause, restriction: .allBut(["bob"]))
        XCTAssertNil(last.shown(to: ["bob"]), "nothing unrestricted before it: none, never the hidden one")
        XCTAssertEqual(last.shown(to: ["carol"]), duringPause)

        last.record(before, restriction: nil)
        last.record(duringPause, restriction: .allBut(["bob"]))
        XCTAssertEqual(last.shown(to: ["bob"]), before, "an older one")
        XCTAssertEqual(last.shown(to: ["carol", "bob"]), before, "one event to both suits the more hidden")
        XCTAssertEqual(last.shown(to: ["share:sh_1"]), duringPause, "a pause from one friend does not hide from viewers")
        XCTAssertEqual(last.latest, duringPause, "alarms, which override pauses, still have the newest")

        let paused = Position(lat: 57.3, lon: 11.3, ts: now)
        last.record(paused, restriction: .only(["dave"]))
        XCTAssertEqual(last.shown(to: ["dave"]), paused, "an alarm recipient got it")
        XCTAssertEqual(last.shown(to: ["share:sh_1"]), before)
        XCTAssertEqual(last.shown(to: ["carol"]), before)

        last.record(Position(lat: 57.4, lon: 11.4, ts: now + 1), restriction: nil)
        XCTAssertEqual(last.shown(to: ["bob"])?.lat, 57.4, "after the pause: the newest again")
    }

    func testThePresenceTableRecordsEachPositionUnderTheRestrictionItWentOutWith() {
        let table = PresenceTable()
        _ = table.attach("alice", QuietSink(), now: now)
        _ = table.fanout(before, from: "alice", now: now)
        table.setOwner("alice", true, restriction: .allBut(["bob"]))
        _ = table.fanout(duringPause, from: "alice", now: now)
        table.setOwner("alice", true)  // resumed

        XCTAssertEqual(table.lastPosition(of: "alice", shownTo: ["bob"]), before)
        XCTAssertEqual(table.lastPosition(of: "alice", shownTo: ["carol"]), duringPause)
        XCTAssertEqual(table.lastPosition("alice"), duringPause)
        // Another relay asking for bob gets the record, and shows bob what this relay would.
        let answer = table.lastPositionAnswer(of: "alice", for: ["bob"])
        XCTAssertEqual(answer?.hiddenFrom, [], "no pause now")
        XCTAssertEqual(answer?.last.shown(to: ["bob"]), before)
        XCTAssertEqual(table.lastPositions("alice").shown(to: ["bob"]), before, "what the presence digest carries")

        let elsewhere = PresenceTable()
        elsewhere.setRemotePosition(table.lastPositions("alice"), of: "alice")
        XCTAssertEqual(elsewhere.lastPosition(of: "alice", shownTo: ["bob"]), before)
        XCTAssertEqual(elsewhere.lastPosition(of: "alice", shownTo: ["carol"]), duringPause)
    }

    // MARK: The rules

    /// alice shares with bob and carol at all times; she paused from bob, sent `duringPause`, and resumed.
    private func resumedFromBob() throws -> (RelayState, CoreTestPresence) {
        var state = CoreFixture.state(["alice", "bob", "carol"], friends: [("alice", "bob"), ("alice", "carol")])
        _ = try state.shareAlways("alice", with: ["bob", "carol"])
        var last = LastPosition(before)
        last.record(duringPause, restriction: .allBut(["bob"]))
        return (state, CoreTestPresence(recorded: ["alice": last]))
    }

    func testFriendLocationAfterAPauseShowsNothingSentDuringIt() throws {
        let (state, presence) = try resumedFromBob()
        let forBob = try XCTUnwrap(FriendLocationReply(json: .object(state.friendLocation("bob", "alice", presence: presence, now: now).reply)))
        XCTAssertEqual(forBob.position, before)
        let forCarol = try XCTUnwrap(FriendLocationReply(json: .object(state.friendLocation("carol", "alice", presence: presence, now: now).reply)))
        XCTAssertEqual(forCarol.position, duringPause)
    }

    func testTheAcceptReplyAfterAPauseShowsNothingSentDuringIt() throws {
        var (state, presence) = try resumedFromBob()
        _ = try state.startSession("alice", SessionOptions(invite: ["bob"]), now: now)
        let accepted = try state.acceptSession("bob", "s_1", presence: presence)
        XCTAssertEqual(SessionAcceptReply(json: .object(accepted.reply))?.position, before)
        XCTAssertEqual(accepted.replyPosition?.of, "alice", "read again once the audience changed")
        XCTAssertEqual(accepted.replyPosition?.shownTo, "bob", "as bob may see it")
    }

    /// A pause from everyone hid `duringPause` from viewers: neither the watch reply nor lost contact shows it.
    func testWatchAndLostContactAfterAPauseFromEveryoneShowNothingSentDuringIt() throws {
        var state = CoreFixture.state(["alice", "bob"], friends: [("alice", "bob")])
        _ = try state.startSession("alice", SessionOptions(invite: ["bob"]), now: now)
        _ = try state.acceptSession("bob", "s_1", presence: CoreTestPresence())
        let token = "tok"
        _ = try state.createShare("alice", "s_1", ttl: nil, token: token, now: now)
        var last = LastPosition(before)
        last.record(duringPause, restriction: .only([]))
        let presence = CoreTestPresence(recorded: ["alice": last])

        let (share, reply) = try state.watch(tokenHash: Token.hash(token), now: now, presence: presence)
        XCTAssertEqual(reply.lastPosition, before)

        state.ownerWentOffline("alice", at: now)
        let lost = state.fireDue(now: now + state.safety.lostContactGrace, presence: presence)
        XCTAssertEqual(lost.recipients(of: "session.lost"), ["bob", share.viewerKey])
        XCTAssertEqual(lost.sent("session.lost").first?.message["lastPosition"], before.json)
        let backlog = state.viewerBacklog(share, presence: presence)
        XCTAssertEqual(backlog.first?["type"], "session.lost")
        XCTAssertEqual(backlog.first?["lastPosition"], before.json)
    }
}
