@testable import HomewardCluster
@testable import HomewardCore
import HomewardProtocol
import HomewardStorage
import NIOCore
import Testing

/// Everything a relay's cache holds that a reload rebuilds from the store: each durable structure and each
/// index derived from them. An empty index entry counts as none (a reload makes none; the rules may leave
/// one behind, and nothing reads the difference). Not compared: the change count (`NoticeSequencer`'s
/// business) and what is not stored at all (throttles, friend request notices).
struct CacheSnapshot: Equatable {
    let users: [String: UserProfile]
    let friends, incoming, outgoing, blocked, tokensByUser: [String: Set<String>]
    let contacts, standing, pushByUser: [String: [String]]
    let tokens: [String: IssuedToken]
    let sessions: [String: FollowSession]
    let sessionByOwner: [String: String]
    let sessionsByInvitee, alarmsByOwner, alarmsByRecipient, sharesBySession, meetingsByUser, messagesByRecipient: [String: Set<String>]
    let alarms: [String: Alarm]
    let pushSubscriptions: [String: PushSubscription]
    let shares: [String: ShareLink]
    let sharesByHash: [String: String]
    let pauses: [String: [String: LocationPause]]
    let meetings: [String: MeetingPoint]
    let messages: [String: MessageInfo]
    let offlineOwners: [String: Int64]

    init(_ state: RelayState) {
        func entries<C: Collection>(_ index: [String: C]) -> [String: C] { index.filter { !$0.value.isEmpty } }
        users = state.users
        friends = entries(state.friends)
        incoming = entries(state.incoming)
        outgoing = entries(state.outgoing)
        blocked = entries(state.blocked)
        tokensByUser = entries(state.tokensByUser)
        // Kept exactly: an empty list here would make its owner count as one (`RelayState.owners`).
        contacts = state.contacts
        standing = state.standing
        pushByUser = entries(state.pushByUser)
        tokens = state.tokens
        sessions = state.sessions
        sessionByOwner = state.sessionByOwner
        sessionsByInvitee = entries(state.sessionsByInvitee)
        alarmsByOwner = entries(state.alarmsByOwner)
        alarmsByRecipient = entries(state.alarmsByRecipient)
        sharesBySession = entries(state.sharesBySession)
        meetingsByUser = entries(state.meetingsByUser)
        messagesByRecipient = entries(state.messagesByRecipient)
        alarms = state.alarms
        pushSubscriptions = state.pushSubscriptions
        shares = state.shares
        sharesByHash = state.sharesByHash
        pauses = state.pauses
        meetings = state.meetings
        messages = state.messages
        offlineOwners = state.offlineOwners
    }
}

/// Issue 13: another relay's commits applied to this relay's cache give the cache a reload from the store
/// would have given, for every kind of change.
struct CacheDeltaTests {
    /// One relay's commits, each as the others receive it (through the bus's encoding).
    static func overTheBus(_ changes: [StoreChange], versions: UserVersions) throws -> ChangeNotice.Commit {
        let notice = ChangeNotice(node: "a", commits: [ChangeNotice.Commit(versions: versions, changes: changes.filter(\.isCached))])
        let received = try ClusterCodec.decodeNotice(ClusterCodec.encode(notice))
        return try #require(received.commits?.first)
    }

    @Test func applyingEachCommitGivesWhatAReloadGives() async throws {
        let store = try SQLiteStore.inMemory()
        var cache = RelayState(try await store.load())
        var seen = Set<String>()
        for (step, commit) in Self.script.enumerated() {
            try await store.apply(commit)
            seen.formUnion(commit.map(Self.caseName))
            let before = cache
            cache.apply(try Self.overTheBus(commit, versions: ["alice": Int64(step + 1)]).changes)
            let reloaded = before.reloaded(from: try await store.load(), afterRemoteChange: true)
            #expect(CacheSnapshot(cache) == CacheSnapshot(reloaded), "after commit \(step): \(commit)")
            // What derives from the cache for the presence table too: each audience and whom a pause restricts.
            for owner in reloaded.owners.union(cache.owners) {
                #expect(cache.audience(of: owner) == reloaded.audience(of: owner), "audience of \(owner) after commit \(step)")
                #expect(cache.mayBeReceived(owner) == reloaded.mayBeReceived(owner))
                #expect(cache.hasPauses(owner) == reloaded.hasPauses(owner))
            }
            #expect(cache.nextDeadline() == reloaded.nextDeadline(), "the timer's next deadline after commit \(step)")
            if step == 9 { cache.ownerWentOffline("ann", at: 9_000) } // so that ending ann's session must forget it
        }
        #expect(seen == Self.allCases, "cases never applied: \(Self.allCases.subtracting(seen))")
    }

