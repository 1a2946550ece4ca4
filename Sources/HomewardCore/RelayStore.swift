/// Durable storage behind the relay. Every call is asynchronous, so that a networked store can sit
/// behind it without holding a thread per call; the relay awaits each call in turn, never on a
/// network event loop, and starts its next operation only once the previous one is stored.
public protocol RelayStore: Sendable {
    /// Everything the relay keeps in memory, read at start-up and again after a failed write.
    func load() async throws -> StoredState
    /// Applies the changes of one operation atomically; when this returns they are durable.
    /// When it throws, none of them is applied.
    func apply(_ changes: [StoreChange]) async throws
    func passwordHash(of username: String) async throws -> String?
    func username(forTokenHash hash: String) async throws -> String?
}

/// What a store hands back at start-up.
public struct StoredState: Sendable {
    public var users: [UserProfile] = []
    public var lastSeen: [String: Int64] = [:]
    public var tokens: [IssuedToken] = []
    public var friendships: [(String, String)] = []
    public var friendRequests: [(from: String, to: String)] = []
    public var blocks: [(blocker: String, blocked: String)] = []
    public var alarmContacts: [String: [String]] = [:]
    public var sessions: [FollowSession] = []
    public var alarms: [Alarm] = []
    public var pushSubscriptions: [PushSubscription] = []
    /// Share links not removed yet (some may have expired while the relay was down).
    public var shares: [ShareLink] = []

    public init() {}
}
