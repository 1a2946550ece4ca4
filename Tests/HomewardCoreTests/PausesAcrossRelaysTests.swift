import HomewardCore
import HomewardProtocol
import XCTest

/// A connection that only has an identity.
private final class NamedSink: ClientSink {
    let label: String
    init(_ label: String) { self.label = label }
    func send(_ message: EncodedMessage) {}
    func close(_ code: CloseCode, reason: String) {}
}

/// Pauses on a shared bus: what the walker's relay decides of each position (`mayBeReceived`,
/// `positionRestriction`), and what the presence table of any relay does with it.
final class PausesAcrossRelaysTests: XCTestCase {
    private let now = CoreFixture.now

    /// alice is friends with bob, carol and dave.
    private func friends() -> RelayState {
        CoreFixture.state(["alice", "bob", "carol", "dave", "erin"], friends: [("alice", "bob"), ("alice", "carol"), ("alice", "dave")])
    }

    private func labels(_ sinks: [any ClientSink]) -> [String] {
        sinks.compactMap { ($0 as? NamedSink)?.label }.sorted()
    }

    // MARK: The walker's relay

    func testMayBeReceivedOnlyByAnOwnerNotPausedForEveryone() throws {
        var state = friends()
        XCTAssertFalse(state.mayBeReceived("alice"), "no session, alarm or standing share")
        _ = try state.shareAlways("alice", with: ["bob"])
        XCTAssertTrue(state.mayBeReceived("alice"))
        _ = try state.pauseLocation("alice", from: "bob", until: nil)
        XCTAssertTrue(state.mayBeReceived("alice"), "a pause from one friend: others (perhaps on another relay) may receive")
        _ = try state.pauseLocation("alice", from: nil, until: nil)
        XCTAssertFalse(state.mayBeReceived("alice"), "paused for everyone")
        _ = try state.raiseAlarm("alice", Request.AlarmRaise(to: ["dave"]), presence: CoreTestPresence(), now: now)
        XCTAssertFalse(state.mayBeReceived("alice"), "still paused for everyone: the alarm recipients are its audience")
        XCTAssertEqual(state.audience(of: "alice"), ["dave"])
        _ = try state.resumeLocation("alice", from: nil)
        XCTAssertTrue(state.mayBeReceived("alice"))
    }

    func testTheRestrictionNamesWhomPausesHideFromAndSparesAlarmRecipients() throws {
        var state = friends()
        _ = try state.shareAlways("alice", with: ["bob", "carol"])
        XCTAssertNil(state.positionRestriction(of: "alice"), "no pause: positions go unrestricted")
        _ = try state.pauseLocation("alice", from: "bob", until: nil)
        XCTAssertEqual(state.positionRestriction(of: "alice"), .allBut(["bob"]))
        XCTAssertEqual(state.audience(of: "alice"), ["carol"])
        XCTAssertEqual(state.audience(of: "alice", ignoringPauses: true), ["bob", "carol"], "what another relay's interest follows")

        _ = try state.raiseAlarm("alice", Request.AlarmRaise(to: ["bob"]), presence: CoreTestPresence(), now: now)
        XCTAssertNil(state.positionRestriction(of: "alice"), "an alarm recipient is never hidden")

        _ = try state.pauseLocation("alice", from: nil, until: nil)
        XCTAssertEqual(state.positionRestriction(of: "alice"), .only(["bob"]), "paused for everyone: the alarm recipients only")
        _ = try state.startSession("alice", SessionOptions(invite: ["dave"]), now: now)
        let id = try XCTUnwrap(state.ownSession(of: "alice")?.id)
        _ = try state.acceptSession("dave", id, presence: CoreTestPresence())
        _ = try state.createShare("alice", id, ttl: nil, token: "tok", now: now)
        let viewer = try XCTUnwrap(state.viewerKeys(ofOwner: "alice").first)
        XCTAssertEqual(state.audience(of: "alice", ignoringPauses: true), ["bob", "carol", "dave", viewer])
        XCTAssertEqual(state.positionRestriction(of: "alice")?.hides(viewer), true)
        XCTAssertEqual(state.positionRestriction(of: "alice")?.hides("dave"), true)
        XCTAssertEqual(state.positionRestriction(of: "alice")?.hides("bob"), false)
    }

    func testAnAskerTheWalkersRelayHasNotHeardOfIsNotHidden() {
        XCTAssertEqual(LastPositionAnswer(last: LastPosition(), restriction: .allBut(["bob"]), askers: ["erin"]).hiddenFrom, [],
                       "an observer whose accept the walker's relay has not heard of yet is not hidden")
    }

    // MARK: The presence table of any relay