    /// Commits as relays make them (the same kinds and combinations the rules produce), and some the rules
    /// make rarely: a repeated name, a block between a request and its answer, a second save that a store
    /// partly ignores.
    static let script: [[StoreChange]] = {
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
    static func caseName(_ change: StoreChange) -> String {
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

    static let allCases: Set<String> = [
        "createUser", "createToken", "revokeToken", "useToken", "addFriendRequest", "removeFriendRequest", "addFriendship",
        "removeFriendship", "addBlock", "removeBlock", "setAlarmContacts", "saveSession", "endSession", "saveAlarm", "endAlarm",
        "lastSeen", "savePushSubscription", "deletePushSubscription", "enqueueOutbox", "cancelAlarmPushes", "saveShare",
        "removeShare", "setStandingShare", "savePause", "removePause", "saveMeeting", "removeMeeting", "saveMessage", "removeMessage",
    ]

    @Test func aSaveThatCrossedThisRelaysOwnEndIsIgnoredAsTheStoreIgnoresIt() async throws {
        let store = try SQLiteStore.inMemory()
        try await store.apply(Array(Self.script.prefix(13).joined()))
        var cache = RelayState(try await store.load())
        // This relay ended the session and the alarm itself (its rules changed its cache; it stored the ends).
        let ends: [StoreChange] = [.endSession(id: "se_1", reason: "ended", at: 8_000), .removeShare(id: "sh_1"),
                                   .endAlarm(id: "al_1", reason: "cancelled", at: 8_000)]
        try await store.apply(ends)
        cache.unindex(session: "se_1")
        cache.unindex(share: "sh_1")
        cache.unindex(alarm: "al_1")
        cache.noteOwnWrite(changes: ends)
        // Another relay, not knowing yet, saved both again.
        let stale = Self.script[10].filter { if case .saveSession = $0 { true } else { false } } + Self.script[12].filter(\.isCached)
        try await store.apply(stale)
        cache.apply(stale)
        #expect(CacheSnapshot(cache) == CacheSnapshot(cache.reloaded(from: try await store.load(), afterRemoteChange: true)))
        #expect(cache.sessions["se_1"] == nil && cache.alarms["al_1"] == nil)
    }

    // MARK: The bus's encoding

    @Test func everyCachedChangeCrossesTheBusUnchanged() throws {
        let cached = Self.script.joined().filter(\.isCached)
        let commit = try Self.overTheBus(cached, versions: ["alice": 42, "bob": 7])
        #expect(commit.versions == ["alice": 42, "bob": 7])
        // No password hash goes on the bus: no cache holds one.
        let expected = cached.map { change -> StoreChange in
            if case let .createUser(profile, _, at) = change { return .createUser(profile, passwordHash: "", at: at) }
            return change
        }
        #expect(commit.changes == expected)
        let text = String(buffer: ClusterCodec.encode(ChangeNotice(node: "a", commits: [commit])))
        #expect(!text.contains("\"h\""), "no password hash in \(text)")
    }

    @Test func aNoticeTooLargeForTheBusGoesWithoutItsCommits() throws {
        let many = (0..<20_000).map { StoreChange.removeMessage(id: "mg_\($0)") }
        let event = ChangeNotice.Event(recipients: ["bob"], message: ["type": "session.ended"])
        let notice = ChangeNotice(node: "a", events: [event], commits: [ChangeNotice.Commit(versions: ["bob": 7], changes: many)])
        let payload = ClusterCodec.encode(notice)
        #expect(payload.readableBytes <= ClusterCodec.maxPayloadWithCommits)
        let received = try ClusterCodec.decodeNotice(payload)
        #expect(received.commits == nil, "the other relays reload instead")
        #expect(received.events == [event])
    }

    @Test func aNoticeWithoutReadableCommitsStillCarriesItsEventsButNoCommits() throws {
        let event = #"{"to": ["bob"], "event": {"type": "friend.request"}}"#
        for members in [
            "", // a relay of a version without commits at all
            #", "changesVersion": 3, "commits": []"#,
            #", "changesVersion": 1, "commits": [{"count": 3, "changes": []}]"#, // one cluster-wide count: the version before
            #", "changesVersion": 2"#,
            #", "changesVersion": 2, "commits": [{"versions": {"ann": 3}, "changes": [{"op": "teleport"}]}]"#,
            #", "changesVersion": 2, "commits": [{"versions": {"ann": 3}, "changes": [{"op": "addBlock", "blocker": "ann"}]}]"#,
            #", "changesVersion": 2, "commits": [{"versions": {"ann": "3"}, "changes": []}]"#,
            #", "changesVersion": 2, "commits": [{"versions": {"ann": -1}, "changes": []}]"#,
            #", "changesVersion": 2, "commits": [{"versions": [3], "changes": []}]"#,
            #", "changesVersion": 2, "commits": [{"versions": {"ann": 3}, "changes": [{"op": "enqueueOutbox"}]}]"#,
        ] {
            let notice = try ClusterCodec.decodeNotice(ByteBuffer(string: #"{"node": "b", "events": [\#(event)]\#(members)}"#))
            #expect(notice.commits == nil, "\(members)")
            #expect(notice.events.map(\.recipients) == [["bob"]])
        }
        let plain = try ClusterCodec.decodeNotice(ClusterCodec.encode(ChangeNotice(node: "b")))
        #expect(plain.commits == [], "a notice of events only has no commits to apply, and needs no reload")
    }
}
