import HomewardCore
import HomewardProtocol

/// A change notice's commits on the bus: `"changesVersion": 2` and
/// `"commits": [{"versions": {"ann": 4, "bob": 7}, "changes": [...]}]` (`versions` null when the store keeps none),
/// each change an object named by `op`. A receiver that finds another version, no version, or anything it
/// cannot read in them gets `commits == nil` and reloads its cache from the store; the notice's events
/// still go out. Password hashes are not sent (no cache holds them; a login reads the store).
extension ClusterCodec {
    /// Bumped whenever the encoding of a change, or what applying one means, changes.
    static let changesVersion: Int64 = 2

    static func members(of commits: [ChangeNotice.Commit]?) -> [(String, JSONValue)] {
        guard let commits else { return [] }
        return [
            ("changesVersion", .int(changesVersion)),
            ("commits", .array(commits.map { commit in
                .object([("versions", commit.versions.map(encode) ?? .null), ("changes", .array(commit.changes.map(encode)))])
            })),
        ]
    }

    /// The commits of a notice, or nil when they cannot be trusted to be what the sender committed.
    static func commits(in notice: JSONValue) -> [ChangeNotice.Commit]? {
        guard notice.int64("changesVersion") == changesVersion, case .array(let commits)? = notice["commits"] else { return nil }
        do {
            return try commits.map { commit in
                let fields = ChangeFields(commit)
                return ChangeNotice.Commit(versions: try fields.optionalVersions("versions"),
                                           changes: try fields.array("changes").map(decodeChange))
            }
        } catch {
            return nil
        }
    }

    /// Users in sorted order: the same commit always encodes the same.
    static func encode(_ versions: UserVersions) -> JSONValue {
        .object(versions.sorted { $0.key < $1.key }.map { ($0.key, .int($0.value)) })
    }

    static func encode(_ change: StoreChange) -> JSONValue {
        func object(_ op: String, _ members: [(String, JSONValue)]) -> JSONValue { .object([("op", .string(op))] + members) }
        switch change {
        case let .createUser(profile, _, at):
            return object("createUser", [("username", .string(profile.username)), ("name", .string(profile.name)), ("at", .int(at))])
        case let .createToken(hash, username, at):
            return object("createToken", [("hash", .string(hash)), ("username", .string(username)), ("at", .int(at))])
        case let .revokeToken(hash):
            return object("revokeToken", [("hash", .string(hash))])
        case let .useToken(hash, at):
            return object("useToken", [("hash", .string(hash)), ("at", .int(at))])
        case let .addFriendRequest(from, to, at):
            return object("addFriendRequest", [("from", .string(from)), ("to", .string(to)), ("at", .int(at))])
        case let .removeFriendRequest(from, to):
            return object("removeFriendRequest", [("from", .string(from)), ("to", .string(to))])
        case let .addFriendship(a, b, at):
            return object("addFriendship", [("a", .string(a)), ("b", .string(b)), ("at", .int(at))])
        case let .removeFriendship(a, b):
            return object("removeFriendship", [("a", .string(a)), ("b", .string(b))])
        case let .addBlock(blocker, blocked, at):
            return object("addBlock", [("blocker", .string(blocker)), ("blocked", .string(blocked)), ("at", .int(at))])
        case let .removeBlock(blocker, blocked):
            return object("removeBlock", [("blocker", .string(blocker)), ("blocked", .string(blocked))])
        case let .setAlarmContacts(owner, contacts):
            return object("setAlarmContacts", [("owner", .string(owner)), ("names", .strings(contacts))])
        case let .saveSession(session):
            return object("saveSession", [("session", encode(session))])
        case let .endSession(id, reason, at):
            return object("endSession", [("id", .string(id)), ("reason", .string(reason)), ("at", .int(at))])
        case let .saveAlarm(alarm):
            return object("saveAlarm", [("alarm", encode(alarm))])
        case let .endAlarm(id, reason, at):
            return object("endAlarm", [("id", .string(id)), ("reason", .string(reason)), ("at", .int(at))])
        case let .lastSeen(username, at):
            return object("lastSeen", [("username", .string(username)), ("at", .int(at))])
        case let .savePushSubscription(subscription):
            return object("savePushSubscription", [
                ("id", .string(subscription.id)), ("username", .string(subscription.username)),
                ("endpoint", .string(subscription.endpoint)), ("p256dh", .string(subscription.p256dh)),
                ("auth", .string(subscription.auth)), ("createdAt", .int(subscription.createdAt)),
                ("token", .optional(subscription.tokenHash)),
            ])
        case let .deletePushSubscription(id):
            return object("deletePushSubscription", [("id", .string(id))])
        case .enqueueOutbox:
            // Not cached anywhere (`StoreChange.isCached`): never sent. Should one be, it reads as unknown.
            return object("enqueueOutbox", [])
        case let .cancelAlarmPushes(alarmId):
            return object("cancelAlarmPushes", [("alarmId", .string(alarmId))])
        case let .saveShare(share):
            return object("saveShare", [
                ("id", .string(share.id)), ("sessionId", .string(share.sessionId)), ("owner", .string(share.owner)),
                ("tokenHash", .string(share.tokenHash)), ("createdAt", .int(share.createdAt)), ("expiresAt", .int(share.expiresAt)),
            ])
        case let .removeShare(id):
            return object("removeShare", [("id", .string(id))])
        case let .setStandingShare(owner, friends):
            return object("setStandingShare", [("owner", .string(owner)), ("names", .strings(friends))])
        case let .savePause(pause):
            return object("savePause", [("owner", .string(pause.owner)), ("from", .optional(pause.from)), ("until", optional(pause.until))])
        case let .removePause(owner, from):
            return object("removePause", [("owner", .string(owner)), ("from", .optional(from))])
        case let .saveMeeting(meeting):
            return object("saveMeeting", [
                ("id", .string(meeting.id)), ("owner", .string(meeting.owner)), ("name", .string(meeting.name)),
                ("lat", .double(meeting.lat)), ("lon", .double(meeting.lon)), ("time", .int(meeting.time)),
                ("createdAt", .int(meeting.createdAt)),
                ("invitees", .array(meeting.invitees.map { invitee in
                    .object([("username", .string(invitee.username)), ("response", .string(invitee.response.rawValue)),
                             ("queuedAt", .int(invitee.queuedAt)), ("deliveredAt", optional(invitee.deliveredAt))])
                })),
            ])
        case let .removeMeeting(id):
            return object("removeMeeting", [("id", .string(id))])
        case let .saveMessage(message):
            return object("saveMessage", [
                ("id", .string(message.id)), ("from", .string(message.from)), ("to", .string(message.to)),
                ("text", .string(message.text)), ("queuedAt", .int(message.queuedAt)), ("deliveredAt", optional(message.deliveredAt)),
            ])
        case let .removeMessage(id):
            return object("removeMessage", [("id", .string(id))])
        }
    }

