/// A user as others see them: `{username, name}`.
public struct UserInfo: Sendable, Hashable {
    public var username: String
    public var name: String

    public init(username: String, name: String) {
        self.username = username
        self.name = name
    }

    public var json: JSONValue { ["username": .string(username), "name": .string(name)] }

    /// `name` defaults to the username when missing.
    public init?(json: JSONValue?) {
        guard let json, let username = json.string("username") else { return nil }
        self.init(username: username, name: json.string("name") ?? username)
    }
}

/// A friend with their presence, as `friend.list` lists them: `{username, name, online, lastSeen}`.
public struct FriendInfo: Sendable, Equatable {
    public var user: UserInfo
    public var online: Bool
    /// Unix milliseconds of the last connection close (or open), if known.
    public var lastSeen: Int64?

    public init(user: UserInfo, online: Bool, lastSeen: Int64?) {
        self.user = user
        self.online = online
        self.lastSeen = lastSeen
    }

    public var json: JSONValue {
        ["username": .string(user.username), "name": .string(user.name), "online": .bool(online),
         "lastSeen": lastSeen.map(JSONValue.int) ?? .null]
    }

    public init?(json: JSONValue?) {
        guard let json, let user = UserInfo(json: json) else { return nil }
        self.init(user: user, online: json.bool("online") ?? false, lastSeen: json.int64("lastSeen"))
    }
}