    /// A pause changes whom a position reaches here, not whether this relay subscribes: a position from the
    /// walker's relay right after the pause ends must find the subscription and the friend's connection.
    func testInterestAndRemoteDeliveryIgnorePausesButLocalFanoutDoesNot() {
        let table = PresenceTable()
        let bob = NamedSink("bob"), carol = NamedSink("carol")
        _ = table.attach("bob", bob, now: now)
        _ = table.attach("carol", carol, now: now)
        table.setAudience(of: "alice", to: ["carol"], reach: ["bob", "carol"])
        XCTAssertTrue(table.takeInterestChanges() == (["alice"], []))
        XCTAssertEqual(labels(table.fanout(Position(lat: 1, lon: 2, ts: now), from: "alice", now: now).sinks), ["carol"], "here, the pause applies")
        XCTAssertEqual(labels(table.remoteAudience(of: "alice")), ["bob", "carol"], "unrestricted: the walker's relay has no pause")
        XCTAssertEqual(labels(table.remoteAudience(of: "alice", restriction: .allBut(["bob"]))), ["carol"])
        XCTAssertEqual(labels(table.remoteAudience(of: "alice", restriction: .only(["bob", "dave"]))), ["bob"])

        table.setAudience(of: "alice", to: [], reach: ["bob"])
        XCTAssertTrue(table.takeInterestChanges() == ([], []), "paused for bob as well: still subscribed")
        _ = table.detach("bob", bob, now: now)
        XCTAssertTrue(table.takeInterestChanges() == ([], ["alice"]), "nobody here receives alice any more")
        _ = table.attach("bob", bob, now: now)
        XCTAssertTrue(table.takeInterestChanges() == (["alice"], []), "a member coming back is followed through reach")
        XCTAssertEqual(labels(table.remoteAudience(of: "alice")), ["bob"])
    }

    func testReachAlwaysIncludesTheAudience() {
        let table = PresenceTable()
        let bob = NamedSink("bob")
        _ = table.attach("bob", bob, now: now)
        table.setAudience(of: "alice", to: ["bob"], reach: [])
        XCTAssertEqual(labels(table.remoteAudience(of: "alice")), ["bob"])
        table.setAudience(of: "alice", to: ["bob"])
        XCTAssertEqual(labels(table.remoteAudience(of: "alice")), ["bob"], "no reach given: the audience")
    }

    func testThePublishedRestrictionIsTheOneLastSet() {
        let table = PresenceTable()
        _ = table.attach("alice", NamedSink("alice"), now: now)
        table.setAudience(of: "alice", to: ["carol"], reach: ["bob", "carol"])
        table.setOwner("alice", true, restriction: .allBut(["bob"]))
        XCTAssertEqual(table.fanout(Position(lat: 1, lon: 2, ts: now), from: "alice", now: now).restriction, .allBut(["bob"]))
        table.setOwner("alice", true)
        XCTAssertNil(table.fanout(Position(lat: 1, lon: 2, ts: now), from: "alice", now: now).restriction)
    }

    /// `hw.last`: the walker's relay shows their last position only to askers no pause hides it from.
    func testTheLastPositionIsAnsweredOnlyForAskersNotHiddenByAPause() {
        let table = PresenceTable()
        let here = Position(lat: 57.7, lon: 11.9, ts: now)
        XCTAssertNil(table.lastPositionAnswer(of: "alice", for: ["bob"]), "not connected here: another relay answers")
        _ = table.attach("alice", NamedSink("alice"), now: now)
        _ = table.fanout(here, from: "alice", now: now)
        XCTAssertEqual(table.lastPositionAnswer(of: "alice", for: ["bob"]), LastPositionAnswer(position: here))

        table.setOwner("alice", true, restriction: .allBut(["bob"]))
        XCTAssertEqual(table.lastPositionAnswer(of: "alice", for: ["bob"]), LastPositionAnswer(position: nil, hiddenFrom: ["bob"]))
        XCTAssertEqual(table.lastPositionAnswer(of: "alice", for: ["bob", "carol"]), LastPositionAnswer(position: here, hiddenFrom: ["bob"]))
        XCTAssertEqual(table.lastPositionAnswer(of: "alice", for: ["share:sh_1"]), LastPositionAnswer(position: here))

        table.setOwner("alice", false, restriction: .only(["dave"]))
        XCTAssertEqual(table.lastPositionAnswer(of: "alice", for: ["dave"]), LastPositionAnswer(position: here), "an alarm recipient")
        XCTAssertEqual(table.lastPositionAnswer(of: "alice", for: ["share:sh_1", "carol"]),
                       LastPositionAnswer(position: nil, hiddenFrom: ["share:sh_1", "carol"]))
        table.setOwner("alice", true)
        XCTAssertEqual(table.lastPositionAnswer(of: "alice", for: ["carol"]), LastPositionAnswer(position: here), "resumed")
    }
}