    static func decodeChange(_ json: JSONValue) throws(DecodingError) -> StoreChange {
        let f = ChangeFields(json)
        switch try f.string("op") {
        case "createUser":
            return .createUser(UserProfile(username: try f.string("username"), name: try f.string("name")), passwordHash: "", at: try f.int("at"))
        case "createToken": return .createToken(hash: try f.string("hash"), username: try f.string("username"), at: try f.int("at"))
        case "revokeToken": return .revokeToken(hash: try f.string("hash"))
        case "useToken": return .useToken(hash: try f.string("hash"), at: try f.int("at"))
        case "addFriendRequest": return .addFriendRequest(from: try f.string("from"), to: try f.string("to"), at: try f.int("at"))
        case "removeFriendRequest": return .removeFriendRequest(from: try f.string("from"), to: try f.string("to"))
        case "addFriendship": return .addFriendship(try f.string("a"), try f.string("b"), at: try f.int("at"))
        case "removeFriendship": return .removeFriendship(try f.string("a"), try f.string("b"))
        case "addBlock": return .addBlock(blocker: try f.string("blocker"), blocked: try f.string("blocked"), at: try f.int("at"))
        case "removeBlock": return .removeBlock(blocker: try f.string("blocker"), blocked: try f.string("blocked"))
        case "setAlarmContacts": return .setAlarmContacts(owner: try f.string("owner"), try f.strings("names"))
        case "saveSession": return .saveSession(try decodeSession(f.object("session")))
        case "endSession": return .endSession(id: try f.string("id"), reason: try f.string("reason"), at: try f.int("at"))
        case "saveAlarm": return .saveAlarm(try decodeAlarm(f.object("alarm")))
        case "endAlarm": return .endAlarm(id: try f.string("id"), reason: try f.string("reason"), at: try f.int("at"))
        case "lastSeen": return .lastSeen(username: try f.string("username"), at: try f.int("at"))
        case "savePushSubscription":
            return .savePushSubscription(PushSubscription(
                id: try f.string("id"), username: try f.string("username"), endpoint: try f.string("endpoint"),
                p256dh: try f.string("p256dh"), auth: try f.string("auth"), createdAt: try f.int("createdAt"),
                tokenHash: try f.optionalString("token")))
        case "deletePushSubscription": return .deletePushSubscription(id: try f.string("id"))
        case "cancelAlarmPushes": return .cancelAlarmPushes(alarmId: try f.string("alarmId"))
        case "saveShare":
            return .saveShare(ShareLink(
                id: try f.string("id"), sessionId: try f.string("sessionId"), owner: try f.string("owner"),
                tokenHash: try f.string("tokenHash"), createdAt: try f.int("createdAt"), expiresAt: try f.int("expiresAt")))
        case "removeShare": return .removeShare(id: try f.string("id"))
        case "setStandingShare": return .setStandingShare(owner: try f.string("owner"), try f.strings("names"))
        case "savePause":
            return .savePause(LocationPause(owner: try f.string("owner"), from: try f.optionalString("from"), until: try f.optionalInt("until")))
        case "removePause": return .removePause(owner: try f.string("owner"), from: try f.optionalString("from"))
        case "saveMeeting":
            let invitees = try f.array("invitees").map { (json: JSONValue) throws(DecodingError) -> MeetingInvitee in
                let i = ChangeFields(json)
                guard let response = MeetingInvitee.Response(rawValue: try i.string("response")) else {
                    throw DecodingError.malformed("an unknown meeting response")
                }
                return MeetingInvitee(username: try i.string("username"), response: response, queuedAt: try i.int("queuedAt"),
                                      deliveredAt: try i.optionalInt("deliveredAt"))
            }
            return .saveMeeting(MeetingPoint(
                id: try f.string("id"), owner: try f.string("owner"), name: try f.string("name"), lat: try f.double("lat"),
                lon: try f.double("lon"), time: try f.int("time"), createdAt: try f.int("createdAt"), invitees: invitees))
        case "removeMeeting": return .removeMeeting(id: try f.string("id"))
        case "saveMessage":
            return .saveMessage(MessageInfo(
                id: try f.string("id"), from: try f.string("from"), to: try f.string("to"), text: try f.string("text"),
                queuedAt: try f.int("queuedAt"), deliveredAt: try f.optionalInt("deliveredAt")))
        case "removeMessage": return .removeMessage(id: try f.string("id"))
        case let op: throw .malformed("an unknown change \(op)")
        }
    }

