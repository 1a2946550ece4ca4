import HomewardProtocol

/// A friend with their presence (the wire model's `FriendInfo`).
public typealias Friend = FriendInfo

/// The reply to `friend.list`.
public typealias FriendList = FriendListReply

/// What `friend.request` did: asked, or (when they had already asked us) made us friends.
public enum FriendRequestOutcome: Sendable, Equatable {
    case requested
    case friends
}
