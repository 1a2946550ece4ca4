import HomewardProtocol

/// A friend with their presence.
public struct Friend: Sendable, Equatable {
    public var user: User
    public var online: Bool
    /// Unix milliseconds of the last connection close (or open), if known.
    public var lastSeen: Int64?

    init?(json: JSONValue) {
        guard let user = User(json: json) else { return nil }
        self.user = user
        self.online = json.bool("online") ?? false
        self.lastSeen = json.int64("lastSeen")
    }
}

/// The reply to `friend.list`.
public struct FriendList: Sendable, Equatable {
    public var friends: [Friend]
    /// People who asked us.
    public var incoming: [User]
    /// People we asked.
    public var outgoing: [User]

    init(json: JSONValue) {
        friends = json.array("friends").compactMap(Friend.init(json:))
        incoming = json.array("incoming").compactMap { User(json: $0) }
        outgoing = json.array("outgoing").compactMap { User(json: $0) }
    }
}

/// What `friend.request` did: asked, or (when they had already asked us) made us friends.
public enum FriendRequestOutcome: Sendable, Equatable {
    case requested
    case friends
}