    private static func encode(_ session: FollowSession) -> JSONValue {
        .object([
            ("id", .string(session.id)), ("owner", .string(session.owner)), ("note", .optional(session.note)),
            ("startedAt", .int(session.startedAt)),
            ("invitees", .array(session.invitees.map { name in
                .object([("username", .string(name)), ("state", .optional(session.state(of: name)?.rawValue))])
            })),
            ("checkInBy", optional(session.checkInBy)),
            ("destination", session.destination.map { destination in
                .object([("lat", .double(destination.lat)), ("lon", .double(destination.lon)), ("radius", .double(destination.radius))])
            } ?? .null),
            ("expiresAt", optional(session.expiresAt)), ("lostSince", optional(session.lostSince)),
        ])
    }

    private static func decodeSession(_ f: ChangeFields) throws(DecodingError) -> FollowSession {
        var session = FollowSession(id: try f.string("id"), owner: try f.string("owner"), note: try f.optionalString("note"),
                                    startedAt: try f.int("startedAt"))
        for json in try f.array("invitees") {
            let invitee = ChangeFields(json)
            guard let state = FollowSession.InviteState(rawValue: try invitee.string("state")) else {
                throw .malformed("an unknown invite state")
            }
            session.set(state, for: try invitee.string("username"))
        }
        session.checkInBy = try f.optionalInt("checkInBy")
        if let destination = try f.optionalObject("destination") {
            session.destination = Destination(lat: try destination.double("lat"), lon: try destination.double("lon"),
                                              radius: try destination.double("radius"))
        }
        session.expiresAt = try f.optionalInt("expiresAt")
        session.lostSince = try f.optionalInt("lostSince")
        return session
    }

    private static func encode(_ alarm: Alarm) -> JSONValue {
        let position: JSONValue = alarm.position.map { position in
            .object([
                ("lat", .double(position.lat)), ("lon", .double(position.lon)), ("acc", optional(position.acc)),
                ("alt", optional(position.alt)), ("spd", optional(position.spd)), ("hdg", optional(position.hdg)),
                ("batt", optional(position.batt)), ("ts", .int(position.ts)),
            ])
        } ?? .null
        return .object([
            ("id", .string(alarm.id)), ("owner", .string(alarm.owner)), ("text", .string(alarm.text)), ("position", position),
            ("createdAt", .int(alarm.createdAt)), ("auto", .bool(alarm.auto)), ("recipients", .strings(alarm.recipients)),
            ("acked", .strings(alarm.acked)),
            ("deliveredAt", .object(alarm.deliveredAt.sorted { $0.key < $1.key }.map { ($0.key, JSONValue.int($0.value)) })),
            ("repeats", .int(Int64(alarm.repeats))), ("nextRepeatAt", optional(alarm.nextRepeatAt)),
        ])
    }

