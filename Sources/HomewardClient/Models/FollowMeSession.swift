import HomewardProtocol

/// A follow-me session: one owner asking friends to watch them walk (the wire model's `SessionInfo`).
public typealias FollowMeSession = SessionInfo

/// The reply to `session.list`.
public typealias SessionList = SessionListReply
