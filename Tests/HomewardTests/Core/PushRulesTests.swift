import HomewardCore
import HomewardProtocol
import XCTest

/// Push subscriptions and what the planner queues for each outcome (the contract's push section).
final class PushRulesTests: XCTestCase {
    private let now = CoreFixture.now
    private let ids = CoreTestIDSequence()

    private func makeState() -> RelayState {
        CoreFixture.state(["alice", "bob", "carol", "dave"], friends: [("alice", "bob"), ("alice", "carol")])
    }

    private func subscription(_ n: Int) -> Request.PushSubscribe {
        Request.PushSubscribe(endpoint: "https://push.example.net/\(n)", p256dh: "key\(n)", auth: "auth\(n)")
    }

    @discardableResult
    private func subscribe(_ state: inout RelayState, _ user: String, _ n: Int) throws -> String {
        let outcome = try state.subscribePush(user, subscription(n), limit: 10, now: now)
        return try XCTUnwrap(outcome.reply("subscriptionId")?.stringValue)
    }

    private func planner(webhook: String? = nil) -> PushPlanner {
        var settings = PushSettings()
        settings.webhookURL = webhook
        let ids = self.ids
        return PushPlanner(settings: settings, makeID: { ids.next($0) })
    }

    private func queued(_ changes: [StoreChange]) -> [OutboxEntry] {
        changes.compactMap { if case .enqueueOutbox(let entry) = $0 { entry } else { nil } }
    }

    private func payloadType(_ entry: OutboxEntry) throws -> String? {
        try JSONParser.parse(entry.payload).string("type")
    }

    // MARK: Subscriptions

    func testSubscribeListUnsubscribe() throws {
        var state = makeState()
        let first = try subscribe(&state, "bob", 1)
        let second = try subscribe(&state, "bob", 2)
        XCTAssertEqual(state.pushSubscriptions(of: "bob").map(\.id), [first, second])
        let listed = PushListReply(json: .object(state.listPush("bob").reply))
        XCTAssertEqual(listed?.subscriptions.map(\.subscriptionId), [first, second])
        XCTAssertEqual(listed?.subscriptions.first?.endpoint, "https://push.example.net/1")

        let removed = try state.unsubscribePush("bob", first)
        XCTAssertEqual(removed.changes, [.deletePushSubscription(id: first)])
        XCTAssertEqual(state.pushSubscriptions(of: "bob").map(\.id), [second])
        assertRelayError(try state.unsubscribePush("bob", first), .notFound)
        assertRelayError(try state.unsubscribePush("alice", second), .notFound)  // not hers: the same answer as unknown
    }

    func testTheLimitCountsPerUserAndTheSameEndpointReplacesItsOldSubscription() throws {
        var state = makeState()
        for n in 1...3 { _ = try state.subscribePush("bob", subscription(n), limit: 3, now: now) }
        assertRelayError(try state.subscribePush("bob", subscription(4), limit: 3, now: now), .rateLimited)
        XCTAssertNoThrow(try state.subscribePush("carol", subscription(4), limit: 3, now: now))

        let old = state.pushSubscriptions(of: "bob")[0].id
        var renewed = subscription(1)
        renewed.auth = "new-auth"
        let outcome = try state.subscribePush("bob", renewed, limit: 3, now: now)
        XCTAssertEqual(outcome.changes.first, .deletePushSubscription(id: old))
        XCTAssertEqual(state.pushSubscriptions(of: "bob").count, 3)
        XCTAssertEqual(state.pushSubscriptions(of: "bob").last?.auth, "new-auth")
    }

    func testSubscriptionsSurviveAReloadFromStoredState() throws {
        var state = makeState()
        let id = try subscribe(&state, "bob", 1)
        var stored = StoredState()
        stored.users = [UserProfile(username: "bob", name: "Bob")]
        stored.pushSubscriptions = state.pushSubscriptions(of: "bob")
        XCTAssertEqual(RelayState(stored).pushSubscriptions(of: "bob").map(\.id), [id])
    }

    // MARK: What is pushed

    func testAnAlarmIsPushedToEverySubscriptionOfEveryRecipientConnectedOrNot() throws {
        var state = makeState()
        try subscribe(&state, "bob", 1)
        try subscribe(&state, "bob", 2)
        try subscribe(&state, "carol", 3)
        try subscribe(&state, "alice", 4)  // the owner gets no push of her own alarm
        let presence = CoreTestPresence(online: ["bob"])
        let outcome = try state.raiseAlarm("alice", Request.AlarmRaise(), presence: presence, now: now)
        let alarmId = try XCTUnwrap(outcome.reply("alarm")?["alarmId"]?.stringValue)

        let entries = queued(planner().plan(outcome, state: state, presence: presence, now: now))
        XCTAssertEqual(entries.map(\.endpoint).sorted(), (1...3).map { "https://push.example.net/\($0)" })
        for entry in entries {
            XCTAssertEqual(entry.kind, .webPush)
            XCTAssertEqual(entry.urgency, "high")
            XCTAssertEqual(entry.topic, PushPlanner.topic(alarmId: alarmId))
            XCTAssertEqual(entry.alarmId, alarmId)
            XCTAssertEqual(entry.ttl, 3600)
            XCTAssertEqual(try payloadType(entry), "alarm")
        }
    }