    private static func decodeAlarm(_ f: ChangeFields) throws(DecodingError) -> Alarm {
        var position: Position?
        if let p = try f.optionalObject("position") {
            position = Position(lat: try p.double("lat"), lon: try p.double("lon"), acc: try p.optionalDouble("acc"),
                                alt: try p.optionalDouble("alt"), spd: try p.optionalDouble("spd"), hdg: try p.optionalDouble("hdg"),
                                batt: try p.optionalDouble("batt"), ts: try p.int("ts"))
        }
        var alarm = Alarm(id: try f.string("id"), owner: try f.string("owner"), text: try f.string("text"), position: position,
                          createdAt: try f.int("createdAt"), auto: try f.bool("auto"), recipients: try f.strings("recipients"))
        alarm.restore(acked: try f.strings("acked"))
        guard case .object(let delivered)? = f.json["deliveredAt"] else { throw .malformed("an alarm without deliveredAt") }
        for (name, time) in delivered {
            guard case .int(let ms) = time else { throw .malformed("a delivery time that is not an integer") }
            alarm.deliveredAt[name] = ms
        }
        guard let repeats = Int(exactly: try f.int("repeats")) else { throw .malformed("repeats out of range") }
        alarm.repeats = repeats
        alarm.nextRepeatAt = try f.optionalInt("nextRepeatAt")
        return alarm
    }

    private static func optional(_ value: Int64?) -> JSONValue { value.map(JSONValue.int) ?? .null }
    private static func optional(_ value: Double?) -> JSONValue { value.map(JSONValue.double) ?? .null }
}

/// Strict reading of one change's members: a member of the wrong type, or a required one missing, refuses
/// the change (and so the notice's commits), rather than guessing.
struct ChangeFields {
    let json: JSONValue
    init(_ json: JSONValue) { self.json = json }

    private func required<T>(_ key: String, _ read: (JSONValue) -> T?) throws(ClusterCodec.DecodingError) -> T {
        guard let value = json[key].flatMap(read) else { throw .malformed("a change without a valid \(key)") }
        return value
    }

    /// Absent and null both read as nil.
    private func optional<T>(_ key: String, _ read: (JSONValue) -> T?) throws(ClusterCodec.DecodingError) -> T? {
        if json[key] == nil || json[key] == .null { return nil }
        return try required(key, read)
    }

    private static func int(_ value: JSONValue) -> Int64? { if case .int(let int) = value { int } else { nil } }
    private static func object(_ value: JSONValue) -> ChangeFields? { if case .object = value { ChangeFields(value) } else { nil } }

    func string(_ key: String) throws(ClusterCodec.DecodingError) -> String { try required(key, \.stringValue) }
    func optionalString(_ key: String) throws(ClusterCodec.DecodingError) -> String? { try optional(key, \.stringValue) }
    func int(_ key: String) throws(ClusterCodec.DecodingError) -> Int64 { try required(key, Self.int) }
    func optionalInt(_ key: String) throws(ClusterCodec.DecodingError) -> Int64? { try optional(key, Self.int) }
    /// Any JSON number: the writer writes a whole double without its fraction only when asked to.
    func double(_ key: String) throws(ClusterCodec.DecodingError) -> Double { try required(key, \.numberValue) }
    func optionalDouble(_ key: String) throws(ClusterCodec.DecodingError) -> Double? { try optional(key, \.numberValue) }
    /// An object of usernames to non-negative integers (a commit's `versions`); absent and null read as nil.
    func optionalVersions(_ key: String) throws(ClusterCodec.DecodingError) -> UserVersions? {
        try optional(key) { value -> UserVersions? in
            guard case .object(let members) = value else { return nil }
            var versions = UserVersions()
            for (user, version) in members {
                guard case .int(let number) = version, number >= 0, versions.updateValue(number, forKey: user) == nil else { return nil }
            }
            return versions
        }
    }
    func bool(_ key: String) throws(ClusterCodec.DecodingError) -> Bool {
        try required(key) { if case .bool(let value) = $0 { value } else { nil } }
    }
    func array(_ key: String) throws(ClusterCodec.DecodingError) -> [JSONValue] {
        try required(key) { if case .array(let values) = $0 { values } else { nil } }
    }
    /// An array of strings only (one that is not refuses the whole array).
    func strings(_ key: String) throws(ClusterCodec.DecodingError) -> [String] {
        try required(key) { value in
            guard case .array(let values) = value else { return nil }
            let names = values.compactMap(\.stringValue)
            return names.count == values.count ? names : nil
        }
    }
    func object(_ key: String) throws(ClusterCodec.DecodingError) -> ChangeFields { try required(key, Self.object) }
    func optionalObject(_ key: String) throws(ClusterCodec.DecodingError) -> ChangeFields? { try optional(key, Self.object) }
}
