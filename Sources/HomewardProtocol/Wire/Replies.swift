/// The members of an `ok` reply, one type per request that answers with more than `{"type": "ok"}`.
/// `fields` is the one encoder (the relay's, wrapped by `Message.ok`) and `init?(json:)` the one
/// decoder (every client's); nil when a required member is missing.
public protocol ReplyBody: Sendable {
    var fields: [(String, JSONValue)] { get }
    init?(json: JSONValue)
}

/// `register`, `login` (with a token) and `hello` (without).
public struct SignInReply: ReplyBody, Equatable {
    public var user: UserInfo
    public var token: String?
    /// What this relay offers beyond version 1 (protocol 1.1), e.g. `["share", "push"]`; empty from a version-1 relay.
    public var features: [String]
    /// The relay's VAPID public key (base64url) when it has `"push"`.
    public var vapidPublicKey: String?
    /// The relay node (`--node-id`) this connection is served by; relays without it send none.
    public var node: String?

    public init(user: UserInfo, token: String?, features: [String] = [], vapidPublicKey: String? = nil, node: String? = nil) {
        self.user = user
        self.token = token
        self.features = features
        self.vapidPublicKey = vapidPublicKey
        self.node = node
    }

    public var fields: [(String, JSONValue)] {
        var fields: [(String, JSONValue)] = [("user", user.json)]
        if let token { fields.append(("token", .string(token))) }
        fields.append(("features", .strings(features)))
        if let vapidPublicKey { fields.append(("vapidPublicKey", .string(vapidPublicKey))) }
        if let node { fields.append(("node", .string(node))) }
        return fields
    }

    public init?(json: JSONValue) {
        guard let user = UserInfo(json: json.object("user")) else { return nil }
        self.init(user: user, token: json.string("token"), features: json.strings("features"),
                  vapidPublicKey: json.string("vapidPublicKey"), node: json.string("node"))
    }
}

/// `friend.request`, `friend.accept` and `friend.remove`: where the friendship stands now.
public struct FriendshipReply: ReplyBody, Equatable {
    public enum Status: String, Sendable {
        /// Asked; the other side has not answered.
        case requested
        /// Friends now (accepted, or asked someone who had asked us).
        case friends
        /// Our pending request was taken back.
        case withdrawn
    }

    public var status: Status?
    /// The new friend, with `friends`.
    public var user: UserInfo?

    public init(status: Status?, user: UserInfo? = nil) {
        self.status = status
        self.user = user
    }

    public var fields: [(String, JSONValue)] {
        (status.map { [("status", JSONValue.string($0.rawValue))] } ?? []) + (user.map { [("user", $0.json)] } ?? [])
    }

    public init?(json: JSONValue) {
        self.init(status: json.string("status").flatMap(Status.init(rawValue:)), user: UserInfo(json: json.object("user")))
    }
}

/// `friend.list`.
public struct FriendListReply: ReplyBody, Equatable {
    public var friends: [FriendInfo]
    /// People who asked us.
    public var incoming: [UserInfo]
    /// People we asked.
    public var outgoing: [UserInfo]

    public init(friends: [FriendInfo], incoming: [UserInfo], outgoing: [UserInfo]) {
        self.friends = friends
        self.incoming = incoming
        self.outgoing = outgoing
    }

    public var fields: [(String, JSONValue)] {
        [("friends", .array(friends.map(\.json))), ("incoming", .array(incoming.map(\.json))),
         ("outgoing", .array(outgoing.map(\.json)))]
    }

    public init?(json: JSONValue) {
        self.init(friends: json.array("friends").compactMap { FriendInfo(json: $0) },
                  incoming: json.array("incoming").compactMap { UserInfo(json: $0) },
                  outgoing: json.array("outgoing").compactMap { UserInfo(json: $0) })
    }
}

/// `user.search`.
public struct UserSearchReply: ReplyBody, Equatable {
    public var users: [UserInfo]

    public init(users: [UserInfo]) { self.users = users }

    public var fields: [(String, JSONValue)] { [("users", .array(users.map(\.json)))] }