    func testARepeatIsPushedToOfflineRecipientsTooThoughTheEventGoesOnlyToOnlineOnes() throws {
        var state = makeState()
        state.safety.alarmRepeatInterval = 1_000
        try subscribe(&state, "carol", 1)
        let online = CoreTestPresence(online: ["bob"])
        _ = try state.raiseAlarm("alice", Request.AlarmRaise(), presence: online, now: now)
        let repeated = state.fireDue(now: now + 1_000, presence: online)
        XCTAssertEqual(repeated.recipients(of: "alarm"), ["bob"])
        let entries = queued(planner().plan(repeated, state: state, presence: online, now: now + 1_000))
        XCTAssertEqual(entries.map(\.endpoint), ["https://push.example.net/1"])
        XCTAssertEqual(try JSONParser.parse(entries[0].payload)["repeat"], .int(1))
    }

    func testInvitesAndFriendRequestsArePushedOnlyToRecipientsWithoutAConnection() throws {
        var state = makeState()
        try subscribe(&state, "bob", 1)
        try subscribe(&state, "carol", 2)
        try subscribe(&state, "dave", 3)
        let presence = CoreTestPresence(online: ["bob"])
        let started = try state.startSession("alice", SessionOptions(invite: ["bob", "carol"]), now: now)
        let invites = queued(planner().plan(started, state: state, presence: presence, now: now))
        XCTAssertEqual(invites.map(\.endpoint), ["https://push.example.net/2"])
        XCTAssertEqual(try payloadType(invites[0]), "session.invite")
        XCTAssertEqual(invites[0].urgency, "normal")
        XCTAssertNil(invites[0].topic)

        let asked = try state.requestFriend("bob", "dave", now: now)
        XCTAssertEqual(queued(planner().plan(asked, state: state, presence: presence, now: now)).map(\.endpoint),
                       ["https://push.example.net/3"])
        let askedOnline = try state.requestFriend("carol", "bob", now: now)
        XCTAssertTrue(queued(planner().plan(askedOnline, state: state, presence: presence, now: now)).isEmpty)
    }

    func testLostContactIsPushedToObserversWithoutAConnection() throws {
        var state = makeState()
        try subscribe(&state, "bob", 1)
        try subscribe(&state, "carol", 2)
        let started = try state.startSession("alice", SessionOptions(invite: ["bob", "carol"]), now: now)
        let id = try XCTUnwrap(started.reply("session")?["sessionId"]?.stringValue)
        _ = try state.acceptSession("bob", id, presence: CoreTestPresence())
        _ = try state.acceptSession("carol", id, presence: CoreTestPresence())
        state.ownerWentOffline("alice", at: now)
        let later = now + state.safety.lostContactGrace
        let presence = CoreTestPresence(online: ["carol"])
        let lost = state.fireDue(now: later, presence: presence)
        XCTAssertEqual(Set(lost.recipients(of: "session.lost")), ["bob", "carol"])
        let entries = queued(planner().plan(lost, state: state, presence: presence, now: later))
        XCTAssertEqual(entries.map(\.endpoint), ["https://push.example.net/1"])
        XCTAssertEqual(try payloadType(entries[0]), "session.lost")
    }

    func testAcknowledgingOrCancellingDropsWaitingPushesAndTellsTheWebhook() throws {
        var state = makeState()
        try subscribe(&state, "bob", 1)
        let presence = CoreTestPresence()
        let raised = try state.raiseAlarm("alice", Request.AlarmRaise(), presence: presence, now: now)
        let alarmId = try XCTUnwrap(raised.reply("alarm")?["alarmId"]?.stringValue)
        let hook = planner(webhook: "https://desk.example.org/hook")
        let onRaise = queued(hook.plan(raised, state: state, presence: presence, now: now))
        XCTAssertEqual(onRaise.filter { $0.kind == .webhook }.count, 1)
        let body = try JSONParser.parse(try XCTUnwrap(onRaise.first { $0.kind == .webhook }).payload)
        XCTAssertEqual(body["event"]?["type"], "alarm")
        XCTAssertEqual(body["at"], .int(now))

        let acked = try state.acknowledgeAlarm("bob", alarmId)
        let onAck = hook.plan(acked, state: state, presence: presence, now: now)
        XCTAssertTrue(onAck.contains(.cancelAlarmPushes(alarmId: alarmId)))
        XCTAssertEqual(try queued(onAck).map { try JSONParser.parse($0.payload)["event"]?["type"] }, ["alarm.acked"])

        let cancelled = try state.cancelAlarm("alice", alarmId, reason: "safe", now: now)
        let onCancel = hook.plan(cancelled, state: state, presence: presence, now: now)
        XCTAssertTrue(onCancel.contains(.cancelAlarmPushes(alarmId: alarmId)))
        XCTAssertEqual(try queued(onCancel).map { try JSONParser.parse($0.payload)["event"]?["reason"] }, ["safe"])
    }

    func testWithoutAWebhookNothingButPushesIsQueued() throws {
        var state = makeState()
        let raised = try state.raiseAlarm("alice", Request.AlarmRaise(), presence: CoreTestPresence(), now: now)
        XCTAssertTrue(planner().plan(raised, state: state, presence: CoreTestPresence(), now: now).isEmpty)
    }

    func testTopicIsAtMost32Base64URLCharactersAndStablePerAlarm() {
        XCTAssertEqual(PushPlanner.topic(alarmId: "a_0123456789abcdef0123456789abcdef"), "0123456789abcdef0123456789abcdef")
        let long = PushPlanner.topic(alarmId: "a_" + String(repeating: "x", count: 40))
        XCTAssertEqual(long.count, 32)
        XCTAssertEqual(long, PushPlanner.topic(alarmId: "a_" + String(repeating: "x", count: 40)))
        XCTAssertNotEqual(long, PushPlanner.topic(alarmId: "a_" + String(repeating: "y", count: 40)))
        XCTAssertEqual(PushPlanner.topic(alarmId: "a_1").count, 1)
        XCTAssertEqual(PushPlanner.topic(alarmId: "a_bad id!").count, 32)
    }
}
