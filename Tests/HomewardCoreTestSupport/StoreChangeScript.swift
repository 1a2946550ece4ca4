import HomewardCore
import HomewardProtocol

/// Commits that use every case of `StoreChange`, for the tests that check that a cache applying a change
/// (`RelayState.apply`), the bus carrying it (`ClusterCodec`) and each store storing it agree.
package enum StoreChangeScript {
    /// Commits as relays make them (the same kinds and combinations the rules produce), and some the rules
    /// make rarely: a repeated name, a block between a request and its answer, a second save that a store
    /// partly ignores.
    package static let commits: [[StoreChange]] = {
        let position = Position(lat: 57.70887, lon: 11.97456, acc: 8.5, alt: 12, spd: 1.25, hdg: 270, batt: 0.5, ts: 1_000)
        var session = FollowSession(id: "se_1", owner: "ann", note: "walking home ✓", startedAt: 3_000)
        session.set(.invited, for: "bob")
        session.set(.accepted, for: "cat")
        session.checkInBy = 60_000
        session.destination = Destination(lat: 57.7, lon: 11.9, radius: 150.5)
        session.expiresAt = 90_000
        var sessionLater = session
        sessionLater.set(.accepted, for: "bob")
        sessionLater.remove("cat")
        sessionLater.lostSince = 7_000
        var alarm = Alarm(id: "al_1", owner: "bob", text: "help", position: position, createdAt: 4_000, recipients: ["ann", "cat", "ann"])
        _ = alarm.acknowledge(by: "cat")
        alarm.deliveredAt = ["ann": 4_100, "dan": 4_200]
        alarm.nextRepeatAt = 64_000
        var alarmLater = alarm
        _ = alarmLater.acknowledge(by: "ann")
        alarmLater.repeats = 1
        alarmLater.nextRepeatAt = 124_000
        let meeting = MeetingPoint(id: "mt_1", owner: "ann", name: "Café", lat: 57.1, lon: 11.5, time: 80_000, createdAt: 5_000,
                                   invitees: [MeetingInvitee(username: "bob", queuedAt: 5_000), MeetingInvitee(username: "cat", queuedAt: 5_000)])
        let meetingAgain = MeetingPoint(id: "mt_1", owner: "ann", name: "Another name", lat: 0, lon: 0, time: 1, createdAt: 1,
                                        invitees: [MeetingInvitee(username: "bob", response: .accepted, queuedAt: 5_000, deliveredAt: 5_500)])
        let outbox = OutboxEntry(id: "ob_1", kind: .webPush, subscriptionId: "ps_2", endpoint: "https://push.example/2", payload: [1, 2],
                                 ttl: 60, alarmId: "al_1", createdAt: 4_000)
        func share(_ id: String, _ hash: String) -> ShareLink {
            ShareLink(id: id, sessionId: "se_1", owner: "ann", tokenHash: hash, createdAt: 3_500, expiresAt: 50_000)
        }
        func push(_ id: String, at: Int64) -> PushSubscription {
            PushSubscription(id: id, username: "ann", endpoint: "https://push.example/\(id)", p256dh: "k", auth: "a", createdAt: at,
                             tokenHash: at == 300 ? nil : "t_ann")
        }
        // bob's browser is the one ann used: subscribing it moves the endpoint to bob.
        let moved = PushSubscription(id: "ps_9", username: "bob", endpoint: "https://push.example/ps_2", p256dh: "k2", auth: "a2",
                                     createdAt: 400, tokenHash: "t_bob")
        return [
            ["ann", "bob", "cat", "dan"].map { .createUser(UserProfile(username: $0, name: $0.capitalized), passwordHash: "h", at: 100) },
            [.createToken(hash: "t_ann", username: "ann", at: 1_000), .createToken(hash: "t_bob", username: "bob", at: 1_000)],
            [.useToken(hash: "t_ann", at: 5_000), .lastSeen(username: "ann", at: 5_000)],
            [.addFriendRequest(from: "ann", to: "bob", at: 1_100), .addFriendRequest(from: "cat", to: "ann", at: 1_100),
             .addFriendRequest(from: "dan", to: "ann", at: 1_100)],
            [.addBlock(blocker: "ann", blocked: "dan", at: 1_200)],
            [.removeFriendRequest(from: "ann", to: "bob"), .addFriendship("ann", "bob", at: 1_300)],
            [.removeBlock(blocker: "ann", blocked: "dan")],
            [.removeFriendRequest(from: "cat", to: "ann"), .addFriendship("cat", "ann", at: 1_400)],
            [.setAlarmContacts(owner: "ann", ["bob", "cat", "bob"]), .setAlarmContacts(owner: "bob", ["ann"])],
            [.saveSession(session), .saveShare(share("sh_1", "hash1")), .saveShare(share("sh_2", "hash2"))],
            [.saveSession(sessionLater), .removeShare(id: "sh_2")],
            [.saveAlarm(alarm), .enqueueOutbox(outbox)],
            [.saveAlarm(alarmLater), .cancelAlarmPushes(alarmId: "al_1")],
            [.savePushSubscription(push("ps_2", at: 200)), .savePushSubscription(push("ps_1", at: 100)),
             .savePushSubscription(push("ps_3", at: 300))],
            [.savePushSubscription(push("ps_3", at: 50)), .deletePushSubscription(id: "ps_1")],
            [.savePushSubscription(moved)],
            [.setStandingShare(owner: "ann", ["bob", "cat", "bob"]), .setStandingShare(owner: "cat", ["ann"])],
            [.setStandingShare(owner: "cat", [])],
            [.savePause(LocationPause(owner: "ann", from: "bob", until: 70_000)), .savePause(LocationPause(owner: "ann", from: nil, until: nil))],
            [.savePause(LocationPause(owner: "ann", from: "bob", until: 75_000)), .removePause(owner: "ann", from: nil)],
            [.removePause(owner: "ann", from: "bob")],
            [.saveMeeting(meeting)],
            [.saveMeeting(meetingAgain)],
            [.saveMessage(MessageInfo(id: "mg_1", from: "ann", to: "bob", text: "on my way", queuedAt: 6_000))],
            [.saveMessage(MessageInfo(id: "mg_1", from: "ann", to: "bob", text: "changed", queuedAt: 1, deliveredAt: 6_100))],
            [.removeMessage(id: "mg_1"), .removeMeeting(id: "mt_1")],
            [.endAlarm(id: "al_1", reason: "cancelled", at: 8_000)],
            [.saveShare(share("sh_3", "hash3")), .endSession(id: "se_1", reason: "ended", at: 8_500), .removeShare(id: "sh_1")],
            // Saves that crossed the end on another relay (an accept as the owner ends): the store keeps them ended.
            [.saveSession(sessionLater), .saveAlarm(alarmLater)],
            [.removeFriendship("ann", "cat"), .revokeToken(hash: "t_ann")],
            [.createUser(UserProfile(username: "eve", name: "Eve"), passwordHash: "h", at: 9_000),
             .createToken(hash: "t_eve", username: "eve", at: 9_000), .addFriendRequest(from: "eve", to: "ann", at: 9_000),
             .addBlock(blocker: "ann", blocked: "eve", at: 9_001)],
        ]
    }()

    /// Every case of `StoreChange`: the switch fails to compile when one is added, so the script must grow too.
    package static func caseName(_ change: StoreChange) -> String {
        switch change {
        case .createUser: "createUser"
        case .createToken: "createToken"
        case .revokeToken: "revokeToken"
        case .useToken: "useToken"
        case .addFriendRequest: "addFriendRequest"
        case .removeFriendRequest: "removeFriendRequest"
        case .addFriendship: "addFriendship"
        case .removeFriendship: "removeFriendship"
        case .addBlock: "addBlock"
        case .removeBlock: "removeBlock"
        case .setAlarmContacts: "setAlarmContacts"
        case .saveSession: "saveSession"
        case .endSession: "endSession"
        case .saveAlarm: "saveAlarm"
        case .endAlarm: "endAlarm"
        case .lastSeen: "lastSeen"
        case .savePushSubscription: "savePushSubscription"
        case .deletePushSubscription: "deletePushSubscription"
        case .enqueueOutbox: "enqueueOutbox"
        case .cancelAlarmPushes: "cancelAlarmPushes"
        case .saveShare: "saveShare"
        case .removeShare: "removeShare"
        case .setStandingShare: "setStandingShare"
        case .savePause: "savePause"
        case .removePause: "removePause"
        case .saveMeeting: "saveMeeting"
        case .removeMeeting: "removeMeeting"
        case .saveMessage: "saveMessage"
        case .removeMessage: "removeMessage"
        }
    }

    package static let allCases: Set<String> = [
        "createUser", "createToken", "revokeToken", "useToken", "addFriendRequest", "removeFriendRequest", "addFriendship",
        "removeFriendship", "addBlock", "removeBlock", "setAlarmContacts", "saveSession", "endSession", "saveAlarm", "endAlarm",
        "lastSeen", "savePushSubscription", "deletePushSubscription", "enqueueOutbox", "cancelAlarmPushes", "saveShare",
        "removeShare", "setStandingShare", "savePause", "removePause", "saveMeeting", "removeMeeting", "saveMessage", "removeMessage",
    ]
}
