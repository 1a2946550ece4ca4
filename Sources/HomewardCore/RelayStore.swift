/// Durable storage behind the relay. Every call is synchronous and blocking: the relay calls
/// it only from its own serial queue, never from a network event loop.
public protocol RelayStore: Sendable {
    /// Everything the relay keeps in memory, read once at start-up.
    func load() throws -> StoredState
    /// Applies the changes of one operation atomically; when this returns they are durable.
    func apply(_ changes: [StoreChange]) throws
    func passwordHash(of username: String) throws -> String?
    func username(forTokenHash hash: String) throws -> String?
}

/// What a store hands back at start-up.
public struct StoredState: Sendable {
    public var users: [UserProfile] = []
    public var lastSeen: [String: Int64] = [:]
    public var friendships: [(String, String)] = []
    public var friendRequests: [(from: String, to: String)] = []
    public var alarmContacts: [String: [String]] = [:]
    public var sessions: [FollowSession] = []
    public var alarms: [Alarm] = []

    public init() {}
}
