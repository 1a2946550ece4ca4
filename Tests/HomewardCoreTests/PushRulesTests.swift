import HomewardCore
import HomewardCoreTestSupport
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

    private static let lifetime: Int64 = 30 * 24 * 3600 * 1000

    /// Subscribes endpoint `n` from the sign-in `token` (default: the user's one device), signing it in first.
    @discardableResult
    private func subscribe(_ state: inout RelayState, _ user: String, _ n: Int, token: String? = nil, limit: Int = 10) throws -> String {
        let hash = token ?? "t-\(user)"
        if !state.knowsToken(hash) { _ = state.issueToken(hash, to: user, now: now, lifetime: Self.lifetime) }
        let outcome = try state.subscribePush(user, tokenHash: hash, subscription(n), limit: limit, now: now)
        return try XCTUnwrap(outcome.reply("subscriptionId")?.stringValue)
    }

    private func planner(webhook: String? = nil, tokenLifetime: Int64? = PushRulesTests.lifetime) -> PushPlanner {
        var settings = PushSettings()
        settings.webhookURL = webhook
        let ids = self.ids
        return PushPlanner(settings: settings, tokenLifetime: tokenLifetime, makeID: { ids.next($0) })
    }

    /// The endpoints an alarm alice raises now is pushed to.
    private func alarmPushes(_ state: inout RelayState, planner: PushPlanner? = nil, at time: Int64? = nil) throws -> [String] {
        let at = time ?? now
        let raised = try state.raiseAlarm("alice", Request.AlarmRaise(), presence: CoreTestPresence(), now: at)
        return queued((planner ?? self.planner()).plan(raised, state: state, presence: CoreTestPresence(), now: at)).map(\.endpoint).sorted()
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
        for n in 1...3 { try subscribe(&state, "bob", n, limit: 3) }
        assertRelayError(try subscribe(&state, "bob", 4, limit: 3), .rateLimited)
        XCTAssertNoThrow(try subscribe(&state, "carol", 4, limit: 3))

        let old = state.pushSubscriptions(of: "bob")[0].id
        var renewed = subscription(1)
        renewed.auth = "new-auth"
        let outcome = try state.subscribePush("bob", tokenHash: "t-bob", renewed, limit: 3, now: now)
        XCTAssertEqual(outcome.changes.first, .deletePushSubscription(id: old))
        XCTAssertEqual(state.pushSubscriptions(of: "bob").count, 3)
        XCTAssertEqual(state.pushSubscriptions(of: "bob").last?.auth, "new-auth")
    }

    /// The stolen-device case: a subscription made by one sign-in ends with that sign-in; the owner's own
    /// device keeps its subscription, and the alarm goes only there.
    func testLoggingOutASignInEndsItsSubscriptionsOnly() throws {
        var state = makeState()
        let phone = try subscribe(&state, "bob", 1, token: "t-phone")
        let stolen = try subscribe(&state, "bob", 2, token: "t-stolen")
        let out = state.logOut("bob", token: "t-stolen", all: false)
        XCTAssertEqual(out.changes, [.deletePushSubscription(id: stolen), .revokeToken(hash: "t-stolen")])
        XCTAssertEqual(state.pushSubscriptions(of: "bob").map(\.id), [phone])
        XCTAssertEqual(try alarmPushes(&state), ["https://push.example.net/1"])
    }

    func testLogoutAllAndRevokeEndTheSubscriptionsOfTheirSignIns() throws {
        var state = makeState()
        try subscribe(&state, "bob", 1, token: "t-phone")
        try subscribe(&state, "bob", 2, token: "t-stolen")
        try subscribe(&state, "carol", 3)
        _ = state.logOut("bob", token: "t-phone", all: true)
        XCTAssertEqual(state.pushSubscriptions(of: "bob"), [])
        XCTAssertEqual(try alarmPushes(&state), ["https://push.example.net/3"])

        try subscribe(&state, "carol", 4, token: "t-carol-laptop")
        let laptop = IssuedToken(hash: "t-carol-laptop", username: "carol", createdAt: now, lastUsed: now).id
        let revoked = try state.revokeToken("carol", id: laptop)
        XCTAssertEqual(revoked.changes.count, 2)
        XCTAssertEqual(state.pushSubscriptions(of: "carol").map(\.endpoint), ["https://push.example.net/3"])
    }

    /// An expired sign-in's subscription gets nothing (where the relay can tell, `tokenLifetime` set) and
    /// is removed with the token at the account's next sign-in.
    func testAnExpiredSignInsSubscriptionGetsNoPushAndEndsWithTheToken() throws {
        var state = makeState()
        let old = try subscribe(&state, "bob", 1, token: "t-old")
        let later = now + Self.lifetime
        XCTAssertEqual(try alarmPushes(&state, at: later), [])
        XCTAssertEqual(try alarmPushes(&state, planner: planner(tokenLifetime: nil), at: later), ["https://push.example.net/1"],
                       "a relay that cannot judge expiry pushes until the token is dropped")
        let signIn = state.issueToken("t-new", to: "bob", now: later, lifetime: Self.lifetime)
        XCTAssertEqual(signIn, [.deletePushSubscription(id: old), .revokeToken(hash: "t-old"),
                                .createToken(hash: "t-new", username: "bob", at: later)])
        XCTAssertEqual(state.pushSubscriptions(of: "bob"), [])
    }

    /// A shared browser: the endpoint moves to the account that subscribed it last, so the other account's
    /// alarms stop reaching it.
    func testAnEndpointBelongsToOneAccount() throws {
        var state = makeState()
        let bobs = try subscribe(&state, "bob", 1)
        _ = state.issueToken("t-carol", to: "carol", now: now, lifetime: Self.lifetime)
        let outcome = try state.subscribePush("carol", tokenHash: "t-carol", subscription(1), limit: 10, now: now)
        XCTAssertEqual(outcome.changes.first, .deletePushSubscription(id: bobs))
        XCTAssertEqual(state.pushSubscriptions(of: "bob"), [])
        XCTAssertEqual(state.pushSubscriptions(of: "carol").map(\.endpoint), ["https://push.example.net/1"])
        let raised = try state.raiseAlarm("alice", Request.AlarmRaise(), presence: CoreTestPresence(), now: now)
        XCTAssertEqual(queued(planner().plan(raised, state: state, presence: CoreTestPresence(), now: now)).count, 1, "one push, carol's")
    }

    func testASignInThatEndedWhileTheEndpointWasCheckedCannotSubscribe() throws {
        var state = makeState()
        _ = state.issueToken("t-bob", to: "bob", now: now, lifetime: Self.lifetime)
        _ = state.logOut("bob", token: "t-bob", all: false)
        assertRelayError(try state.subscribePush("bob", tokenHash: "t-bob", subscription(1), limit: 10, now: now), .unauthenticated)
        assertRelayError(try state.subscribePush("carol", tokenHash: "t-unknown", subscription(1), limit: 10, now: now), .unauthenticated)
    }

    /// A subscription stored before subscriptions belonged to sign-ins (no token) is pushed to while the
    /// account has a live sign-in, and ends with the first sign-in that ends.
    func testASubscriptionWithoutASignInEndsWithTheAccountsFirstSignOut() throws {
        var stored = StoredState()
        stored.users = ["alice", "bob"].map { UserProfile(username: $0, name: $0) }
        stored.friendships = [("alice", "bob")]
        stored.pushSubscriptions = [PushSubscription(id: "p_old", username: "bob", endpoint: "https://push.example.net/old",
                                                     p256dh: "k", auth: "a", createdAt: 1, tokenHash: nil)]
        var state = RelayState(stored)
        XCTAssertEqual(try alarmPushes(&state), [], "no sign-in, no push")
        _ = state.issueToken("t-1", to: "bob", now: now, lifetime: Self.lifetime)
        _ = state.issueToken("t-2", to: "bob", now: now, lifetime: Self.lifetime)
        XCTAssertEqual(try alarmPushes(&state), ["https://push.example.net/old"])
        let out = state.logOut("bob", token: "t-2", all: false)
        XCTAssertEqual(out.changes, [.deletePushSubscription(id: "p_old"), .revokeToken(hash: "t-2")])
        XCTAssertEqual(try alarmPushes(&state), [])
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
        XCTAssertEqual(try queued(onCancel).filter { $0.kind == .webhook }.map { try JSONParser.parse($0.payload)["event"]?["reason"] }, ["safe"])
    }

    func testWithoutAWebhookNothingButPushesIsQueued() throws {
        var state = makeState()
        let raised = try state.raiseAlarm("alice", Request.AlarmRaise(), presence: CoreTestPresence(), now: now)
        XCTAssertTrue(planner().plan(raised, state: state, presence: CoreTestPresence(), now: now).isEmpty)
    }

    /// An ended alarm's recipients get `alarm.cancelled` under the alarm's Topic (so it replaces the alarm at
    /// the push service and on the device), connected or not, and the alarm's own waiting pushes are dropped.
    func testCancellingAnAlarmPushesAlarmCancelledUnderTheAlarmsTopic() throws {
        var state = makeState()
        try subscribe(&state, "bob", 1)
        try subscribe(&state, "carol", 2)
        let presence = CoreTestPresence(online: ["bob"])
        let raised = try state.raiseAlarm("alice", Request.AlarmRaise(), presence: presence, now: now)
        let alarmId = try XCTUnwrap(raised.reply("alarm")?["alarmId"]?.stringValue)
        let cancelled = try state.cancelAlarm("alice", alarmId, reason: "safe now", now: now)
        let changes = planner().plan(cancelled, state: state, presence: presence, now: now)
        XCTAssertEqual(changes.first, .cancelAlarmPushes(alarmId: alarmId), "the alarm's waiting pushes go first")
        let entries = queued(changes)
        XCTAssertEqual(entries.map(\.endpoint).sorted(), ["https://push.example.net/1", "https://push.example.net/2"])
        for entry in entries {
            let payload = try JSONParser.parse(entry.payload)
            XCTAssertEqual(payload["type"], "alarm.cancelled")
            XCTAssertEqual(payload["alarmId"]?.stringValue, alarmId)
            XCTAssertEqual(payload["reason"], "safe now")
            XCTAssertEqual(entry.topic, PushPlanner.topic(alarmId: alarmId))
            XCTAssertEqual(entry.urgency, "high")
            XCTAssertNil(entry.alarmId, "not dropped by the alarm's end, which it announces")
        }
    }

    /// A walk with many invitees: the invite still goes out, within one push, with as many invitees as
    /// fit and how many more there are.
    func testAnInviteWithManyInviteesIsPushedWithTheListTrimmed() throws {
        let names = (0..<300).map { "friend_with_a_long_name_\(String(format: "%04d", $0))" }
        var state = CoreFixture.state(["alice"] + names, friends: names.map { ("alice", $0) })
        try subscribe(&state, names[7], 1)
        let started = try state.startSession("alice", SessionOptions(invite: names, note: "home"), now: now)
        let entries = queued(planner().plan(started, state: state, presence: CoreTestPresence(), now: now))
        let entry = try XCTUnwrap(entries.first)
        XCTAssertLessThanOrEqual(entry.payload.count, PushPayload.maxBytes)
        let payload = try JSONParser.parse(entry.payload)
        XCTAssertEqual(payload["type"], "session.invite")
        let invited = try XCTUnwrap(payload["session"]?["invited"]?.arrayValue)
        XCTAssertGreaterThan(invited.count, 50)
        XCTAssertEqual(invited.map(\.stringValue), names.prefix(invited.count).map { $0 })
        XCTAssertEqual(payload["session"]?["invitedMore"], .int(Int64(300 - invited.count)))
        XCTAssertEqual(payload["session"]?["note"], "home")
        XCTAssertGreaterThan(entry.payload.count, PushPayload.maxBytes - 60, "as many as fit")
    }

    func testALongAlarmTextIsCutToFitAndMarked() throws {
        var state = makeState()
        try subscribe(&state, "bob", 1)
        let text = String(repeating: "Hilfe, ich bin am Fluss. ", count: 400)
        let raised = try state.raiseAlarm("alice", Request.AlarmRaise(text: text), presence: CoreTestPresence(), now: now)
        let entry = try XCTUnwrap(queued(planner().plan(raised, state: state, presence: CoreTestPresence(), now: now)).first)
        XCTAssertLessThanOrEqual(entry.payload.count, PushPayload.maxBytes)
        let alarm = try XCTUnwrap(JSONParser.parse(entry.payload)["alarm"])
        let cut = try XCTUnwrap(alarm["text"]?.stringValue)
        XCTAssertTrue(cut.hasSuffix("…"))
        XCTAssertTrue(text.hasPrefix(String(cut.dropLast())))
        XCTAssertEqual(alarm["textTruncated"], true)
        XCTAssertNotNil(alarm["alarmId"]?.stringValue)
    }

    func testAPayloadThatFitsIsUnchangedAndOneWithNothingToShortenKeepsItsIds() throws {
        let small: JSONValue = ["type": "session.lost", "sessionId": "s_1"]
        XCTAssertEqual(PushPayload.fit(small), Array(JSONWriter.string(small).utf8))
        let odd: JSONValue = ["type": "alarm", "alarm": ["alarmId": "a_1", "from": ["name": .string(String(repeating: "x", count: 5000))]]]
        XCTAssertEqual(try JSONParser.parse(PushPayload.fit(odd)), ["type": "alarm", "alarm": ["alarmId": "a_1"], "truncated": true])
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