    public init?(json: JSONValue) {
        self.init(users: json.array("users").compactMap { UserInfo(json: $0) })
    }
}

/// `session.start`, `session.invite`, `session.checkin`: the session as it is now.
public struct SessionReply: ReplyBody, Equatable {
    public var session: SessionInfo

    public init(session: SessionInfo) { self.session = session }

    public var fields: [(String, JSONValue)] { [("session", session.json)] }

    public init?(json: JSONValue) {
        guard let session = SessionInfo(json: json.object("session")) else { return nil }
        self.init(session: session)
    }
}

/// `session.accept`: the session and the owner's last position, if any.
public struct SessionAcceptReply: ReplyBody, Equatable {
    public var session: SessionInfo
    public var position: Position?

    public init(session: SessionInfo, position: Position?) {
        self.session = session
        self.position = position
    }

    public var fields: [(String, JSONValue)] { [("session", session.json), ("position", position?.json ?? .null)] }

    public init?(json: JSONValue) {
        guard let session = SessionInfo(json: json.object("session")) else { return nil }
        self.init(session: session, position: Position(relayed: json.object("position")))
    }
}

/// `session.list`.
public struct SessionListReply: ReplyBody, Equatable {
    /// Our own active session, if any.
    public var own: SessionInfo?
    /// Sessions we accepted.
    public var following: [SessionInfo]
    /// Sessions we are invited to and have not answered.
    public var invites: [SessionInfo]

    public init(own: SessionInfo?, following: [SessionInfo], invites: [SessionInfo]) {
        self.own = own
        self.following = following
        self.invites = invites
    }

    public var fields: [(String, JSONValue)] {
        [("own", own?.json ?? .null), ("following", .array(following.map(\.json))), ("invites", .array(invites.map(\.json)))]
    }

    public init?(json: JSONValue) {
        self.init(own: SessionInfo(json: json.object("own")),
                  following: json.array("following").compactMap { SessionInfo(json: $0) },
                  invites: json.array("invites").compactMap { SessionInfo(json: $0) })
    }
}

/// Someone an alarm was sent to, and whether they were online to get it at once.
public struct AlarmRecipient: Sendable, Equatable {
    public var username: String
    public var online: Bool

    public init(username: String, online: Bool) {
        self.username = username
        self.online = online
    }
}

/// `alarm.raise`.
public struct AlarmRaiseReply: ReplyBody, Equatable {
    public var alarm: AlarmInfo
    public var recipients: [AlarmRecipient]
    /// The owner had paused sharing their location (friends' map): the alarm carries it to its recipients
    /// all the same, and so do the owner's positions while it is active. Sent only when true.
    public var pauseOverridden: Bool

    public init(alarm: AlarmInfo, recipients: [AlarmRecipient], pauseOverridden: Bool = false) {
        self.alarm = alarm
        self.recipients = recipients
        self.pauseOverridden = pauseOverridden
    }

    public var fields: [(String, JSONValue)] {
        [("alarm", alarm.json),
         ("recipients", .array(recipients.map { ["username": .string($0.username), "online": .bool($0.online)] }))]
            + (pauseOverridden ? [("pauseOverridden", JSONValue.bool(true))] : [])
    }

    public init?(json: JSONValue) {
        guard let alarm = AlarmInfo(json: json.object("alarm")) else { return nil }
        self.init(alarm: alarm, recipients: json.array("recipients").compactMap { recipient in
            recipient.string("username").map { AlarmRecipient(username: $0, online: recipient.bool("online") ?? false) }
        }, pauseOverridden: json.bool("pauseOverridden") ?? false)
    }
}

/// `alarm.contacts`.
public struct AlarmContactsReply: ReplyBody, Equatable {
    public var usernames: [String]

    public init(usernames: [String]) { self.usernames = usernames }

    public var fields: [(String, JSONValue)] { [("usernames", .strings(usernames))] }

    public init?(json: JSONValue) {
        self.init(usernames: json.strings("usernames"))
    }
}
