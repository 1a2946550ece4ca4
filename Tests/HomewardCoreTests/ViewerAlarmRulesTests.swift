import HomewardCore
import HomewardProtocol
import XCTest

/// Which alarms a share-link viewer hears of: those its owner raised while the link lived (not one already
/// going on when it was made), always without the alarm's position, which a pause may hide from viewers.
final class ViewerAlarmRulesTests: XCTestCase {
    private let now = CoreFixture.now
    private lazy var here = Position(lat: 57.7, lon: 11.9, ts: now)

    /// alice walks (session s_1), bob observes; alice's last position is `here`.
    private func walking() throws -> (RelayState, CoreTestPresence) {
        var state = CoreFixture.state(friends: [("alice", "bob")])
        _ = try state.startSession("alice", SessionOptions(invite: ["bob"]), now: now)
        _ = try state.acceptSession("bob", "s_1", presence: CoreTestPresence())
        return (state, CoreTestPresence(online: ["bob"], positions: ["alice": here]))
    }

    private func share(_ state: inout RelayState, token: String, at time: Int64) throws -> ShareLink {
        _ = try state.createShare("alice", "s_1", ttl: nil, token: token, now: time)
        return try state.watch(tokenHash: Token.hash(token), now: time, presence: CoreTestPresence()).0
    }

    func testAnAlarmRaisedBeforeTheLinkWasMadeIsNeitherReplayedNorRepeatedToItsViewers() throws {
        var (state, presence) = try walking()
        let raised = try state.raiseAlarm("alice", Request.AlarmRaise(text: "help"), presence: presence, now: now)
        let alarmId = try XCTUnwrap(raised.reply("alarm")?["alarmId"]?.stringValue)
        let early = try share(&state, token: "early", at: now)
        let late = try share(&state, token: "late", at: now + 1)

        XCTAssertEqual(state.viewerBacklog(late, presence: presence), [], "the alarm was going on before the link")
        XCTAssertEqual(state.viewerBacklog(early, presence: presence).map { $0["type"] }, ["alarm"], "made in the same millisecond: raised during it")
        let repeated = state.fireDue(now: now + state.safety.alarmRepeatInterval, presence: presence)
        XCTAssertEqual(repeated.recipients(of: "alarm"), ["bob", early.viewerKey])
        XCTAssertEqual(try state.acknowledgeAlarm("bob", alarmId).recipients(of: "alarm.acknowledged"), [early.viewerKey])
        XCTAssertEqual(try state.cancelAlarm("alice", alarmId, reason: nil, now: now).recipients(of: "alarm.cancelled"),
                       ["bob", early.viewerKey])
    }

    /// The alarm's position may have been sent during a pause from everyone (the alarm overrides it for its
    /// recipients): viewers get the alarm, never its position, in the event, its repeats and the backlog.
    func testViewersGetTheAlarmWithoutItsPosition() throws {
        var (state, presence) = try walking()
        let link = try share(&state, token: "tok", at: now)
        _ = try state.pauseLocation("alice", from: nil, until: nil)
        let raised = try state.raiseAlarm("alice", Request.AlarmRaise(text: "help", lat: 57.8, lon: 11.8), presence: presence, now: now)
        let forBob = try XCTUnwrap(raised.sent("alarm").first { $0.to == "bob" }?.message["alarm"])
        XCTAssertEqual(forBob["position"]?["lat"], 57.8, "a recipient gets it whatever the pauses")
        let forViewer = try XCTUnwrap(raised.sent("alarm").first { $0.to == link.viewerKey }?.message["alarm"])
        XCTAssertEqual(forViewer["position"], .null)
        XCTAssertEqual(forViewer["text"], "help")

        let repeated = state.fireDue(now: now + state.safety.alarmRepeatInterval, presence: presence)
        XCTAssertEqual(repeated.sent("alarm").first { $0.to == link.viewerKey }?.message["alarm"]?["position"], .null)
        let backlog = state.viewerBacklog(link, presence: presence)
        XCTAssertEqual(backlog.count, 1)
        XCTAssertEqual(backlog.first?["alarm"]?["position"], .null)
    }

    /// Viewers' copy of an alarm differs from the recipients' (no position): only the recipients' is pushed.
    func testAnAlarmWithViewersIsPushedOnceWithItsPosition() throws {
        var (state, presence) = try walking()
        _ = try share(&state, token: "tok", at: now)
        _ = state.issueToken("t-bob", to: "bob", now: now, lifetime: 86_400_000)
        _ = try state.subscribePush("bob", tokenHash: "t-bob",
                                    Request.PushSubscribe(endpoint: "https://push.example.net/1", p256dh: "k", auth: "a"),
                                    limit: 10, now: now)
        let raised = try state.raiseAlarm("alice", Request.AlarmRaise(text: "help", lat: 57.8, lon: 11.8), presence: presence, now: now)
        let pushes = PushPlanner(settings: PushSettings(), tokenLifetime: nil).plan(raised, state: state, presence: presence, now: now)
            .compactMap { if case .enqueueOutbox(let entry) = $0 { entry } else { nil } }
        XCTAssertEqual(pushes.count, 1)
        XCTAssertEqual(try JSONParser.parse(try XCTUnwrap(pushes.first).payload)["alarm"]?["position"]?["lat"], 57.8)
    }
}
